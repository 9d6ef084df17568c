/* The journey builder: a journey's definition (journeys/definition.py) as rows, and the
 * journey pages' small behaviours.
 *
 * The definition lives in the #id_definition textarea as JSON: the form posts that, and
 * the builder rewrites it after every change. The builder edits the parsed object in
 * place, so whatever it has no control for stays as written. "JSON" shows the textarea
 * itself; a definition the builder cannot show (not an object, a recurring campaign's
 * schedule, steps that are not objects) stays in the JSON view with a note. After every
 * change (debounced) the definition goes to the check URL, which answers the steps in
 * words or every problem by its path (steps[2].timeout): each problem is shown next to
 * the row or field its path names, as the server's are after a refused save. All text
 * reaches the page through textContent. */
(function () {
  "use strict";

  /* Forms that ask first (Archive): data-confirm holds the question. */
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

  /* Parts of a form shown only for one choice: data-show-for="name=value[,value]". */
  const dependents = document.querySelectorAll("[data-show-for]");
  function showDependents() {
    for (const part of dependents) {
      const [name, values] = part.dataset.showFor.split("=");
      const wanted = values.split(",");
      const controls = document.querySelectorAll("[name='" + name + "']");
      let value = "";
      for (const control of controls) {
        if ((control.type === "radio" || control.type === "checkbox") && !control.checked) continue;
        value = control.value;
      }
      part.hidden = !wanted.includes(value);
    }
  }
  if (dependents.length) {
    document.addEventListener("change", showDependents);
    showDependents();
  }

  const box = document.getElementById("wb-journey");
  if (!box) return;
  const options = JSON.parse(document.getElementById("wb-journey-options").textContent);
  const serverProblems = JSON.parse(document.getElementById("wb-journey-problems").textContent);
  const form = document.getElementById("wb-journey-form");
  const textarea = box.querySelector("#id_definition");
  const builderEl = box.querySelector("#wb-builder");
  const jsonEl = box.querySelector("#wb-json");
  const note = box.querySelector("#wb-builder-note");
  const tabBuilder = box.querySelector("#wb-tab-builder");
  const tabJson = box.querySelector("#wb-tab-json");
  const numberSelect = document.getElementById("id_phone_number");
  const checkBox = document.getElementById("wb-check");
  const checkState = document.getElementById("wb-check-state");
  const checkSteps = document.getElementById("wb-check-steps");
  const checkProblems = document.getElementById("wb-check-problems");
  const csrfInput = form.querySelector("input[name=csrfmiddlewaretoken]");

  const END = "end";
  const WEEKDAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
  const DAY_LABELS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
  const STEP_TYPES = [
    ["send", "Send a message"], ["wait", "Wait"], ["branch", "Branch (if … else)"],
    ["split", "Random split"], ["emit", "Send an event out"], ["exit", "Exit"],
  ];
  const ADD_LABELS = {send: "+ Send", wait: "+ Wait", branch: "+ Branch", split: "+ Split", emit: "+ Event out", exit: "+ Exit"};
  const OP_LABELS = {
    eq: "is", ne: "is not", in: "is one of", contains: "contains", starts_with: "starts with",
    exists: "is set", gt: "is more than", gte: "is at least", lt: "is less than", lte: "is at most",
  };
  const ORDER_OPS = ["gt", "gte", "lt", "lte"];
  const OUTCOME_LABELS = {
    sent: "was sent", delivered: "was delivered", read: "was read", clicked: "was clicked",
    replied: "got a reply", failed: "failed", not_sent: "was not sent",
    not_delivered: "was not delivered", not_read: "was not read",
  };
  const SOURCE_LABELS = {field: "Contact field", property: "Event property", value: "Fixed value", click: "Tracked link"};
  const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)$/;
  const CONTACT_OPS = {};
  for (const f of options.contact_fields) CONTACT_OPS[f.name] = f.ops;

  let def = null;
  let mode = "json";
  let problems = serverProblems || {};
  let timer = null;
  let asked = 0;

  /* ---- small helpers ------------------------------------------------------------------ */

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function isObject(x) {
    return x !== null && typeof x === "object" && !Array.isArray(x);
  }

  function setOrDelete(obj, key, value) {
    if (value === "" || value === null || value === undefined) delete obj[key];
    else obj[key] = value;
  }

  /* A number typed: the number, "" when blank, the text itself when it is none (the
     check then says what is wrong). */
  function numberFrom(text) {
    const trimmed = String(text).trim();
    if (!trimmed) return "";
    return NUMBER.test(trimmed) ? Number(trimmed) : trimmed;
  }

  function uid(prefix) {
    uid.n = (uid.n || 0) + 1;
    return "wb-jb-" + prefix + "-" + uid.n;
  }

  function input(value, onInput, attrs) {
    const node = el("input");
    node.type = "text";
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "className") node.className = v;
      else node.setAttribute(k, v);
    }
    node.value = value === undefined || value === null ? "" : String(value);
    node.addEventListener("input", function () { onInput(node.value); });
    return node;
  }

  function numberInput(value, onInput, attrs) {
    const node = input(value, function (text) { onInput(numberFrom(text)); }, Object.assign({inputmode: "decimal"}, attrs || {}));
    node.classList.add("wb-jb-number");
    return node;
  }

  function select(choices, value, onChange, label) {
    const node = el("select");
    for (const [v, text] of choices) node.append(new Option(text, v));
    const known = choices.some(function (c) { return c[0] === value; });
    if (!known && value !== undefined && value !== null && value !== "") {
      node.append(new Option(String(value) + " (not offered)", String(value)));
    }
    node.value = value === undefined || value === null ? "" : String(value);
    if (label) node.setAttribute("aria-label", label);
    node.addEventListener("change", function () { onChange(node.value); });
    return node;
  }

  function checkbox(checked, onChange, text) {
    const wrap = el("label", "wb-jb-check");
    const node = el("input");
    node.type = "checkbox";
    node.checked = Boolean(checked);
    node.addEventListener("change", function () { onChange(node.checked); });
    wrap.append(node, el("span", null, text));
    return wrap;
  }

  function datalist(values) {
    const list = el("datalist");
    list.id = uid("list");
    for (const v of values) list.append(new Option(v, v));
    builderEl.append(list);
    return list.id;
  }

  /* One labelled row; ``path`` is the definition path its problems are shown at. */
  function row(label, controls, path, help) {
    const wrap = el("div", "form-row wb-jb-row");
    if (path) {
      wrap.dataset.path = path;
      wrap.dataset.node = "";
    }
    const flex = el("div", "flex-container");
    const first = Array.isArray(controls) ? controls[0] : controls;
    const labelEl = el("label", null, label);
    if (first && first.tagName && ["INPUT", "SELECT", "TEXTAREA"].includes(first.tagName)) {
      first.id = first.id || uid("field");
      labelEl.htmlFor = first.id;
    }
    flex.append(labelEl);
    const holder = el("div", "wb-jb-controls");
    for (const c of Array.isArray(controls) ? controls : [controls]) holder.append(c);
    flex.append(holder);
    wrap.append(flex);
    if (help) wrap.append(el("div", "help", help));
    return wrap;
  }

  function section(title, help) {
    const part = el("div", "wb-jb-section");
    part.append(el("h3", null, title));
    if (help) part.append(el("p", "help wb-jb-help", help));
    return part;
  }

  function button(text, className, onClick, title) {
    const node = el("button", className, text);
    node.type = "button";
    if (title) {
      node.title = title;
      node.setAttribute("aria-label", title);
    }
    node.addEventListener("click", onClick);
    return node;
  }

  /* ---- changes ------------------------------------------------------------------------ */

  function sync() {
    textarea.value = JSON.stringify(def, null, 2);
  }

  function changed() {
    sync();
    schedule();
  }

  /* A change that moves rows (add, remove, reorder, a type): paths change, so marks go. */
  function restructured() {
    problems = {};
    render();
    schedule();
  }

  /* ---- the number's templates -------------------------------------------------------- */

  function accountId() {
    if (options.account) return options.account;
    if (!numberSelect) return null;
    const chosen = numberSelect.options[numberSelect.selectedIndex];
    return chosen && chosen.dataset.account ? parseInt(chosen.dataset.account, 10) : null;
  }

  function accountTemplates() {
    const account = accountId();
    return options.templates.filter(function (t) { return account !== null && t.account === account; });
  }

  function templateNames() {
    const names = [];
    for (const t of accountTemplates()) if (!names.includes(t.name)) names.push(t.name);
    return names;
  }

  function templateVersions(name) {
    return accountTemplates().filter(function (t) { return t.name === name; });
  }

  function templateFor(step) {
    const found = templateVersions(step.template);
    if (step.language) return found.find(function (t) { return t.language === step.language; }) || null;
    return found.find(function (t) { return t.status === "APPROVED"; }) || found[0] || null;
  }

  /* ---- rendering ---------------------------------------------------------------------- */

  function render() {
    builderEl.replaceChildren();
    builderEl.append(entrySection(), settingsSection(), stepsSection());
    sync();
    markErrors(problems);
  }

  function entrySection() {
    const part = section("How people enter");
    const entry = def.entry;
    part.dataset.path = "entry";
    part.dataset.node = "";
    const types = [["event", "An event (sent through the API)"], ["segment", "Newly in a segment"], ["date", "A date of theirs (a birthday, a renewal)"]];
    part.append(row("Enters on", select(types, entry.type, function (value) {
      if (value === "event") def.entry = {type: "event", event: ""};
      else if (value === "segment") {
        const first = options.segments[0];
        def.entry = {type: "segment", segment: first ? first.id : 0, every_minutes: 60};
        delete def.key;
      } else {
        def.entry = {type: "date", field: "birthday", at: "10:00", yearly: true};
        delete def.key;
      }
      restructured();
    }, "Entry type"), "entry.type"));
    if (entry.type === "event") {
      const events = datalist([options.reply_event]);
      part.append(row("Event", input(entry.event, function (v) { entry.event = v.trim(); changed(); }, {list: events, placeholder: "cart_updated", className: "wb-jb-event"}), "entry.event",
        "The name your system sends to POST /api/v1/events; " + options.reply_event + " is a message a person writes to the number."));
    } else if (entry.type === "segment") {
      const segments = options.segments.map(function (s) { return [String(s.id), s.name]; });
      if (!segments.length) segments.push(["", "(there is no segment yet)"]);
      part.append(row("Segment", select(segments, String(entry.segment || ""), function (v) { entry.segment = parseInt(v, 10) || v; changed(); }, "Segment"), "entry.segment",
        "Who newly fits its rules enters; who fits already stays out unless ticked below."));
      part.append(row("Checked every", [numberInput(entry.every_minutes, function (v) { setOrDelete(entry, "every_minutes", v); changed(); }, {placeholder: "60"}), el("span", "wb-words", "minutes")], "entry.every_minutes"));
      part.append(row("", checkbox(entry.backfill, function (v) { setOrDelete(entry, "backfill", v || ""); changed(); }, "Also enter who is in it when it goes live"), "entry.backfill"));
    } else if (entry.type === "date") {
      const fields = datalist(options.fields);
      part.append(row("Date field", input(entry.field, function (v) { entry.field = v.trim(); changed(); }, {list: fields, placeholder: "birthday"}), "entry.field",
        "A contact field holding a date (YYYY-MM-DD)."));
      part.append(row("Days from it", numberInput(entry.offset_days, function (v) { setOrDelete(entry, "offset_days", v); changed(); }, {placeholder: "0"}), "entry.offset_days",
        "0: on the day; -3: three days before; 7: a week after."));
      const at = input(entry.at, function (v) { entry.at = v; changed(); });
      at.type = "time";
      part.append(row("At (their time)", at, "entry.at"));
      part.append(row("", checkbox(entry.yearly, function (v) { setOrDelete(entry, "yearly", v || ""); changed(); }, "Every year (a birthday, an anniversary)"), "entry.yearly"));
    }
    return part;
  }

  function settingsSection() {
    const part = section("Settings");
    const fields = datalist(options.fields);
    const zones = datalist(options.zones);
    if (def.entry.type === "event") {
      part.append(row("One instance per", input(def.key, function (v) { setOrDelete(def, "key", v.trim()); changed(); }, {placeholder: "cart_id", className: "wb-jb-key"}), "key",
        "An event property: each cart is its own way through; the same cart updated again starts its wait over. Blank: one per person."));
    }
    const exits = el("div", "wb-jb-rows");
    exits.dataset.path = "exits";
    exits.dataset.node = "";
    (def.exits || []).forEach(function (exit, index) {
      const line = el("div", "wb-jb-line");
      line.dataset.path = "exits[" + index + "]";
      line.dataset.node = "";
      line.append(
        input(exit.event, function (v) { exit.event = v.trim(); changed(); }, {placeholder: "checkout", "aria-label": "Exit event", className: "wb-jb-exit-event"}),
        el("span", "wb-words", "because"),
        input(exit.reason, function (v) { setOrDelete(exit, "reason", v); changed(); }, {placeholder: "bought", "aria-label": "Exit reason", className: "wb-jb-exit-reason"}),
        button("×", "wb-remove", function () {
          def.exits.splice(index, 1);
          if (!def.exits.length) delete def.exits;
          restructured();
        }, "Remove this exit"));
      exits.append(line);
    });
    exits.append(button("+ Exit event", "wb-jb-add wb-jb-add-exit", function () {
      def.exits = def.exits || [];
      def.exits.push({event: "", reason: ""});
      restructured();
    }));
    part.append(row("Leaves on", exits, "exits", "An event that ends the person's way through (for the same key when keyed), with the reason shown on the customer page."));

    const reEntry = def.re_entry;
    const reKind = isObject(reEntry) ? "after_days" : (reEntry || "every_time");
    const reControls = [select([["every_time", "every time"], ["once", "once only"], ["after_days", "once per so many days"]], reKind, function (v) {
      if (v === "every_time") delete def.re_entry;
      else if (v === "once") def.re_entry = "once";
      else def.re_entry = {after_days: 30};
      restructured();
    }, "Re-entry")];
    if (reKind === "after_days") {
      reControls.push(numberInput(reEntry.after_days, function (v) { def.re_entry.after_days = v; changed(); }, {"aria-label": "Days", className: "wb-jb-days"}), el("span", "wb-words", "days"));
    }
    part.append(row("Enters again", reControls, "re_entry"));

    const [start, end] = typeof def.window === "string" && def.window.includes("-") ? def.window.split("-") : ["", ""];
    const startInput = input(start, windowChanged, {"aria-label": "Window start"});
    const endInput = input(end, windowChanged, {"aria-label": "Window end"});
    startInput.type = endInput.type = "time";
    function windowChanged() {
      setOrDelete(def, "window", startInput.value && endInput.value ? startInput.value + "-" + endInput.value : "");
      changed();
    }
    part.append(row("Sends between", [startInput, el("span", "wb-words", "and"), endInput], "window",
      "In each person's own time; a send due outside waits for the opening. Blank: any time."));
    part.append(row("Default time zone", input(def.time_zone, function (v) { setOrDelete(def, "time_zone", v.trim()); changed(); }, {list: zones, placeholder: "UTC", className: "wb-jb-zone"}), "time_zone",
      "For people whose number does not tell their zone."));
    part.append(row("Time zone field", input(def.time_zone_field, function (v) { setOrDelete(def, "time_zone_field", v.trim()); changed(); }, {list: fields, placeholder: "timezone"}), "time_zone_field",
      "A contact field holding each person's zone (Europe/Lisbon), read first."));
    part.append(row("Hold out", [numberInput(def.holdout_percent, function (v) { setOrDelete(def, "holdout_percent", v); changed(); }, {placeholder: "0", className: "wb-jb-days"}), el("span", "wb-words", "% of those who enter (0 to 50): they pass every step and are sent nothing")], "holdout_percent"));
    const goal = isObject(def.goal) ? def.goal : {};
    function goalChanged() {
      if (!goalEvent.value.trim() && goalDays.value.trim() === "") delete def.goal;
      else {
        def.goal = def.goal || {};
        setOrDelete(def.goal, "event", goalEvent.value.trim());
        setOrDelete(def.goal, "within_days", numberFrom(goalDays.value));
      }
      changed();
    }
    const goalEvent = input(goal.event, goalChanged, {placeholder: "purchase", "aria-label": "Goal event"});
    const goalDays = input(goal.within_days, goalChanged, {placeholder: "7", "aria-label": "Goal days", className: "wb-jb-days"});
    part.append(row("Goal", [goalEvent, el("span", "wb-words", "within"), goalDays, el("span", "wb-words", "days of entering")], "goal",
      "What counts as converted (an event in, or a conversion reported): measured against those held out."));
    part.append(row("Too late after", [numberInput(def.lateness_hours, function (v) { setOrDelete(def, "lateness_hours", v); changed(); }, {placeholder: "24", className: "wb-jb-days"}), el("span", "wb-words", "hours: a step that could not fire for this long (the journey paused) is skipped, saying so")], "lateness_hours"));
    part.append(row("Frequency cap", [
      input(def.frequency_cap, function (v) { setOrDelete(def, "frequency_cap", v.trim()); changed(); }, {placeholder: "the site's", className: "wb-jb-cap"}),
      checkbox(def.frequency_cap_defer, function (v) { setOrDelete(def, "frequency_cap_defer", v || ""); changed(); }, "send capped people later instead of skipping"),
    ], "frequency_cap", 'At most N marketing messages per person in D days, across campaigns: "2/7d"; "off" for none.'));
    return part;
  }

  /* ---- steps -------------------------------------------------------------------------- */

  function stepIds() {
    return def.steps.map(function (s) { return s.id; });
  }

  function newId(type) {
    const taken = stepIds();
    if (!taken.includes(type)) return type;
    for (let n = 2; ; n++) if (!taken.includes(type + "-" + n)) return type + "-" + n;
  }

  function newStep(type) {
    const id = newId(type);
    if (type === "send") return {id: id, type: "send", template: templateNames()[0] || ""};
    if (type === "wait") return {id: id, type: "wait", delay: {hours: 1}};
    if (type === "branch") return {id: id, type: "branch", if: {last_message: "read"}};
    if (type === "split") return {id: id, type: "split", arms: [{percent: 50, next: END}, {percent: 50, next: END}]};
    if (type === "emit") return {id: id, type: "emit", event: ""};
    return {id: id, type: "exit", reason: "done"};
  }

  const TARGET_KEYS = ["next", "then", "else", "on_event", "on_reply", "on_timeout"];

  function renameTargets(from, to) {
    for (const step of def.steps) {
      for (const key of TARGET_KEYS) if (step[key] === from) step[key] = to;
      if (Array.isArray(step.arms)) for (const arm of step.arms) if (isObject(arm) && arm.next === from) arm.next = to;
    }
  }

  function stepsSection() {
    const part = section("Steps", "Each step runs after the one before it, unless it says where to go; \u201cthe end\u201d ends the journey.");
    part.dataset.path = "steps";
    part.dataset.node = "";
    const list = el("ol", "wb-jb-steps");
    list.id = "wb-steps";
    def.steps.forEach(function (step, index) { list.append(stepRow(step, index)); });
    if (!def.steps.length) list.append(el("p", "wb-empty", "No steps yet: add one below."));
    part.append(list);
    const bar = el("div", "wb-add wb-jb-add-steps");
    for (const [type] of STEP_TYPES) {
      bar.append(button(ADD_LABELS[type], "wb-add-" + type, function () {
        def.steps.push(newStep(type));
        restructured();
        const rows = builderEl.querySelectorAll(".wb-step");
        const last = rows[rows.length - 1];
        if (last) last.querySelector("input").focus();
      }));
    }
    part.append(bar);
    return part;
  }

  /* A select of where to go: the next step (the default), any other step, or the end. */
  function targetSelect(index, obj, key, label, path, allowDefault) {
    const following = def.steps[index + 1];
    const choices = [];
    if (allowDefault !== false) choices.push(["", "the next step (" + (following ? following.id : "the end") + ")"]);
    def.steps.forEach(function (s, i) { if (i !== index && s.id) choices.push([s.id, s.id]); });
    choices.push([END, "the end"]);
    return row(label, select(choices, obj[key] || "", function (v) {
      setOrDelete(obj, key, v);
      changed();
    }, label), path);
  }

  function stepRow(step, index) {
    const path = "steps[" + index + "]";
    const item = el("li", "wb-step");
    item.dataset.path = path;
    item.dataset.node = "";
    item.dataset.type = step.type;
    item.dataset.step = step.id || "";
    const head = el("div", "wb-step-head");
    head.dataset.path = path + ".id";
    head.dataset.node = "";
    head.append(el("span", "wb-step-number", String(index + 1)));
    const idInput = input(step.id, function () {}, {"aria-label": "Step id", className: "wb-step-id", placeholder: "remind", spellcheck: "false"});
    idInput.addEventListener("change", function () {
      const before = step.id;
      const after = idInput.value.trim();
      step.id = after;
      if (before && after && before !== after) renameTargets(before, after);
      render();
      schedule();
    });
    head.append(idInput);
    head.append(select(STEP_TYPES, step.type, function (type) {
      const replacement = newStep(type);
      replacement.id = step.id;
      if ("next" in step && ["send", "wait", "emit"].includes(type)) replacement.next = step.next;
      def.steps[index] = replacement;
      restructured();
    }, "Step type"));
    const tools = el("span", "wb-step-tools");
    const up = button("↑", "wb-step-up", function () {
      def.steps.splice(index - 1, 0, def.steps.splice(index, 1)[0]);
      restructured();
    }, "Move up");
    up.disabled = index === 0;
    const down = button("↓", "wb-step-down", function () {
      def.steps.splice(index + 1, 0, def.steps.splice(index, 1)[0]);
      restructured();
    }, "Move down");
    down.disabled = index === def.steps.length - 1;
    tools.append(up, down, button("×", "wb-remove", function () {
      def.steps.splice(index, 1);
      restructured();
    }, "Remove this step"));
    head.append(tools);
    item.append(head);
    const body = el("div", "wb-step-body");
    if (step.type === "send") sendControls(body, step, index, path);
    else if (step.type === "wait") waitControls(body, step, index, path);
    else if (step.type === "branch") branchControls(body, step, index, path);
    else if (step.type === "split") splitControls(body, step, index, path);
    else if (step.type === "emit") {
      body.append(row("Event type", input(step.event, function (v) { step.event = v.trim(); changed(); }, {placeholder: "order.cancel_requested"}), path + ".event",
        "Sent out to the event subscriptions that take it, with the person and the journey."));
      body.append(targetSelect(index, step, "next", "Then", path + ".next"));
    } else if (step.type === "exit") {
      body.append(row("Reason", input(step.reason, function (v) { step.reason = v; changed(); }, {placeholder: "done"}), path + ".reason",
        "Shown as why they left, on the journey's page and the customer's."));
    }
    item.append(body);
    return item;
  }

  /* ---- send --------------------------------------------------------------------------- */

  function pathGet(root, steps) {
    let node = root;
    for (const s of steps) {
      if (node === null || typeof node !== "object" || !(s in node)) return null;
      node = node[s];
    }
    return node === undefined ? null : node;
  }

  function pathSet(root, steps, value) {
    let node = root;
    steps.forEach(function (s, i) {
      if (i === steps.length - 1) {
        node[s] = value;
        return;
      }
      const next = steps[i + 1];
      if (node[s] === null || typeof node[s] !== "object") node[s] = typeof next === "number" ? [] : {};
      node = node[s];
    });
  }

  function pathDelete(root, steps) {
    const chain = [root];
    for (let i = 0; i < steps.length - 1; i++) {
      const child = chain[i][steps[i]];
      if (!child || typeof child !== "object") return;
      chain.push(child);
    }
    for (let i = steps.length - 1; i >= 0; i--) {
      const parent = chain[i];
      if (i < steps.length - 1 && Object.keys(parent[steps[i]]).length) return;
      if (Array.isArray(parent)) parent[steps[i]] = {};
      else delete parent[steps[i]];
    }
  }

  function sendControls(body, step, index, path) {
    const names = templateNames();
    const choices = names.map(function (name) {
      const versions = templateVersions(name);
      const usable = versions.some(function (t) { return !t.unusable.length && t.status === "APPROVED"; });
      return [name, usable ? name : name + " (" + (versions[0].unusable[0] || versions[0].status.toLowerCase()) + ")"];
    });
    if (!choices.length) choices.push(["", accountId() === null ? "(choose the number first)" : "(the number's account has no template)"]);
    body.append(row("Template", select(choices, step.template || "", function (v) {
      step.template = v;
      delete step.language;
      render();
      schedule();
    }, "Template"), path + ".template"));
    const versions = templateVersions(step.template);
    const languages = versions.map(function (t) { return [t.language, t.language + (t.status === "APPROVED" ? "" : " (" + t.status.toLowerCase() + ")")]; });
    languages.unshift(["", versions.length > 1 ? "(choose one)" : "(its only language)"]);
    body.append(row("Language", select(languages, step.language || "", function (v) {
      setOrDelete(step, "language", v);
      render();
      schedule();
    }, "Language"), path + ".language"));
    body.append(mappingTable(step, path));
    const mapping = isObject(step.mapping) ? step.mapping : {};
    if (JSON.stringify(mapping).includes('"click":true') || step.link) {
      body.append(row("Tracked link goes to", input(step.link, function (v) { setOrDelete(step, "link", v.trim()); changed(); }, {placeholder: "https://shop.example.com/cart", className: "wb-jb-link", type: "url"}), path + ".link",
        "Each person gets a link of their own that leads here; clicks are counted on the step's report."));
    }
    windowControls(body, step, path);
    body.append(targetSelect(index, step, "next", "Then", path + ".next"));
  }

  function mappingTable(step, path) {
    const template = templateFor(step);
    const wrap = el("div", "wb-jb-mapping");
    wrap.dataset.path = path + ".mapping";
    wrap.dataset.node = "";
    if (!template) {
      wrap.append(el("p", "wb-muted", step.template ? "No template " + step.template + " on this number's account." : "Choose a template."));
      return wrap;
    }
    if (!template.slots.length) {
      wrap.append(el("p", "wb-muted", "This template takes no parameters."));
      return wrap;
    }
    const table = el("table", "wb-mapping wb-jb-mapping-table");
    const head = el("tr");
    for (const text of ["Parameter", "Comes from", "Name or value", "If empty"]) head.append(el("th", null, text));
    table.append(head);
    const fields = datalist(options.fields);
    for (const slot of template.slots) {
      const tr = el("tr");
      tr.dataset.slot = slot.path.join(":");
      const label = slot.label + (slot.example ? " (e.g. " + slot.example + ")" : "");
      tr.append(el("td", null, label));
      const source = pathGet(step.mapping || {}, slot.path);
      const kind = isObject(source) ? (["field", "property", "value", "click"].find(function (k) { return k in source; }) || "") : "";
      const clickable = slot.path[slot.path.length - 2] === "body" || slot.kind === "url suffix";
      const kinds = [];
      if (!slot.required) kinds.push(["", "(nothing)"]);
      else if (!kind) kinds.push(["", "(choose)"]);
      for (const k of ["field", "property", "value"]) kinds.push([k, SOURCE_LABELS[k]]);
      if (clickable) kinds.push(["click", SOURCE_LABELS.click]);
      const cellKind = el("td");
      const cellName = el("td");
      const cellFallback = el("td");
      cellKind.append(select(kinds, kind, function (v) {
        step.mapping = isObject(step.mapping) ? step.mapping : {};
        if (!v) pathDelete(step.mapping, slot.path);
        else if (v === "click") pathSet(step.mapping, slot.path, {click: true});
        else {
          const keep = isObject(source) ? (source.field || source.property || source.value || "") : "";
          const fresh = {};
          fresh[v] = keep;
          pathSet(step.mapping, slot.path, fresh);
        }
        if (!Object.keys(step.mapping).length) delete step.mapping;
        render();
        schedule();
      }, slot.label + " comes from"));
      if (kind && kind !== "click") {
        const attrs = {"aria-label": slot.label + " " + SOURCE_LABELS[kind], className: "wb-source"};
        if (kind === "field") attrs.list = fields;
        attrs.placeholder = kind === "field" ? "name" : kind === "property" ? "cart_path" : "text";
        cellName.append(input(source[kind], function (v) { source[kind] = v; changed(); }, attrs));
        if (kind !== "value") {
          cellFallback.append(input(source.fallback, function (v) { setOrDelete(source, "fallback", v); changed(); }, {"aria-label": slot.label + " fallback", placeholder: "fallback", className: "wb-fallback"}));
        }
      } else if (kind === "click") {
        cellName.append(el("span", "wb-muted", "each person's own link"));
      }
      tr.append(cellKind, cellName, cellFallback);
      table.append(tr);
    }
    wrap.append(table);
    return wrap;
  }

  function windowControls(body, step, path) {
    const open = isObject(step.if_window_open) ? step.if_window_open : null;
    const where = path + ".if_window_open";
    const part = el("div", "wb-jb-window");
    part.dataset.path = where;
    part.dataset.node = "";
    part.append(checkbox(Boolean(open), function (v) {
      if (v) step.if_window_open = {text: ""};
      else delete step.if_window_open;
      render();
      schedule();
    }, "If the person's 24-hour window is open, send this text instead (free of charge)"));
    if (open) {
      const text = el("textarea", "wb-jb-text");
      text.rows = 3;
      text.value = open.text || "";
      text.setAttribute("aria-label", "Text when the window is open");
      text.addEventListener("input", function () { open.text = text.value; changed(); });
      part.append(row("Text", text, where + ".text"));
      const buttons = Array.isArray(open.buttons) ? open.buttons : [];
      const lines = el("div", "wb-jb-rows");
      lines.dataset.path = where + ".buttons";
      lines.dataset.node = "";
      buttons.forEach(function (b, i) {
        const line = el("div", "wb-jb-line");
        line.dataset.path = where + ".buttons[" + i + "]";
        line.dataset.node = "";
        line.append(
          input(b.title, function (v) { b.title = v; changed(); }, {placeholder: "Title (up to 20)", maxlength: "20", "aria-label": "Button title"}),
          input(b.id, function (v) { setOrDelete(b, "id", v.trim()); changed(); }, {placeholder: "id (the title if blank)", "aria-label": "Button id"}),
          button("×", "wb-remove", function () {
            buttons.splice(i, 1);
            if (!buttons.length) delete open.buttons;
            restructured();
          }, "Remove this button"));
        lines.append(line);
      });
      if (buttons.length < options.max_buttons) {
        lines.append(button("+ Reply button", "wb-jb-add", function () {
          open.buttons = buttons;
          buttons.push({title: ""});
          restructured();
        }));
      }
      part.append(row("Reply buttons", lines, where + ".buttons", "Up to " + options.max_buttons + "; a branch on \u201ctapped button\u201d reads which."));
    }
    body.append(part);
  }

  /* ---- wait --------------------------------------------------------------------------- */

  const WAIT_KINDS = [["delay", "a while"], ["until", "until a time of day"], ["for_event", "for an event"], ["for_reply", "for a reply"]];
  const WAIT_KEYS = ["delay", "until", "weekdays", "for_event", "for_reply", "timeout", "on_event", "on_reply", "on_timeout"];

  function waitKind(step) {
    for (const [kind] of WAIT_KINDS) if (step[kind]) return kind;
    return "delay";
  }

  function durationControls(obj, key, where, label, help) {
    const value = isObject(obj[key]) ? obj[key] : {};
    const parts = [];
    for (const [unit, text] of [["days", "days"], ["hours", "h"], ["minutes", "min"]]) {
      parts.push(numberInput(value[unit], function (v) {
        obj[key] = isObject(obj[key]) ? obj[key] : {};
        setOrDelete(obj[key], unit, v);
        changed();
      }, {"aria-label": label + " " + unit, className: "wb-jb-days wb-jb-" + unit, placeholder: "0"}), el("span", "wb-words", text));
    }
    return row(label, parts, where, help);
  }

  function waitControls(body, step, index, path) {
    const kind = waitKind(step);
    body.append(row("Waits", select(WAIT_KINDS, kind, function (v) {
      for (const key of WAIT_KEYS) delete step[key];
      if (v === "delay") step.delay = {hours: 1};
      else if (v === "until") step.until = "10:00";
      else if (v === "for_event") {
        step.for_event = "";
        step.timeout = {days: 1};
      } else {
        step.for_reply = true;
        step.timeout = {hours: 24};
      }
      restructured();
    }, "Wait kind"), path));
    if (kind === "delay") {
      body.append(durationControls(step, "delay", path + ".delay", "For"));
      body.append(targetSelect(index, step, "next", "Then", path + ".next"));
      return;
    }
    if (kind === "until") {
      const at = input(step.until, function (v) { step.until = v; changed(); }, {"aria-label": "Until"});
      at.type = "time";
      body.append(row("Until (their time)", at, path + ".until"));
      const days = el("span", "wb-jb-weekdays");
      const chosen = Array.isArray(step.weekdays) ? step.weekdays : [];
      WEEKDAYS.forEach(function (day, i) {
        days.append(checkbox(chosen.includes(day), function (on) {
          const now = (Array.isArray(step.weekdays) ? step.weekdays : []).filter(function (d) { return d !== day; });
          if (on) now.push(day);
          const ordered = WEEKDAYS.filter(function (d) { return now.includes(d); });
          setOrDelete(step, "weekdays", ordered.length ? ordered : "");
          changed();
        }, DAY_LABELS[i]));
      });
      body.append(row("Only on", days, path + ".weekdays", "None ticked: the next day it is that time."));
      body.append(targetSelect(index, step, "next", "Then", path + ".next"));
      return;
    }
    if (kind === "for_event") {
      body.append(row("Event", input(step.for_event, function (v) { step.for_event = v.trim(); changed(); }, {placeholder: "checkout"}), path + ".for_event"));
    }
    body.append(durationControls(step, "timeout", path + ".timeout", "At most", "Nobody waits for ever: after this, they go on to the timeout's step."));
    const comes = kind === "for_reply" ? "on_reply" : "on_event";
    body.append(targetSelect(index, step, comes, kind === "for_reply" ? "If they reply" : "If it comes", path + "." + comes));
    body.append(targetSelect(index, step, "on_timeout", "Else, after the wait", path + ".on_timeout"));
  }

  /* ---- branch ------------------------------------------------------------------------- */

  const CONDITIONS = [
    ["contact", "a contact field"], ["property", "an event property"], ["last_message", "the last message"],
    ["button", "the tapped button"], ["window_open", "the 24-hour window"],
  ];

  function conditionKind(condition) {
    if (!isObject(condition)) return "";
    if ("property" in condition) return "property";
    for (const [kind] of CONDITIONS) if (kind in condition) return kind;
    return "";
  }

  function isSimpleRule(rules) {
    return isObject(rules) && Object.keys(rules).length === 3 && "field" in rules && "op" in rules && "value" in rules &&
      typeof rules.field === "string";
  }

  function valueFor(op, text, number) {
    if (op === "in") return text.split(",").map(function (v) { return v.trim(); }).filter(Boolean);
    const trimmed = text.trim();
    if ((number || ORDER_OPS.includes(op)) && NUMBER.test(trimmed)) return Number(trimmed);
    return trimmed;
  }

  function valueText(value) {
    if (Array.isArray(value)) return value.join(", ");
    return value === undefined || value === null ? "" : String(value);
  }

  function branchControls(body, step, index, path) {
    const where = path + ".if";
    const kind = conditionKind(step.if);
    body.append(row("If", select(CONDITIONS, kind, function (v) {
      if (v === "contact") step.if = {contact: {field: "name", op: "exists", value: true}};
      else if (v === "property") step.if = {property: "", op: "eq", value: ""};
      else if (v === "last_message") step.if = {last_message: "read"};
      else if (v === "button") step.if = {button: ""};
      else step.if = {window_open: true};
      restructured();
    }, "Condition"), where));
    const condition = step.if;
    if (kind === "contact") {
      const rules = condition.contact;
      if (isSimpleRule(rules)) {
        const fields = datalist(options.fields.concat(Object.keys(CONTACT_OPS)));
        const ops = CONTACT_OPS[rules.field] || options.ops;
        const line = [
          input(rules.field, function (v) { rules.field = v.trim(); changed(); }, {list: fields, "aria-label": "Contact field", placeholder: "city"}),
          select(ops.map(function (op) { return [op, OP_LABELS[op] || op]; }), rules.op, function (v) {
            rules.op = v;
            if (v === "exists") rules.value = true;
            else if (v === "in") rules.value = valueFor(v, valueText(rules.value));
            else if (typeof rules.value === "boolean" || Array.isArray(rules.value)) rules.value = "";
            render();
            schedule();
          }, "Operator"),
        ];
        if (rules.op === "exists") {
          line.push(select([["true", "yes"], ["false", "no"]], String(rules.value !== false), function (v) { rules.value = v === "true"; changed(); }, "Is set"));
        } else {
          line.push(input(valueText(rules.value), function (v) { rules.value = valueFor(rules.op, v); changed(); }, {"aria-label": "Value", placeholder: rules.op === "in" ? "values, separated by commas" : "value"}));
        }
        body.append(row("Their field", line, where + ".contact", 'A segment rule over the contact: {"field", "op", "value"}.'));
      } else {
        const text = el("textarea", "wb-jb-rules");
        text.rows = 4;
        text.value = JSON.stringify(rules, null, 2);
        text.setAttribute("aria-label", "Rules (JSON)");
        text.addEventListener("input", function () {
          try {
            condition.contact = JSON.parse(text.value);
            changed();
          } catch (e) { /* kept as typed until it parses */ }
        });
        body.append(row("Their rules", text, where + ".contact", "Segment rules as JSON (all, any, not, lists): the segment builder's shape."));
      }
    } else if (kind === "property") {
      const op = condition.op || "eq";
      const line = [
        input(condition.property, function (v) { condition.property = v.trim(); changed(); }, {"aria-label": "Property", placeholder: "total"}),
        select(options.property_ops.map(function (o) { return [o, OP_LABELS[o] || o]; }), op, function (v) {
          condition.op = v;
          if (v === "exists") delete condition.value;
          else if (v === "in") condition.value = valueFor(v, valueText(condition.value));
          else if (Array.isArray(condition.value) || condition.value === undefined) condition.value = "";
          render();
          schedule();
        }, "Operator"),
      ];
      if (op !== "exists") {
        line.push(input(valueText(condition.value), function (v) { condition.value = valueFor(op, v); changed(); }, {"aria-label": "Value", placeholder: op === "in" ? "values, separated by commas" : "value"}));
      }
      body.append(row("The event's", line, where + ".property", "A property of the event that entered them (the latest one)."));
    } else if (kind === "last_message") {
      body.append(row("It", select(options.outcomes.map(function (o) { return [o, OUTCOME_LABELS[o] || o]; }), condition.last_message, function (v) { condition.last_message = v; changed(); }, "Outcome"), where + ".last_message"));
    } else if (kind === "button") {
      body.append(row("Tapped", input(condition.button, function (v) { condition.button = v; changed(); }, {placeholder: "Yes", "aria-label": "Button"}), where + ".button", "A reply button's title or id, or a template's quick reply (any case)."));
    } else if (kind === "window_open") {
      body.append(row("Is", select([["true", "open"], ["false", "closed"]], String(condition.window_open !== false), function (v) { condition.window_open = v === "true"; changed(); }, "Window"), where + ".window_open"));
    }
    body.append(targetSelect(index, step, "then", "Then go to", path + ".then"));
    body.append(targetSelect(index, step, "else", "Else go to", path + ".else"));
  }

  /* ---- split -------------------------------------------------------------------------- */

  function splitControls(body, step, index, path) {
    const arms = Array.isArray(step.arms) ? step.arms : [];
    const lines = el("div", "wb-jb-rows");
    arms.forEach(function (arm, i) {
      const line = el("div", "wb-jb-line");
      const where = path + ".arms[" + i + "]";
      line.dataset.path = where;
      line.dataset.node = "";
      const choices = [];
      def.steps.forEach(function (s, j) { if (j !== index && s.id) choices.push([s.id, s.id]); });
      choices.push([END, "the end"]);
      line.append(
        numberInput(arm.percent, function (v) { arm.percent = v; changed(); }, {"aria-label": "Percent", className: "wb-jb-days"}),
        el("span", "wb-words", "% go to"),
        select(choices, arm.next || END, function (v) { arm.next = v; changed(); }, "Arm goes to"));
      if (arms.length > 2) {
        line.append(button("×", "wb-remove", function () {
          arms.splice(i, 1);
          restructured();
        }, "Remove this arm"));
      }
      lines.append(line);
    });
    if (arms.length < 10) {
      lines.append(button("+ Arm", "wb-jb-add", function () {
        step.arms = arms;
        arms.push({percent: 0, next: END});
        restructured();
      }));
    }
    body.append(row("Split", lines, path + ".arms", "Each person is drawn into one arm, the same one every time; the percents add up to 100."));
  }

  /* ---- problems by path --------------------------------------------------------------- */

  function markErrors(found) {
    for (const marked of builderEl.querySelectorAll(".wb-row-error")) marked.classList.remove("wb-row-error");
    for (const old of builderEl.querySelectorAll(".wb-inline-error")) old.remove();
    if (mode !== "builder") return;
    for (const [path, message] of Object.entries(found || {})) markError(path, message);
  }

  function markError(path, message) {
    let best = null;
    for (const element of builderEl.querySelectorAll("[data-node]")) {
      const own = element.dataset.path;
      if (!own) continue;
      const fits = path === own || path.startsWith(own + ".") || path.startsWith(own + "[");
      if (fits && (!best || own.length > best.dataset.path.length)) best = element;
    }
    if (!best) return;
    best.classList.add("wb-row-error");
    const line = el("div", "wb-inline-error", message);
    line.dataset.problem = path;
    if (best.classList.contains("wb-step")) best.querySelector(".wb-step-head").after(line);
    else if (best.classList.contains("wb-jb-section")) best.querySelector("h3").after(line);
    else best.append(line);
  }

  /* ---- the check ---------------------------------------------------------------------- */

  function schedule() {
    clearTimeout(timer);
    checkBox.dataset.state = "waiting";
    timer = setTimeout(check, 600);
  }

  function showCheck(data) {
    const found = data.problems || {};
    const paths = Object.keys(found);
    checkProblems.replaceChildren();
    checkSteps.replaceChildren();
    if (paths.length) {
      checkState.textContent = paths.length === 1 ? "1 problem to fix:" : paths.length + " problems to fix:";
      for (const path of paths) {
        const item = el("li");
        item.append(el("code", null, path), document.createTextNode(" " + found[path]));
        checkProblems.append(item);
      }
      checkBox.dataset.state = "error";
    } else {
      checkState.textContent = "It can run: " + data.steps.length + " step" + (data.steps.length === 1 ? "" : "s") + ".";
      for (const step of data.steps) {
        const item = el("li");
        item.append(el("strong", null, step.id), document.createTextNode(" " + step.text));
        checkSteps.append(item);
      }
      checkBox.dataset.state = "ok";
    }
    checkProblems.hidden = !paths.length;
    checkSteps.hidden = Boolean(paths.length);
    problems = found;
    markErrors(problems);
    refusedBox(found);
  }

  /* After a refused save, the box above says what is still to fix, as the check does. */
  function refusedBox(found) {
    const refused = document.getElementById("wb-problems");
    if (!refused) return;
    const paths = Object.keys(found);
    const list = refused.querySelector("ul");
    const heading = refused.querySelector("p");
    list.replaceChildren();
    for (const path of paths) {
      const item = el("li");
      item.dataset.path = path;
      item.append(el("code", null, path), document.createTextNode(" " + found[path]));
      list.append(item);
    }
    refused.classList.toggle("wb-resolved", !paths.length);
    heading.textContent = paths.length
      ? "Not saved: " + paths.length + " problem" + (paths.length === 1 ? "" : "s") + " to fix, each marked below."
      : "Not saved yet: it can run now. Save it.";
  }

  function check() {
    const mine = ++asked;
    checkBox.dataset.state = "loading";
    const body = new URLSearchParams({definition: textarea.value});
    if (form.dataset.journey) body.set("journey", form.dataset.journey);
    else if (numberSelect) body.set("phone_number", numberSelect.value);
    fetch(form.dataset.checkUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        Accept: "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-CSRFToken": csrfInput ? csrfInput.value : "",
      },
      body: body.toString(),
    })
      .then(function (response) { return response.json(); })
      .then(function (data) {
        if (mine === asked) showCheck(data);
      })
      .catch(function () {
        if (mine !== asked) return;
        checkState.textContent = "The check is unavailable; saving checks it too.";
        checkBox.dataset.state = "idle";
      });
  }

  /* ---- builder or JSON ---------------------------------------------------------------- */

  function showMode(next) {
    mode = next;
    builderEl.hidden = mode !== "builder";
    jsonEl.hidden = mode !== "json";
    tabBuilder.setAttribute("aria-pressed", String(mode === "builder"));
    tabJson.setAttribute("aria-pressed", String(mode === "json"));
  }

  function showNote(text) {
    note.textContent = text || "";
    note.hidden = !text;
  }

  /* The definition the builder can show, or null (and a note) when it cannot. */
  function fromText(text) {
    let data;
    try {
      data = JSON.parse(text || "{}");
    } catch (e) {
      showNote("The builder cannot show this: the JSON does not parse (" + e.message + ").");
      return null;
    }
    if (!isObject(data)) {
      showNote("The builder cannot show this: a journey is a JSON object.");
      return null;
    }
    if (data.entry === undefined) data.entry = {type: "event", event: ""};
    if (!isObject(data.entry) || !["event", "segment", "date"].includes(data.entry.type)) {
      const schedule = isObject(data.entry) && data.entry.type === "schedule";
      showNote(schedule ? "A recurring campaign is edited on its own form." : "The builder cannot show this entry: edit it as JSON.");
      return null;
    }
    if (data.steps === undefined) data.steps = [];
    if (!Array.isArray(data.steps) || !data.steps.every(isObject)) {
      showNote("The builder cannot show these steps (each is an object): edit them as JSON.");
      return null;
    }
    if (data.exits !== undefined && (!Array.isArray(data.exits) || !data.exits.every(isObject))) {
      showNote("The builder cannot show these exits: edit them as JSON.");
      return null;
    }
    return data;
  }

  function toBuilder() {
    const model = fromText(textarea.value);
    if (!model) return false;
    def = model;
    showNote("");
    showMode("builder");
    render();
    return true;
  }

  tabBuilder.addEventListener("click", function () {
    if (mode !== "builder" && toBuilder()) schedule();
  });
  tabJson.addEventListener("click", function () {
    if (mode === "json") return;
    if (def) sync();
    showNote("");
    showMode("json");
  });
  textarea.addEventListener("input", function () {
    if (mode === "json") schedule();
  });
  if (numberSelect) {
    numberSelect.addEventListener("change", function () {
      if (mode === "builder") render();
      schedule();
    });
  }
  form.addEventListener("submit", function () {
    if (mode === "builder" && def) sync();
  });
  const keepEditing = document.getElementById("wb-keep-editing");
  if (keepEditing) {
    keepEditing.addEventListener("click", function () {
      document.getElementById("wb-new-version").hidden = true;
    });
  }

  /* ---- start -------------------------------------------------------------------------- */

  tabBuilder.hidden = false;
  tabJson.hidden = false;
  if (!toBuilder()) showMode("json");
  if (Object.keys(problems).length) showCheck({problems: problems, steps: []});
  else schedule();
})();
