/* The campaign form: one row per template parameter, and the live preview.
 * The mapping lives in the hidden #id_param_mapping as JSON ({"body": {"1": {"field":
 * "name"}}, ...}); every change re-asks the server to render the message for a few
 * contacts of the chosen lists and segments. An A/B test's variants (#wb-variants) each
 * have a template and a mapping edited the same way (mappingEditor), kept in the row's
 * hidden input. All text reaches the page through textContent. */
(function () {
  "use strict";
  const form = document.getElementById("wb-campaign-form");
  if (!form) return;
  const number = form.querySelector("#id_phone_number");
  const template = form.querySelector("#id_template");
  const lists = form.querySelector("#id_lists");
  const segments = form.querySelector("#id_segments");
  const hidden = form.querySelector("#id_param_mapping");
  const tbody = document.querySelector("#wb-mapping tbody");
  const fieldList = document.getElementById("wb-fields");
  const samples = document.getElementById("wb-preview-samples");
  const errorBox = document.getElementById("wb-mapping-error");
  const main = mappingEditor(tbody, hidden, schedule);
  let shownTemplate = null;
  let timer = null;
  let asked = 0;

  function parse(text) {
    try {
      const value = JSON.parse(text || "{}");
      return value && typeof value === "object" && !Array.isArray(value) ? value : {};
    } catch (e) {
      return {};
    }
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function isObject(value) {
    return Boolean(value) && typeof value === "object" && !Array.isArray(value);
  }

  function isEmpty(value) {
    if (Array.isArray(value)) return value.length === 0;
    return isObject(value) && Object.keys(value).length === 0;
  }

  /* Where the slot's source sits in the mapping: ["body", "1"], ["cards", 0, "header"].
     Integers are list indices, strings object keys. A server without paths gave only
     section and key (the header alone has none). */
  function slotPath(slot) {
    if (Array.isArray(slot.path) && slot.path.length) return slot.path;
    if (slot.key === null || slot.key === undefined) return [slot.section];
    return [slot.section, String(slot.key)];
  }

  /* "body:1", "buttons:0", "header:", "cards:2:buttons:1" (the row's data-slot). */
  function slotId(slot) {
    const path = slotPath(slot);
    return path.length === 1 ? path[0] + ":" : path.join(":");
  }

  function pathGet(root, path) {
    let node = root;
    for (const step of path) {
      if (typeof step === "number") {
        if (!Array.isArray(node) || step < 0 || step >= node.length) return null;
      } else if (!isObject(node) || !Object.prototype.hasOwnProperty.call(node, step)) {
        return null;
      }
      node = node[step];
    }
    return node === undefined ? null : node;
  }

  /* Puts `value` at `path`, making the lists and objects on the way (a list grown to an
     index gets empty objects before it, as cards and sections are objects). */
  function pathSet(root, path, value) {
    let node = root;
    path.forEach(function (step, index) {
      if (index === path.length - 1) {
        node[step] = value;
        return;
      }
      const next = path[index + 1];
      const fits = function (child) {
        return typeof next === "number" ? Array.isArray(child) : isObject(child);
      };
      if (Array.isArray(node)) {
        while (node.length < step) node.push({});
      }
      if (!fits(node[step])) node[step] = typeof next === "number" ? [] : {};
      node = node[step];
    });
  }

  /* Removes what sits at `path`, then every container left empty on the way up (a list
     keeps its other entries where they are: a cleared card in the middle stays as {}).
     The top-level "body" object stays, as the form always sends it. */
  function pathDelete(root, path) {
    const chain = [root];
    for (let i = 0; i < path.length - 1; i++) {
      const child = chain[i][path[i]];
      if (!child || typeof child !== "object") return;
      chain.push(child);
    }
    for (let i = path.length - 1; i >= 0; i--) {
      const parent = chain[i];
      const step = path[i];
      if (i < path.length - 1 && !isEmpty(parent[step])) return;
      if (i === 0 && step === "body") return;
      if (Array.isArray(parent)) {
        if (step < parent.length) parent[step] = {};
        while (parent.length && isEmpty(parent[parent.length - 1])) parent.pop();
      } else {
        delete parent[step];
      }
    }
  }

  function slotLabel(slot) {
    if (slot.label) return slot.label;
    if (slot.section === "header") return "Header (" + slot.kind + ")";
    if (slot.section === "body") return "Body {{" + slot.key + "}}";
    return "Button " + slot.key + " (" + slot.kind + ")";
  }

  /* Where a tracked link may go: a body parameter, or a URL button's suffix. */
  function clickable(slot) {
    const path = slotPath(slot);
    const section = path[path.length - 2];
    return section === "body" || (section === "buttons" && slot.kind === "url suffix");
  }

  function mappingEmpty(value) {
    if (!isObject(value)) return true;
    return Object.keys(value).every(function (key) { return isEmpty(value[key]); });
  }

  /* The rows of one mapping (the campaign's, or a variant's) over `rowsBody`, kept as
     JSON in `input`; `changed` is called after every edit. */
  function mappingEditor(rowsBody, input, changed) {
    let mapping = parse(input.value);

    function save() {
      input.value = JSON.stringify(mapping);
    }

    function sourceOf(slot) {
      const source = pathGet(mapping, slotPath(slot));
      return isObject(source) ? source : null;
    }

    function setSource(slot, source) {
      if (source) pathSet(mapping, slotPath(slot), source);
      else pathDelete(mapping, slotPath(slot));
      save();
    }

    /* Keep only what the template takes (after a template change): the current slots'
       paths, nothing else. */
    function prune(slots) {
      const kept = {body: {}};
      for (const slot of slots) {
        const source = sourceOf(slot);
        if (source) pathSet(kept, slotPath(slot), source);
      }
      mapping = kept;
      save();
    }

    function buildRows(slots, hasTemplate) {
      rowsBody.replaceChildren();
      if (!slots.length) {
        const row = el("tr");
        const cell = el("td", "wb-muted", hasTemplate ? "This template takes no parameters." : "Choose a template.");
        cell.colSpan = 4;
        row.append(cell);
        rowsBody.append(row);
        return;
      }
      let group = null;
      for (const slot of slots) {
        const row = el("tr");
        const path = slotPath(slot);
        row.dataset.slot = slotId(slot);
        const inGroup = path[0] === "cards" || path[0] === "sections" ? path[0] + ":" + path[1] : null;
        if (inGroup) row.classList.add("wb-group-row");
        if (inGroup && inGroup !== group) row.classList.add("wb-group-start");
        group = inGroup;
        const kind = el("select", "wb-kind");
        kind.setAttribute("aria-label", slotLabel(slot) + " source");
        kind.append(new Option("Contact field", "field"), new Option("Constant", "value"));
        if (clickable(slot)) kind.append(new Option("Tracked link", "click"));
        const source = el("input", "wb-source");
        source.type = "text";
        source.setAttribute("aria-label", slotLabel(slot) + " field or value");
        const fallback = el("input", "wb-fallback");
        fallback.type = "text";
        fallback.placeholder = "if missing, e.g. there";
        fallback.title = "Used for contacts who have no value in this field, instead of refusing the launch.";
        fallback.setAttribute("aria-label", slotLabel(slot) + " fallback");
        const note = el("span", "wb-muted wb-click-note", "each recipient's own link, to the destination under Tracked link");
        const current = sourceOf(slot);
        if (current && current.click === true && clickable(slot)) {
          kind.value = "click";
        } else if (current && Object.prototype.hasOwnProperty.call(current, "value")) {
          kind.value = "value";
          source.value = current.value;
        } else {
          kind.value = "field";
          source.value = current && current.field ? current.field : "";
          fallback.value = current && current.fallback ? current.fallback : "";
        }
        const hint = function () {
          source.hidden = kind.value === "click";
          fallback.hidden = kind.value !== "field";
          note.hidden = kind.value !== "click";
          if (kind.value === "field") {
            source.setAttribute("list", "wb-fields");
            source.placeholder = "e.g. name";
          } else {
            source.removeAttribute("list");
            source.placeholder = slot.kind !== "text" && slot.example ? "e.g. " + slot.example : "text for everyone";
          }
        };
        const update = function () {
          hint();
          if (kind.value === "click") {
            setSource(slot, {click: true});
          } else if (kind.value === "field") {
            const name = source.value.trim();
            const chosen = name ? {field: name} : null;
            if (chosen && fallback.value.trim()) chosen.fallback = fallback.value;
            setSource(slot, chosen);
          } else {
            setSource(slot, {value: source.value});
          }
          changed();
        };
        kind.addEventListener("change", update);
        source.addEventListener("input", update);
        fallback.addEventListener("input", update);
        hint();
        const name = el("td", null, slotLabel(slot));
        if (slot.required) name.append(el("span", "wb-required", " *"));
        const kindCell = el("td");
        kindCell.append(kind);
        const inputCell = el("td");
        inputCell.append(source, " ", fallback, note);
        row.append(name, kindCell, inputCell, el("td", "wb-muted", slot.example || ""));
        rowsBody.append(row);
      }
    }

    return {
      get mapping() { return mapping; },
      replace: function (value) {
        mapping = isObject(value) ? value : {};
        save();
      },
      prune: prune,
      buildRows: buildRows,
    };
  }

  /* A media header as a box that names its link (or the placeholder still to map): the
     preview loads nothing from outside. */
  function mediaBox(part) {
    const format = part.header_format;
    const name = format === "video" ? "Video" : "Image";
    const box = el("div", "wb-media wb-media-" + format);
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", name + ": " + (part.media || "not mapped yet"));
    const badge = el("span", "wb-media-kind", (format === "video" ? "\u25B6 " : "") + name);
    badge.setAttribute("aria-hidden", "true");
    box.append(badge, el("span", "wb-media-link", part.media || "(no link yet)"));
    box.title = part.media || "";
    return box;
  }

  function headerOf(part) {
    if (part.header_format === "image" || part.header_format === "video") return mediaBox(part);
    if (part.header) return el("div", "wb-bubble-header", part.header);
    return null;
  }

  /* "3 days 4 h", "5 h 12 min", "12 min": what is left of an offer. */
  function remaining(ms) {
    const minutes = Math.floor(ms / 60000);
    const days = Math.floor(minutes / 1440);
    const hours = Math.floor((minutes % 1440) / 60);
    const rest = minutes % 60;
    if (days) return days + (days === 1 ? " day" : " days") + (hours ? " " + hours + " h" : "");
    if (hours) return hours + " h" + (rest ? " " + rest + " min" : "");
    return rest ? rest + " min" : "less than a minute";
  }

  /* A limited-time offer: its text and a countdown to the expiry the mapping gives. */
  function offerBanner(offer) {
    const banner = el("div", "wb-offer");
    banner.setAttribute("role", "group");
    banner.setAttribute("aria-label", "Limited-time offer");
    const icon = el("span", "wb-offer-icon", "%");
    icon.setAttribute("aria-hidden", "true");
    const words = el("div", "wb-offer-words");
    words.append(el("div", "wb-offer-text", offer.text || "Limited-time offer"));
    let left = offer.expires || "";
    let ended = false;
    if (typeof offer.expires_ms === "number") {
      const ms = offer.expires_ms - Date.now();
      ended = ms <= 0;
      left = ended ? "Offer ended" : "Ends in " + remaining(ms);
    }
    if (left) {
      const when = el("div", "wb-offer-expires" + (ended ? " wb-offer-ended" : ""), left);
      if (typeof offer.expires_ms === "number") {
        const moment = new Date(offer.expires_ms);
        when.title = "Expires " + moment.toLocaleString();
        when.dataset.expires = moment.toISOString();
      }
      words.append(when);
    }
    banner.append(icon, words);
    return banner;
  }

  function productCount(button) {
    return (button.products || []).reduce(function (sum, section) {
      return sum + (section.items || []).length;
    }, 0);
  }

  /* One button as WhatsApp shows it: a copy-code button says its code, a multi-product
     button how many products it opens, a URL button its link underneath. */
  function buttonLines(button) {
    const kind = button.kind || "";
    let text = button.text;
    let note = "";
    if (kind === "copy_code") {
      text = button.code ? "Copy code " + button.code : button.text || "Copy offer code";
    } else if (kind === "mpm") {
      text = (button.text || "View items") + " (" + productCount(button) + ")";
      note = (button.products || []).map(function (section) {
        const items = (section.items || []).join(", ");
        return section.title ? section.title + ": " + items : items;
      }).join(" · ");
    } else if (button.url) {
      note = button.url;
    }
    const line = el("div", "wb-bubble-button wb-button-" + (kind || "other").replace(/[^a-z_]/g, ""), text);
    line.dataset.kind = kind;
    line.setAttribute("role", "button");
    line.setAttribute("aria-disabled", "true");
    if (button.url) line.title = button.url;
    if (note && kind === "mpm") line.title = note;
    const lines = [line];
    if (note) lines.push(el("div", "wb-bubble-url", note));
    return lines;
  }

  function appendButtons(node, buttons) {
    for (const button of buttons || []) node.append(...buttonLines(button));
  }

  /* A carousel's cards side by side under the message, scrolled sideways as in WhatsApp. */
  function carousel(cards) {
    const row = el("div", "wb-carousel");
    row.setAttribute("role", "list");
    row.setAttribute("aria-label", "Carousel of " + cards.length + " cards");
    row.tabIndex = 0;  // scrollable by keyboard
    cards.forEach(function (part, index) {
      const item = el("div", "wb-carousel-card");
      item.setAttribute("role", "listitem");
      item.setAttribute("aria-label", "Card " + (index + 1) + " of " + cards.length);
      const header = headerOf(part);
      if (header) item.append(header);
      if (part.body) item.append(el("div", "wb-bubble-body", part.body));
      appendButtons(item, part.buttons);
      row.append(item);
    });
    return row;
  }

  function renderSamples(data) {
    samples.replaceChildren();
    for (const sample of data.samples) {
      const card = el("div", "wb-sample");
      const bubble = el("div", "wb-bubble");
      const header = headerOf(sample);
      if (header) bubble.append(header);
      if (sample.offer) bubble.append(offerBanner(sample.offer));
      bubble.append(el("div", "wb-bubble-body", sample.body));
      appendButtons(bubble, sample.buttons);
      const chat = el("div", "wb-chat");
      chat.append(bubble);
      if (sample.cards && sample.cards.length) chat.append(carousel(sample.cards));
      card.append(chat);
      const who = sample.to ? sample.to + (sample.name ? " · " + sample.name : "") : sample.name;
      card.append(el("div", "wb-sample-to", who));
      if (sample.missing.length) {
        card.append(el("div", "wb-error", "No value for: " + sample.missing.join(", ")));
      }
      samples.append(card);
    }
    if (!data.samples.length) samples.append(el("p", "wb-muted", "Choose a template."));
  }

  /* `requested` is the template the answer was computed for: the select may have changed
     while the request was out, and rows must follow the answer, not the select. */
  function render(data, requested) {
    fieldList.replaceChildren(...data.fields.map(function (f) { return new Option(f, f); }));
    if (requested !== shownTemplate) {
      const first = shownTemplate === null;
      shownTemplate = requested;
      if (!first || requested) main.prune(data.slots);
      main.buildRows(data.slots, Boolean(template.value));
      if (!first) {
        schedule();
        return;
      }
    }
    errorBox.hidden = !data.error;
    errorBox.textContent = data.error ? "Not ready: " + data.error : "";
    renderSamples(data);
    renderQuickReplies(data.quick_replies || []);
    samples.dataset.state = "ready";
  }

  /* Per quick-reply button: "Stop promotions → does not opt out (payload 'X' is not a stop keyword)". */
  function renderQuickReplies(taps) {
    const box = document.getElementById("wb-quick-replies");
    if (!box) return;
    const list = box.querySelector("ul");
    list.replaceChildren(...taps.map(function (tap) {
      const item = el("li", null, tap.text + " → " + tap.verdict + " (" + tap.reason + ")");
      item.dataset.button = tap.index;
      return item;
    }));
    box.hidden = !taps.length;
  }

  /* The audience and mapping part of a preview request. */
  function previewQuery(templateId, mapping) {
    const query = new URLSearchParams();
    if (templateId) query.set("template", templateId);
    for (const option of lists.selectedOptions) query.append("lists", option.value);
    if (segments) {
      for (const option of segments.selectedOptions) query.append("segments", option.value);
    }
    query.set("mapping", JSON.stringify(mapping));
    return query;
  }

  function preview(query) {
    return fetch(form.dataset.previewUrl + "?" + query.toString(), {
      credentials: "same-origin",
      headers: {Accept: "application/json"},
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    });
  }

  function refresh() {
    const requested = template.value;
    const mine = ++asked;
    samples.dataset.state = "loading";
    preview(previewQuery(requested, main.mapping))
      .then(function (data) {
        if (mine !== asked) return;
        render(data, requested);
        if (template.value !== requested) schedule();  // the select moved on meanwhile
      })
      .catch(function () {
        if (mine !== asked) return;
        samples.replaceChildren(el("p", "wb-error", "The preview is unavailable."));
        samples.dataset.state = "error";
      });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 150);
  }

  /* The audience changed: every preview (the campaign's, each variant's) again. */
  function scheduleAll() {
    schedule();
    for (const variant of variants) variant.schedule();
  }

  /* One A/B variant: its template, its mapping rows and the first sample's text. A new
     variant starts from the campaign's own mapping (what its template shares with it). */
  function variantRow(box) {
    const select = box.querySelector("select.wb-variant-template");
    const sample = box.querySelector(".wb-variant-sample");
    const editor = mappingEditor(box.querySelector("tbody"), box.querySelector("input.wb-variant-mapping"), later);
    let shown = null;
    let wait = null;
    let mine = 0;

    function later() {
      clearTimeout(wait);
      wait = setTimeout(refresh, 150);
    }

    function refresh() {
      const requested = select.value;
      const ask = ++mine;
      box.dataset.state = "loading";
      if (!requested) {
        shown = requested;
        editor.buildRows([], false);
        sample.hidden = true;
        box.dataset.state = "ready";
        return;
      }
      preview(previewQuery(requested, editor.mapping))
        .then(function (data) {
          if (ask !== mine) return;
          if (requested !== shown) {
            const first = shown === null;
            shown = requested;
            editor.prune(data.slots);
            editor.buildRows(data.slots, true);
            if (!first) {
              later();
              return;
            }
          }
          const first = data.samples[0];
          sample.hidden = !data.error && !first;
          sample.className = "wb-variant-sample " + (data.error ? "wb-error" : "wb-muted");
          sample.textContent = data.error ? "Not ready: " + data.error : "Preview: " + first.body;
          box.dataset.state = "ready";
          if (select.value !== requested) later();
        })
        .catch(function () {
          if (ask !== mine) return;
          sample.hidden = false;
          sample.className = "wb-variant-sample wb-error";
          sample.textContent = "The preview is unavailable.";
          box.dataset.state = "error";
        });
    }

    select.addEventListener("change", function () {
      if (select.value && mappingEmpty(editor.mapping)) {
        editor.replace(JSON.parse(JSON.stringify(main.mapping)));
      }
      if (!select.value) editor.replace({});
      later();
    });
    return {select: select, schedule: later, refresh: refresh};
  }

  const variants = Array.from(form.querySelectorAll(".wb-variant")).map(variantRow);

  /* The A/B settings and variants show only for a test (a share above 0). */
  function abShown() {
    const share = form.querySelector("#id_ab_test_percent");
    const settings = document.getElementById("wb-ab-settings");
    if (!share || !settings) return;
    settings.hidden = !(parseFloat(share.value) > 0) && !settings.querySelector(".errors");
  }

  function addButton() {
    const add = document.getElementById("wb-variant-add");
    if (!add) return;
    add.hidden = !form.querySelector(".wb-variant[hidden]");
  }

  /* Only templates of the chosen number's WABA can be sent from it. */
  function filterTemplates() {
    const chosen = number.selectedOptions[0];
    const account = chosen ? chosen.dataset.account : undefined;
    for (const select of [template, ...variants.map(function (v) { return v.select; })]) {
      for (const option of select.options) {
        if (!option.value) continue;
        const other = Boolean(account) && option.dataset.account !== account;
        option.hidden = other;
        option.disabled = other;
      }
      const current = select.selectedOptions[0];
      if (current && current.disabled) select.value = "";
    }
  }

  number.addEventListener("change", function () {
    filterTemplates();
    scheduleAll();
  });
  template.addEventListener("change", schedule);
  lists.addEventListener("change", scheduleAll);
  if (segments) segments.addEventListener("change", scheduleAll);
  const share = form.querySelector("#id_ab_test_percent");
  if (share) share.addEventListener("input", abShown);
  const add = document.getElementById("wb-variant-add");
  if (add) {
    add.addEventListener("click", function () {
      const next = form.querySelector(".wb-variant[hidden]");
      if (next) next.hidden = false;
      addButton();
    });
  }
  filterTemplates();
  abShown();
  addButton();
  refresh();
  for (const variant of variants) variant.refresh();
})();
