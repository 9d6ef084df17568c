// Live progress of a background job: polls the element's data-progress-url once a second
// and reloads the page when the job has finished (the page then shows the result).
(function () {
  "use strict";
  var box = document.querySelector("[data-progress-url]");
  if (!box) { return; }
  var bar = box.querySelector("progress");
  var label = box.querySelector("[data-progress-label]");
  var stalled = box.querySelector("[data-progress-stalled]");

  function render(p) {
    if (p.percent === null) { bar.removeAttribute("value"); } else { bar.value = p.percent; }
    label.textContent = p.label;  // the server names the stage (reading, then writing)
    if (stalled) { stalled.hidden = !p.stalled; }
  }

  function poll() {
    fetch(box.dataset.progressUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (p) {
        if (p) {
          render(p);
          if (p.finished) { window.location.reload(); return; }
        }
        window.setTimeout(poll, 1000);
      })
      .catch(function () { window.setTimeout(poll, 1000); });
  }
  window.setTimeout(poll, 1000);
})();
