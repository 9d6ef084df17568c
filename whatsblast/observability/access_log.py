"""gunicorn's access log without a line per accepted webhook POST or answered click.

At Meta's pace (one status per POST, thousands a second) an access line per accepted
callback would be most of what the web process writes and a good share of what it spends:
those POSTs are counted in ``whatsblast_webhooks_received_total`` instead. A tracked
link's redirect (``/c/<token>``, answered 302) is left out for the same reason, counted in
``whatsblast_clicks_total``, and for one more: its line would hold the token, and anyone
reading the log could replay the click (a false click, and a redirect carrying the
contact's fields). Refused, forbidden and shed requests (a click answered 503 included),
and every other request, are logged as before.
"""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

QUIET_POST_PATHS = frozenset({"/webhooks/whatsapp"})
QUIET_CLICK_PREFIX = "/c/"


class AccessLogger(Logger):  # type: ignore[misc]  # gunicorn ships no type hints
    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        # The threaded worker's response has ``status_code``; the asgi worker's only ``status``.
        status = getattr(resp, "status_code", None) or getattr(resp, "status", None)
        if isinstance(status, int) and _quiet(status, environ):
            return
        super().access(resp, req, environ, request_time)


def _quiet(status: int, environ: dict[str, Any]) -> bool:
    method = environ.get("REQUEST_METHOD")
    path = str(environ.get("PATH_INFO") or "")
    if method == "POST":
        return status < 300 and path in QUIET_POST_PATHS
    return method in ("GET", "HEAD") and status == 302 and path.startswith(QUIET_CLICK_PREFIX)
