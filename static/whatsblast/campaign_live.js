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

  // One time format on every page: "2026-12-01 08:07" in the viewer's time zone.
  const zone = root.dataset.timeZone || undefined;
  function when(iso) {
    const parts = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", hour12: false, timeZoneName: "short",
    }).formatToParts(new Date(iso));
    const p = {};
    for (const part of parts) p[part.type] = part.value;
    return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + " " + (p.timeZoneName || "");
  }

  function clock(iso) {
    return new Intl.DateTimeFormat("en-GB", {
      timeZone: zone, hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
    }).format(new Date(iso));
  }

  // What a testing canary waits for: "99 of 100 settled, 1 waiting on a retry at 13:05:10".
  function canaryWaiting(t) {
    const parts = [fmt.format(t.sent) + " of " + fmt.format(t.size) + " settled (" + fmt.format(t.failed) + " failed)"];
    if (t.retrying) {
      parts.push(fmt.format(t.retrying) + " waiting on a retry" + (t.next_retry_at ? " at " + clock(t.next_retry_at) : ""));
    }
    if (t.in_flight) parts.push(fmt.format(t.in_flight) + " being sent");
    const queued = t.open - t.retrying - t.in_flight;
    if (queued > 0) parts.push(fmt.format(queued) + " waiting to be sent");
    if (!t.open && t.reports_due_by) {
      parts.push("waiting for delivery reports until " + clock(t.reports_due_by));
    }
    return parts.join(", ");
  }

  function messagesLink(key) {
    const base = root.dataset.messagesUrl + "?campaign__id__exact=" + root.dataset.campaignId;
    const value = {audience: "", replies: "replied", opt_outs: "opted_out"}[key];
    const outcome = value === undefined ? key : value;
    return outcome ? base + "&outcome=" + outcome : base;
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
    progress.classList.toggle("wb-bar-cancelled", d.status === "cancelled");
    progress.classList.toggle("wb-bar-waiting", d.status === "scheduled" || d.status === "launching");
    const f = {};
    for (const row of d.figures) f[row.key] = row.count;
    let text;
    if (d.status === "launching") text = "Launching: creating the messages…";
    else if (d.status === "scheduled") {
      text = d.scheduled_at ? "Scheduled for " + when(d.scheduled_at) + "." : "Scheduled.";
    } else if (!d.total) text = "No messages yet.";
    else if (d.status === "cancelled") {
      text = "Cancelled: " + fmt.format(f.sent || 0) + " sent, " + fmt.format(f.failed || 0) +
        " failed, " + fmt.format(f.cancelled || 0) + " not sent because of the cancel" +
        (d.remaining ? ", " + fmt.format(d.remaining) + " still settling" : "") + ".";
    } else {
      text = fmt.format(d.done) + " of " + fmt.format(d.total) + " settled (" + d.percent + " %) · " +
        fmt.format(d.remaining) + " to go";
    }
    $("wb-progress-text").textContent = text;

    const figures = d.figures.map(function (row) {
      const label = el("span", null, row.label);
      label.title = row.help;
      const count = el("a", null, fmt.format(row.count));
      count.href = messagesLink(row.key);
      return [label, count, bar(row.count, d.total), row.percent === null ? "" : row.percent + " %"];
    });
    rows($("wb-funnel"), null, figures);
    const held = $("wb-held");
    held.textContent = d.held_for_quality_text || "";
    held.hidden = !d.held_for_quality_text;

    $("wb-chart").innerHTML = d.chart_svg; // server-drawn from numbers only
    $("wb-rate").textContent = fmt.format(d.rate_per_second) + " msg/s over the last " +
      (d.rate_window_seconds >= 60 ? "minute" : d.rate_window_seconds + " s") +
      (d.target_per_second ? " · target " + fmt.format(d.target_per_second) + " msg/s" : "");

    const failures = $("wb-failures");
    if (d.failures.length) {
      rows(failures, ["Code", "Meta's title", "", "Messages", ""], d.failures.map(function (f) {
        const query = "?campaign__id__exact=" + d.campaign_id + "&status__exact=" + f.status +
          (f.code === null ? "" : "&last_error_code=" + f.code);
        const code = el("a", "wb-code", f.code === null ? "-" : String(f.code));
        code.href = root.dataset.messagesUrl + query;
        const count = el("a", null, fmt.format(f.count));
        count.href = code.href;
        let dead = "";
        if (f.status === "dead" && root.dataset.deadUrl) {
          dead = el("a", "wb-dead-link", "dead letters");
          dead.href = root.dataset.deadUrl + "?status__exact=all&campaign__id__exact=" + d.campaign_id +
            "&error_code=" + (f.code === null ? "none" : f.code);
        }
        return [code, f.title, f.status === "dead" ? "retries ran out" : "failed", count, dead];
      }));
    } else {
      rows(failures, null, [["None."]]);
    }

    const replied = $("wb-replies");
    replied.replaceChildren();
    const people = f.replies || 0;
    const repliedText = el("a", null, fmt.format(people) + (people === 1 ? " recipient" : " recipients") + " replied");
    repliedText.href = root.dataset.repliesUrl;
    repliedText.id = "wb-replies-count";
    replied.append(repliedText);
    let more = d.replies !== people ? " (" + fmt.format(d.replies) + (d.replies === 1 ? " reply)" : " replies)") : "";
    more += " · " + fmt.format(f.opt_outs || 0) + " opted out";
    replied.append(document.createTextNode(more));
    // The same columns, words and amounts as the report (delivery.campaigns.pricing).
    if (d.costs && d.costs.length) {
      const costRows = d.costs.map(function (b) {
        return [b.category, b.type, fmt.format(b.messages), fmt.format(b.charged), b.text];
      });
      costRows.push(["All", "", "", fmt.format(d.cost.charged), d.cost.text]);
      rows($("wb-billing"), ["Category", "Pricing", "Messages", d.charged_label, "Cost"], costRows);
    } else {
      rows($("wb-billing"), null, [["No pricing reported yet."]]);
    }

    const eta = d.eta;
    let etaText = "-";
    if (eta && eta.basis === "done") etaText = "Done.";
    else if (eta && eta.basis === "cancelled") etaText = "Cancelled: nothing more will be sent.";
    else if (eta && eta.basis === "scheduled") etaText = eta.at ? "Starts " + when(eta.at) + "." : "Scheduled.";
    else if (eta && eta.basis === "launching") etaText = "Starts once the messages are created.";
    else if (eta && eta.seconds !== null) etaText = "in " + duration(eta.seconds) + " (" + eta.basis + ")";
    else if (eta) etaText = eta.basis;
    $("wb-eta").textContent = etaText;
    const canary = d.canary;
    $("wb-canary").textContent = canary
      ? "Canary of " + fmt.format(canary.size) + " (at most " + Math.round(canary.max_failure_rate * 1000) / 10 +
        " % failures): " + (canary.state || "not started") + (canary.tally ? " — " + canaryWaiting(canary.tally) : "")
      : "";

    if (d.guard) {
      $("wb-guard").textContent = d.guard.text;
      $("wb-guard-reason").textContent = d.guard.reason || "";
      $("wb-guard-held").textContent = d.guard.held_warning || "";
      $("wb-guard-held").hidden = !d.guard.held_warning;
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
