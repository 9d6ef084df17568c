"""The access log leaves out accepted webhook POSTs and answered clicks, nothing else."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from whatsblast.observability.access_log import AccessLogger


@pytest.mark.parametrize(
    ("method", "path", "status", "logged"),
    [
        ("POST", "/webhooks/whatsapp", 200, False),
        ("POST", "/webhooks/whatsapp", 403, True),
        ("POST", "/webhooks/whatsapp", 503, True),
        ("GET", "/c/3f9k2b0c1d2e3f4a5b", 302, False),  # its token must not reach the log
        ("HEAD", "/c/3f9k2b0c1d2e3f4a5b", 302, False),
        ("GET", "/c/3f9k2b0c1d2e3f4a5b", 503, True),  # a shed click is worth a line
        ("POST", "/c/3f9k2b0c1d2e3f4a5b", 405, True),
        ("GET", "/admin/", 302, True),
        ("GET", "/webhooks/whatsapp", 200, True),  # Meta's handshake
    ],
)
def test_which_requests_leave_a_line(
    monkeypatch: pytest.MonkeyPatch, method: str, path: str, status: int, logged: bool
) -> None:
    lines: list[str] = []

    def access(self: Any, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        lines.append(environ["PATH_INFO"])

    monkeypatch.setattr(Logger, "access", access)
    logger = AccessLogger(Config())
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path}
    # The asgi worker's response carries ``status``, the threaded one's ``status_code``.
    for response in (SimpleNamespace(status=status), SimpleNamespace(status_code=status)):
        logger.access(response, None, environ, 0.001)
    assert lines == ([path, path] if logged else [])
