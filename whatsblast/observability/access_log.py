"""gunicorn's access log without a line per accepted webhook POST.

At Meta's pace (one status per POST, thousands a second) an access line per accepted
callback would be most of what the web process writes and a good share of what it spends:
those POSTs are counted in ``whatsblast_webhooks_received_total`` instead. Refused,
forbidden and shed callbacks, and every other request, are logged as before.
"""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

QUIET_POST_PATHS = frozenset({"/webhooks/whatsapp"})


class AccessLogger(Logger):  # type: ignore[misc]  # gunicorn ships no type hints
    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        # The threaded worker's response has ``status_code``; the asgi worker's only ``status``.
        status = getattr(resp, "status_code", None) or getattr(resp, "status", None)
        if (
            isinstance(status, int)
            and status < 300
            and environ.get("REQUEST_METHOD") == "POST"
            and environ.get("PATH_INFO") in QUIET_POST_PATHS
        ):
            return
        super().access(resp, req, environ, request_time)
