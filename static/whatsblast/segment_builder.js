/* The segment builder: a segment's rules (delivery/segments/rules.py) as rows and groups.
 *
 * The rules live in the #id_rules textarea as JSON: the form saves that, and the builder
 * rewrites it after every change. "JSON" shows the textarea itself; rules the builder
 * cannot show exactly as written (an unknown shape, a "not" of a "not") stay in the JSON
 * view with a note, never rewritten. After every change (debounced) the rules go to the
 * count URL, which answers the count and a sample, or the error with the rule's path (the
 * row is marked). All text reaches the page through textContent. */
(function () {
  "use strict";
  const box = document.getElementById("wb-segment");
  if (!box) return;
  const options = JSON.parse(document.getElementById("wb-segment-options").textContent);
  const textarea = box.querySelector("#id_rules");
  const editable = !textarea.readOnly;
  const builderEl = box.querySelector("#wb-builder");
  const jsonEl = box.querySelector("#wb-json");
  const note = box.querySelector("#wb-builder-note");
  const tabBuilder = box.querySelector("#wb-tab-builder");
  const tabJson = box.querySelector("#wb-tab-json");
  const countBox = box.querySelector("#wb-count");
  const countNumber = box.querySelector("#wb-count-number");
  const countHint = box.querySelector("#wb-count-hint");
  const countError = box.querySelector("#wb-count-error");
  const sample = box.querySelector("#wb-sample");
  const csrfInput = document.querySelector("input[name=csrfmiddlewaretoken]");

  const CONTACT = {};
  for (const field of options.contact_fields) CONTACT[field.name] = field;
  const DATE_FIELDS = options.date_fields;
  const ALL_OPS = options.ops;
  const OUTCOMES = options.outcomes.map(function (o) { return o.value; });
  const attributes = options.attributes.slice();
  const OTHER = "\u0000other";
  const OP_LABELS = {
    eq: "is", ne: "is not", in: "is one of", contains: "contains", starts_with: "starts with",
    gt: "is more than", gte: "is at least", lt: "is less than", lte: "is at most",
  };
  const DATE_OP_LABELS = {
    eq: "is on", gt: "is after", gte: "is on or after", lt: "is before", lte: "is on or before",
  };
  const ORDER_OPS = ["gt", "gte", "lt", "lte"];
  const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;
  const NUMBER = /^[-+]?(\d+(\.\d*)?|\.\d+)$/;

  let root = null;
  let mode = "json";
  let timer = null;
  let asked = 0;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function isObject(x) {
    return x !== null && typeof x === "object" && !Array.isArray(x);
  }

  function keysAre(obj, wanted) {
    const keys = Object.keys(obj);
    return keys.length === wanted.length && wanted.every(function (k) { return keys.includes(k); });
  }

  /* JSON with sorted keys: two rules are the same when their canonical texts are. */
  function canonical(x) {
    if (Array.isArray(x)) return "[" + x.map(canonical).join(",") + "]";
    if (isObject(x)) {
      return "{" + Object.keys(x).sort().map(function (k) {
        return JSON.stringify(k) + ":" + canonical(x[k]);
      }).join(",") + "}";
    }
    return JSON.stringify(x);
  }

  function Unsupported(reason) {
    this.reason = reason;
  }

  function fieldOps(field) {
    return CONTACT[field] ? CONTACT[field].ops : ALL_OPS;
  }

  function isDateField(field) {
    return DATE_FIELDS.includes(field);
  }

  /* ---- JSON → model ------------------------------------------------------------------ */

  function load(data, path) {
    if (!isObject(data)) throw new Unsupported(path + " is not a JSON object");
    if (keysAre(data, ["not"])) {
      const inner = load(data.not, path + ".not");
      if (inner.not) throw new Unsupported(path + " is a “not” of a “not”");
      inner.not = true;
      return inner;
    }
    for (const kind of ["all", "any"]) {
      if (keysAre(data, [kind])) {
        if (!Array.isArray(data[kind])) throw new Unsupported(path + "." + kind + " is not a list");
        return {
          kind: "group", mode: kind, not: false,
          children: data[kind].map(function (child, i) { return load(child, path + "." + kind + "[" + i + "]"); }),
        };
      }
    }
    if (keysAre(data, ["field", "op", "value"])) return loadField(data, path);
    if (keysAre(data, ["list"]) && typeof data.list === "string") {
      return {kind: "list", name: data.list, not: false};
    }
    if (keysAre(data, ["campaign", "outcome"]) && Number.isInteger(data.campaign) &&
        data.campaign > 0 && OUTCOMES.includes(data.outcome)) {
      return {kind: "campaign", campaign: data.campaign, outcome: data.outcome, not: false};
    }
    if (keysAre(data, ["marketing_within_days"]) && Number.isInteger(data.marketing_within_days)) {
      return {kind: "marketing", days: data.marketing_within_days, not: false};
    }
    throw new Unsupported(path + " is not a rule the builder can show");
  }

  function scalar(value) {
    return typeof value === "string" || (typeof value === "number" && isFinite(value));
  }

  function loadField(data, path) {
    const field = data.field;
    const op = data.op;
    const value = data.value;
    if (typeof field !== "string" || !field.trim() || field !== field.trim()) {
      throw new Unsupported(path + ".field is not a field name");
    }
    if (!fieldOps(field).includes(op)) throw new Unsupported(path + ".op does not apply to " + field);
    let fits;
    if (op === "exists") fits = typeof value === "boolean";
    else if (op === "in") {
      fits = Array.isArray(value) && value.every(function (item) {
        return scalar(item) && !String(item).includes(",") && String(item) === String(item).trim();
      });
    } else if (isDateField(field)) fits = typeof value === "string" && ISO_DATE.test(value);
    else fits = scalar(value);
    if (!fits) throw new Unsupported(path + ".value is not a value the builder can show");
    return {kind: "field", field: field, op: op, value: value, not: false};
  }

  /* The root shown is always a group; rules whose root is something else are shown in an
     implicit group that writes back just its one rule. */
  function loadRoot(data) {
    const node = load(data, "rules");
    if (node.kind === "group" && !node.not) return node;
    return {kind: "group", mode: "all", not: false, children: [node], implicit: true};
  }

  /* ---- model → JSON ------------------------------------------------------------------ */

  function dump(node, path) {
    node.path = path;
    if (node.not) return {not: body(node, path + ".not")};
    return body(node, path);
  }

  function body(node, path) {
    if (node.kind === "group") {
      const out = {};
      out[node.mode] = node.children.map(function (child, i) {
        return dump(child, path + "." + node.mode + "[" + i + "]");
      });
      return out;
    }
    if (node.kind === "field") return {field: node.field, op: node.op, value: node.value};
    if (node.kind === "list") return {list: node.name};
    if (node.kind === "campaign") return {campaign: node.campaign, outcome: node.outcome};
    return {marketing_within_days: node.days};
  }

  function dumpRoot() {
    if (root.implicit && root.children.length === 1 && root.mode === "all" && !root.not) {
      root.path = null;
      return dump(root.children[0], "rules");
    }
    root.implicit = false;
    return dump(root, "rules");
  }

  /* The textarea follows the builder; each node's element carries its path. */
  function sync() {
    textarea.value = JSON.stringify(dumpRoot(), null, 2);
    for (const node of builderEl.querySelectorAll("[data-node]")) {
      node.dataset.path = node.wbNode.path || "";
    }
  }

  function changed() {
    sync();
    schedule();
  }

  /* ---- rendering --------------------------------------------------------------------- */

  function newNode(kind) {
    if (kind === "group") return {kind: "group", mode: "all", not: false, children: []};
    if (kind === "list") return {kind: "list", name: options.lists[0] || "", not: false};
    if (kind === "campaign") {
      const first = options.campaigns[0];
      return {kind: "campaign", campaign: first ? first.id : 0, outcome: "delivered", not: false};
    }
    if (kind === "marketing") return {kind: "marketing", days: 30, not: false};
    return {kind: "field", field: attributes[0] || "name", op: "eq", value: "", not: false};
  }

  function render(focusNode) {
    builderEl.replaceChildren(renderGroup(root, null));
    sync();
    if (focusNode && focusNode.element) {
      const first = focusNode.element.querySelector("select, input");
      if (first) first.focus();
    }
  }

  function notToggle(node, label) {
    const wrap = el("label", "wb-not");
    const box = el("input");
    box.type = "checkbox";
    box.checked = node.not;
    box.disabled = !editable;
    box.setAttribute("aria-label", label);
    box.addEventListener("change", function () {
      node.not = box.checked;
      node.element.classList.toggle("wb-negated", node.not);
      changed();
    });
    wrap.append(box, el("span", null, "not"));
    wrap.title = "Match the contacts this does NOT match";
    return wrap;
  }

  function removeButton(node, parent) {
    const button = el("button", "wb-remove", "×");
    button.type = "button";
    button.title = "Remove";
    button.setAttribute("aria-label", "Remove");
    button.addEventListener("click", function () {
      parent.children.splice(parent.children.indexOf(node), 1);
      render();
      schedule();
    });
    return button;
  }

  function attach(element, node) {
    element.dataset.node = "";
    element.wbNode = node;
    node.element = element;
    if (node.not) element.classList.add("wb-negated");
  }

  function renderGroup(node, parent) {
    const group = el("div", "wb-group");
    attach(group, node);
    group.dataset.kind = "group";
    const head = el("div", "wb-group-head");
    if (parent) head.append(notToggle(node, "Not this group"));
    const modeSelect = el("select", "wb-mode");
    modeSelect.append(new Option("All of these (and)", "all"), new Option("Any of these (or)", "any"));
    modeSelect.value = node.mode;
    modeSelect.disabled = !editable;
    modeSelect.setAttribute("aria-label", "Match all or any");
    modeSelect.addEventListener("change", function () {
      node.mode = modeSelect.value;
      group.dataset.mode = node.mode;
      changed();
    });
    group.dataset.mode = node.mode;
    head.append(modeSelect);
    if (parent && editable) head.append(removeButton(node, parent));
    group.append(head);
    const children = el("div", "wb-children");
    for (const child of node.children) {
      children.append(child.kind === "group" ? renderGroup(child, node) : renderRule(child, node));
    }
    if (!node.children.length) {
      children.append(el("p", "wb-empty", parent ? "An empty group: add a rule to it." : "No rules yet: add one below."));
    }
    group.append(children);
    if (editable) group.append(addButtons(node));
    return group;
  }

  function addButtons(group) {
    const bar = el("div", "wb-add");
    const kinds = [
      ["field", "+ Field rule", ""],
      ["list", "+ In a list", options.lists.length ? "" : "There is no contact list yet."],
      ["campaign", "+ Campaign outcome", options.campaigns.length ? "" : "There is no campaign yet."],
      ["marketing", "+ Recent marketing", ""],
      ["group", "+ Group", ""],
    ];
    for (const [kind, label, disabledWhy] of kinds) {
      const button = el("button", "wb-add-" + kind, label);
      button.type = "button";
      if (disabledWhy) {
        button.disabled = true;
        button.title = disabledWhy;
      }
      button.addEventListener("click", function () {
        const node = newNode(kind);
        group.children.push(node);
        render(node);
        schedule();
      });
      bar.append(button);
    }
    return bar;
  }

  function renderRule(node, parent) {
    const row = el("div", "wb-rule");
    attach(row, node);
    row.dataset.kind = node.kind;
    row.append(notToggle(node, "Not this rule"));
    if (node.kind === "field") fieldControls(row, node);
    else if (node.kind === "list") listControls(row, node);
    else if (node.kind === "campaign") campaignControls(row, node);
    else marketingControls(row, node);
    if (editable) row.append(removeButton(node, parent));
    for (const control of row.querySelectorAll("select, input")) {
      if (!editable) control.disabled = true;
    }
    return row;
  }

  function fieldControls(row, node) {
    const select = el("select", "wb-field");
    select.setAttribute("aria-label", "Field");
    const own = el("optgroup");
    own.label = "Contact";
    for (const field of options.contact_fields) own.append(new Option(field.label, field.name));
    const uploaded = el("optgroup");
    uploaded.label = "Uploaded fields";
    const names = attributes.slice();
    if (!CONTACT[node.field] && node.field && !names.includes(node.field) && !node.custom) {
      names.push(node.field);
    }
    for (const name of names) uploaded.append(new Option(name, name));
    uploaded.append(new Option("Other field…", OTHER));
    select.append(own, uploaded);
    select.value = node.custom ? OTHER : node.field;
    row.append(select);
    if (node.custom) {
      const name = el("input", "wb-field-name");
      name.type = "text";
      name.placeholder = "field name";
      name.value = node.field;
      name.setAttribute("aria-label", "Field name");
      name.addEventListener("input", function () {
        node.field = name.value.trim();
        changed();
      });
      name.addEventListener("change", function () {
        if (!node.field || CONTACT[node.field]) return;
        if (!attributes.includes(node.field)) attributes.push(node.field);
        node.custom = false;
        render();
      });
      row.append(name);
    }
    select.addEventListener("change", function () {
      if (select.value === OTHER) {
        node.custom = true;
        node.field = "";
      } else {
        node.custom = false;
        node.field = select.value;
      }
      fitOp(node);
      render(null);
      if (node.custom) node.element.querySelector(".wb-field-name").focus();
      schedule();
    });

    const op = el("select", "wb-op");
    op.setAttribute("aria-label", "Operator");
    const labels = isDateField(node.field) ? DATE_OP_LABELS : OP_LABELS;
    for (const name of fieldOps(node.field)) {
      if (name === "exists") {
        op.append(new Option("has a value", "exists:true"), new Option("has no value", "exists:false"));
      } else {
        op.append(new Option(labels[name] || name, name));
      }
    }
    op.value = node.op === "exists" ? "exists:" + node.value : node.op;
    op.addEventListener("change", function () {
      setOp(node, op.value);
      render(null);
      schedule();
    });
    row.append(op);
    if (node.op !== "exists") row.append(valueInput(node));
  }

  function valueInput(node) {
    const input = el("input", "wb-value");
    input.setAttribute("aria-label", "Value");
    if (isDateField(node.field)) {
      input.type = "date";
    } else {
      input.type = "text";
      if (node.op === "in") input.placeholder = node.field === "country" ? "BR, PT" : "values, separated by commas";
      else if (ORDER_OPS.includes(node.op)) input.placeholder = "a number or a date (YYYY-MM-DD)";
      else if (node.field === "country") input.placeholder = "BR";
      else input.placeholder = "value";
    }
    input.value = node.op === "in" ? node.value.join(", ") : String(node.value);
    input.addEventListener("input", function () {
      node.value = valueFrom(node, input.value);
      changed();
    });
    return input;
  }

  /* What a typed value means for the rule's operator and field. */
  function valueFrom(node, text) {
    const upper = node.field === "country";
    if (node.op === "in") {
      return text.split(",").map(function (item) {
        return upper ? item.trim().toUpperCase() : item.trim();
      }).filter(Boolean);
    }
    const trimmed = text.trim();
    if (upper) return trimmed.toUpperCase();
    if (ORDER_OPS.includes(node.op) && !isDateField(node.field) && NUMBER.test(trimmed) &&
        trimmed.replace(/\D/g, "").length <= 15) {
      return Number(trimmed);
    }
    return trimmed;
  }

  /* A field change keeps the operator when the field takes it. */
  function fitOp(node) {
    const ops = fieldOps(node.field);
    if (!ops.includes(node.op)) setOp(node, ops[0]);
    else if (isDateField(node.field) && node.op !== "exists" &&
             !(typeof node.value === "string" && ISO_DATE.test(node.value))) {
      node.value = "";
    }
  }

  function setOp(node, choice) {
    const [op, flag] = choice.split(":");
    const before = node.op;
    node.op = op;
    if (op === "exists") {
      node.value = flag !== "false";
      return;
    }
    let text = "";
    if (before === "in") text = node.value.length ? String(node.value[0]) : "";
    else if (before !== "exists") text = String(node.value);
    if (op === "in") node.value = text ? valueFrom(node, text) : [];
    else node.value = valueFrom(node, text);
  }

  function listControls(row, node) {
    row.append(el("span", "wb-words", "is in the list"));
    const select = el("select", "wb-list");
    select.setAttribute("aria-label", "List");
    for (const name of options.lists) select.append(new Option(name, name));
    if (!options.lists.includes(node.name)) {
      select.append(new Option(node.name ? node.name + " (no such list)" : "(choose a list)", node.name));
    }
    select.value = node.name;
    select.addEventListener("change", function () {
      node.name = select.value;
      changed();
    });
    row.append(select);
  }

  function campaignControls(row, node) {
    row.append(el("span", "wb-words", "campaign"));
    const select = el("select", "wb-campaign");
    select.setAttribute("aria-label", "Campaign");
    const known = [];
    for (const campaign of options.campaigns) {
      select.append(new Option("#" + campaign.id + " " + campaign.name + " (" + campaign.status + ")", String(campaign.id)));
      known.push(campaign.id);
    }
    if (!known.includes(node.campaign)) {
      select.append(new Option(node.campaign ? "#" + node.campaign : "(choose a campaign)", String(node.campaign)));
    }
    select.value = String(node.campaign);
    select.addEventListener("change", function () {
      node.campaign = parseInt(select.value, 10);
      changed();
    });
    const outcome = el("select", "wb-outcome");
    outcome.setAttribute("aria-label", "Outcome");
    for (const o of options.outcomes) outcome.append(new Option(o.label, o.value));
    outcome.value = node.outcome;
    outcome.addEventListener("change", function () {
      node.outcome = outcome.value;
      changed();
    });
    row.append(select, outcome);
  }

  function marketingControls(row, node) {
    row.append(el("span", "wb-words", "received a marketing message in the last"));
    const input = el("input", "wb-days");
    input.type = "number";
    input.min = "1";
    input.max = String(options.max_days);
    input.value = String(node.days);
    input.setAttribute("aria-label", "Days");
    input.addEventListener("input", function () {
      const text = input.value.trim();
      node.days = /^\d+$/.test(text) ? parseInt(text, 10) : text;
      changed();
    });
    row.append(input, el("span", "wb-words", "days"));
  }

  /* ---- builder or JSON --------------------------------------------------------------- */

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

  /* The builder for the textarea's rules, or null (and a note) when it cannot show them. */
  function fromText(text) {
    if (!text.trim()) return {kind: "group", mode: "all", not: false, children: []};
    let data;
    try {
      data = JSON.parse(text);
    } catch (e) {
      showNote("The builder cannot show this: the JSON does not parse (" + e.message + ").");
      return null;
    }
    let model;
    try {
      model = loadRoot(data);
    } catch (e) {
      if (!(e instanceof Unsupported)) throw e;
      showNote("The builder cannot show these rules (" + e.reason + "): edit them as JSON.");
      return null;
    }
    const previous = root;
    root = model;
    const same = canonical(dumpRoot()) === canonical(data);
    root = previous;
    if (!same) {
      showNote("The builder would write these rules differently: edit them as JSON.");
      return null;
    }
    return model;
  }

  function toBuilder() {
    const model = fromText(textarea.value);
    if (!model) return false;
    root = model;
    showNote("");
    showMode("builder");
    render();
    return true;
  }

  tabBuilder.addEventListener("click", function () {
    if (mode !== "builder") toBuilder();
  });
  tabJson.addEventListener("click", function () {
    if (mode === "json") return;
    if (editable) sync();
    showNote("");
    showMode("json");
  });
  textarea.addEventListener("input", function () {
    if (mode === "json") schedule();
  });
  const form = textarea.form;
  if (form) {
    form.addEventListener("submit", function () {
      if (mode === "builder" && editable) sync();
    });
  }

  /* ---- the live count ---------------------------------------------------------------- */

  function schedule() {
    clearTimeout(timer);
    countBox.dataset.state = "waiting";
    timer = setTimeout(count, 350);
  }

  function rulesText() {
    if (mode === "builder") return JSON.stringify(dumpRoot());
    return textarea.value;
  }

  function isEmpty() {
    if (mode === "builder") return !root.children.length;
    return !textarea.value.trim();
  }

  /* Each row or group a problem's path names (the deepest one on its path) is marked, with
     the problem under it. ``problems`` maps paths to what is wrong there. */
  function markErrors(problems) {
    for (const marked of builderEl.querySelectorAll(".wb-rule-error")) marked.classList.remove("wb-rule-error");
    for (const old of builderEl.querySelectorAll(".wb-inline-error")) old.remove();
    if (mode !== "builder") return;
    for (const [path, message] of Object.entries(problems || {})) markError(path, message);
  }

  function markError(path, message) {
    if (!path) return;
    let best = null;
    for (const element of builderEl.querySelectorAll("[data-node]")) {
      const own = element.dataset.path;
      if (!own) continue;
      const fits = path === own || path.startsWith(own + ".") || path.startsWith(own + "[");
      if (fits && (!best || own.length > best.dataset.path.length)) best = element;
    }
    if (!best) return;
    best.classList.add("wb-rule-error");
    const line = el("div", "wb-inline-error", message);
    if (best.dataset.kind === "group") best.querySelector(".wb-group-head").after(line);
    else best.append(line);
  }

  function showCount(data) {
    countNumber.textContent = data.count_text;
    countNumber.dataset.count = String(data.count);
    countError.hidden = true;
    countError.textContent = "";
    markErrors(null);
    const tbody = sample.querySelector("tbody");
    tbody.replaceChildren();
    for (const row of data.sample) {
      const tr = el("tr");
      tr.dataset.contact = String(row.id);
      const key = el("td");
      if (row.customer_url) {
        const link = el("a", "wb-customer-link", row.key);
        link.href = row.customer_url;
        key.append(link);
      } else {
        key.textContent = row.key;
      }
      const name = el("td");
      const nameLink = el("a", null, row.name || "(no name)");
      nameLink.href = row.contact_url;
      name.append(nameLink);
      tr.append(key, name);
      tbody.append(tr);
    }
    sample.hidden = !data.sample.length;
    countHint.textContent = data.count > data.sample.length
      ? "The first " + data.sample.length + " of them:" : (data.count ? "All of them:" : "No contact matches these rules now.");
    countBox.dataset.state = "ready";
  }

  function showError(data) {
    countNumber.textContent = "—";
    delete countNumber.dataset.count;
    countError.textContent = data.error || "The count is unavailable.";
    countError.hidden = false;
    countHint.textContent = "Fix the rule to see who it matches.";
    sample.hidden = true;
    markErrors(data.problems || (data.path ? { [data.path]: data.error } : null));
    countBox.dataset.state = "error";
  }

  function count() {
    const mine = ++asked;
    if (isEmpty()) {
      countNumber.textContent = "—";
      delete countNumber.dataset.count;
      countError.hidden = true;
      sample.hidden = true;
      countHint.textContent = "Add a rule to see who it matches.";
      countBox.dataset.state = "empty";
      return;
    }
    countBox.dataset.state = "loading";
    fetch(box.dataset.countUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        Accept: "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-CSRFToken": csrfInput ? csrfInput.value : "",
      },
      body: new URLSearchParams({rules: rulesText()}).toString(),
    })
      .then(function (response) {
        return response.json().then(function (data) { return {ok: response.ok, data: data}; });
      })
      .then(function (answer) {
        if (mine !== asked) return;
        if (answer.ok) showCount(answer.data);
        else showError(answer.data);
      })
      .catch(function () {
        if (mine !== asked) return;
        showError({error: "The count is unavailable."});
      });
  }

  /* ---- start ------------------------------------------------------------------------- */

  tabBuilder.hidden = false;
  tabJson.hidden = false;
  if (!toBuilder()) showMode("json");
  count();
})();
