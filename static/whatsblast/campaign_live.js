/* The live campaign page: polls the JSON endpoint and redraws the panel.
 * Text goes in through textContent; the chart is SVG the server drew from numbers. */
(function () {
  "use strict";
  const root = document.getElementById("wb-live");
  if (!root) return;
  const url = root.dataset.url;
  const pollMs = Number(root.dataset.pollMs) || 2000;
  const fmt = new Intl.NumberFormat("en-US");
  const $ = function (id) { return document.getElementById(id); };
  const FINAL = ["completed", "cancelled"];

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function rows(table, headers, data) {
    table.replaceChildren();
    if (headers) {
      const head = el("tr");
      for (const h of headers) head.append(el("th", null, h));
      table.append(head);
    }
    for (const cells of data) {
      const row = el("tr");
      for (const cell of cells) {
        if (cell instanceof Node) {
          const td = el("td");
          td.append(cell);
          row.append(td);
        } else {
          row.append(el("td", null, cell));
        }
      }
      table.append(row);
    }
  }

  function duration(seconds) {
    if (seconds < 60) return Math.round(seconds) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
    if (seconds < 172800) return Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min";
    return Math.round(seconds / 86400) + " days";
  }

  function bar(count, total) {
    const wrap = el("div", "wb-funnel-bar");
    const fill = el("div", "wb-funnel-fill");
    fill.style.width = (total ? (100 * count) / total : 0) + "%";
    wrap.append(fill);
    return wrap;
  }

  function render(d) {
    const status = $("wb-status");
    status.textContent = d.status_display;
    status.className = "wb-badge wb-status-" + d.status;
    $("wb-reason").textContent = d.status_reason || "";
    const progress = $("wb-bar");
    progress.style.width = d.percent + "%";
    progress.setAttribute("aria-valuenow", String(d.percent));
    $("wb-progress-text").textContent = d.total
      ? fmt.format(d.done) + " of " + fmt.format(d.total) + " settled (" + d.percent + " %) · " +
        fmt.format(d.remaining) + " to go"
      : d.status === "launching" ? "Creating the messages…"
      : d.status === "scheduled" && d.scheduled_at
        ? "Scheduled for " + new Date(d.scheduled_at).toISOString().slice(0, 16).replace("T", " ") + " UTC."
        : "No messages yet.";

    const c = d.counts;
    const funnel = d.funnel.map(function (s) {
      return [s.stage, fmt.format(s.count), bar(s.count, d.total)];
    });
    for (const s of ["failed", "dead", "skipped", "cancelled"]) {
      if (c[s]) funnel.push([s, fmt.format(c[s]), bar(c[s], d.total)]);
    }
    rows($("wb-funnel"), null, funnel);

    $("wb-chart").innerHTML = d.chart_svg; // server-drawn from numbers only
    $("wb-rate").textContent = fmt.format(d.rate_per_second) + " msg/s over the last " +
      (d.rate_window_seconds >= 60 ? "minute" : d.rate_window_seconds + " s") +
      (d.target_per_second ? " · target " + fmt.format(d.target_per_second) + " msg/s" : "");

    const failures = $("wb-failures");
    if (d.failures.length) {
      rows(failures, ["", "Code", "Meta's title", "Messages"], d.failures.map(function (f) {
        return [f.status, f.code === null ? "-" : String(f.code), f.title, fmt.format(f.count)];
      }));
    } else {
      rows(failures, null, [["None."]]);
    }

    $("wb-replies").textContent = fmt.format(d.replies) + " replies · " + fmt.format(d.opt_outs) + " opt-outs";
    if (d.costs && d.costs.length) {
      rows($("wb-billing"), ["Category", "Pricing", "Messages", "Charged", "Cost"], d.costs.map(function (b) {
        return [b.category, b.type, fmt.format(b.messages), fmt.format(b.charged),
          b.cost + " " + b.currency + (b.unpriced ? " (+" + b.unpriced + " unpriced)" : "")];
      }));
    } else if (d.billing.length) {
      rows($("wb-billing"), ["Pricing category", "Billable messages", "Conversations"], d.billing.map(function (b) {
        return [b.category, fmt.format(b.billable_messages), fmt.format(b.conversations)];
      }));
    } else {
      rows($("wb-billing"), null, [["No billing reported yet."]]);
    }

    const eta = d.eta;
    let etaText = "-";
    if (eta && eta.basis === "done") etaText = "Done.";
    else if (eta && eta.seconds !== null) etaText = "in " + duration(eta.seconds) + " (" + eta.basis + ")";
    else if (eta) etaText = eta.basis;
    $("wb-eta").textContent = etaText;
    const canary = d.canary;
    $("wb-canary").textContent = canary
      ? "Canary of " + fmt.format(canary.size) + " (at most " + Math.round(canary.max_failure_rate * 1000) / 10 +
        " % failures): " + (canary.state || "not started") +
        (canary.tally ? " — " + canary.tally.failed + " failed of " + canary.tally.sent + " sent" : "")
      : "";

    if (d.guard) {
      $("wb-guard").textContent = d.guard.text;
      $("wb-guard-reason").textContent = d.guard.reason || "";
    }

    const show = {
      pause: d.status === "running" || d.status === "scheduled",
      resume: d.status === "paused",
      cancel: ["scheduled", "running", "paused"].includes(d.status),
      retry: d.retryable > 0 && ["running", "paused", "completed"].includes(d.status),
    };
    for (const form of root.querySelectorAll("form[data-action]")) {
      form.hidden = !show[form.dataset.action];
    }
    for (const n of root.querySelectorAll(".wb-retryable")) n.textContent = fmt.format(d.retryable);
    root.dataset.status = d.status;
    root.dataset.percent = String(d.percent);
  }

  function poll() {
    if (document.hidden) {
      setTimeout(poll, pollMs); // nobody is looking: ask again later
      return;
    }
    fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (d) {
        render(d);
        if (!FINAL.includes(d.status) || d.remaining) setTimeout(poll, pollMs);
      })
      .catch(function () {
        setTimeout(poll, pollMs * 2);
      });
  }

  for (const form of root.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  render(JSON.parse($("wb-live-data").textContent));
  setTimeout(poll, pollMs);
})();
