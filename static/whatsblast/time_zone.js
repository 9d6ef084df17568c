/* First visit: show times in the browser's own zone (a cookie the server reads). */
(function () {
  "use strict";
  if (document.cookie.split("; ").some(function (c) { return c.indexOf("wb_tz=") === 0; })) return;
  let zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone) return;
  document.cookie = "wb_tz=" + encodeURIComponent(zone) + "; path=/; max-age=31536000; samesite=lax";
})();
