/* The campaign form: one row per template parameter, and the live preview.
 * The mapping lives in the hidden #id_param_mapping as JSON ({"body": {"1": {"field":
 * "name"}}, ...}); every change re-asks the server to render the message for a few
 * contacts of the chosen lists and segments. All text reaches the page through textContent. */
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
  let mapping = parse(hidden.value);
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

  function save() {
    hidden.value = JSON.stringify(mapping);
  }

  function sourceOf(slot) {
    if (slot.section === "header") return mapping.header || null;
    return (mapping[slot.section] || {})[slot.key] || null;
  }

  function setSource(slot, source) {
    if (slot.section === "header") {
      if (source) mapping.header = source;
      else delete mapping.header;
    } else {
      const section = mapping[slot.section] || {};
      if (source) section[slot.key] = source;
      else delete section[slot.key];
      mapping[slot.section] = section;
      if (slot.section === "buttons" && !Object.keys(section).length) delete mapping.buttons;
    }
    save();
  }

  /* Keep only what the template takes (after a template change). */
  function prune(slots) {
    const kept = {body: {}};
    for (const slot of slots) {
      const source = sourceOf(slot);
      if (!source) continue;
      if (slot.section === "header") kept.header = source;
      else (kept[slot.section] = kept[slot.section] || {})[slot.key] = source;
    }
    mapping = kept;
    save();
  }

  function slotLabel(slot) {
    if (slot.section === "header") return "Header (" + slot.kind + ")";
    if (slot.section === "body") return "Body {{" + slot.key + "}}";
    return "Button " + slot.key + " (" + slot.kind + ")";
  }

  function buildRows(slots) {
    tbody.replaceChildren();
    if (!slots.length) {
      const row = el("tr");
      const cell = el("td", "wb-muted", template.value ? "This template takes no parameters." : "Choose a template.");
      cell.colSpan = 4;
      row.append(cell);
      tbody.append(row);
      return;
    }
    for (const slot of slots) {
      const row = el("tr");
      row.dataset.slot = slot.section + ":" + (slot.key === null ? "" : slot.key);
      const kind = el("select", "wb-kind");
      kind.setAttribute("aria-label", slotLabel(slot) + " source");
      kind.append(new Option("Contact field", "field"), new Option("Constant", "value"));
      const input = el("input", "wb-source");
      input.type = "text";
      input.setAttribute("aria-label", slotLabel(slot) + " field or value");
      const fallback = el("input", "wb-fallback");
      fallback.type = "text";
      fallback.placeholder = "if missing, e.g. there";
      fallback.title = "Used for contacts who have no value in this field, instead of refusing the launch.";
      fallback.setAttribute("aria-label", slotLabel(slot) + " fallback");
      const current = sourceOf(slot);
      if (current && Object.prototype.hasOwnProperty.call(current, "value")) {
        kind.value = "value";
        input.value = current.value;
      } else {
        kind.value = "field";
        input.value = current ? current.field : "";
        fallback.value = current && current.fallback ? current.fallback : "";
      }
      const update = function () {
        fallback.hidden = kind.value !== "field";
        if (kind.value === "field") {
          input.setAttribute("list", "wb-fields");
          input.placeholder = "e.g. name";
          const name = input.value.trim();
          const source = name ? {field: name} : null;
          if (source && fallback.value.trim()) source.fallback = fallback.value;
          setSource(slot, source);
        } else {
          input.removeAttribute("list");
          input.placeholder = "text for everyone";
          setSource(slot, {value: input.value});
        }
        schedule();
      };
      kind.addEventListener("change", update);
      input.addEventListener("input", update);
      fallback.addEventListener("input", update);
      fallback.hidden = kind.value !== "field";
      if (kind.value === "field") input.setAttribute("list", "wb-fields");
      const name = el("td", null, slotLabel(slot));
      if (slot.required) name.append(el("span", "wb-required", " *"));
      const kindCell = el("td");
      kindCell.append(kind);
      const inputCell = el("td");
      inputCell.append(input, " ", fallback);
      row.append(name, kindCell, inputCell, el("td", "wb-muted", slot.example || ""));
      tbody.append(row);
    }
  }

  function renderSamples(data) {
    samples.replaceChildren();
    for (const sample of data.samples) {
      const card = el("div", "wb-sample");
      const bubble = el("div", "wb-bubble");
      if (sample.header) bubble.append(el("div", "wb-bubble-header", sample.header));
      bubble.append(el("div", "wb-bubble-body", sample.body));
      for (const button of sample.buttons) {
        const line = el("div", "wb-bubble-button", button.text);
        if (button.url) line.title = button.url;
        bubble.append(line);
        if (button.url) bubble.append(el("div", "wb-bubble-url", button.url));
      }
      card.append(bubble);
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
      if (!first || requested) prune(data.slots);
      buildRows(data.slots);
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

  function refresh() {
    const query = new URLSearchParams();
    const requested = template.value;
    if (requested) query.set("template", requested);
    for (const option of lists.selectedOptions) query.append("lists", option.value);
    if (segments) {
      for (const option of segments.selectedOptions) query.append("segments", option.value);
    }
    query.set("mapping", JSON.stringify(mapping));
    const mine = ++asked;
    samples.dataset.state = "loading";
    fetch(form.dataset.previewUrl + "?" + query.toString(), {
      credentials: "same-origin",
      headers: {Accept: "application/json"},
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
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

  /* Only templates of the chosen number's WABA can be sent from it. */
  function filterTemplates() {
    const chosen = number.selectedOptions[0];
    const account = chosen ? chosen.dataset.account : undefined;
    for (const option of template.options) {
      if (!option.value) continue;
      const other = Boolean(account) && option.dataset.account !== account;
      option.hidden = other;
      option.disabled = other;
    }
    const current = template.selectedOptions[0];
    if (current && current.disabled) template.value = "";
  }

  number.addEventListener("change", function () {
    filterTemplates();
    schedule();
  });
  template.addEventListener("change", schedule);
  lists.addEventListener("change", schedule);
  if (segments) segments.addEventListener("change", schedule);
  filterTemplates();
  refresh();
})();
