"""ASGI entry point of the web process: ``gunicorn -c deploy/gunicorn.conf.py whatsblast.asgi``.

Meta's callbacks (``POST /webhooks/whatsapp``) are served on the process's event loop
(``whatsblast.views.webhooks_async``): at one status per POST they come by the thousand a
second, and a thread per request cost more CPU than the callback's own work. Clicks on
tracked links (GET and HEAD under ``/c/``) are too (``whatsblast.views.clicks_async``): a
campaign's recipients tap its link by the thousand in the minutes after the send. Everything
else (admin, the transactional API, ``/metrics``, probes, the handshake GET) is Django's
WSGI application, run as before by a fixed pool of threads (``GUNICORN_THREADS``): the same
middleware, the same persistent database connections per thread.

Whatever answers, a request body it left unread is read to its end before the answer starts
(``BodyDrain``): the connection can then serve the next request. A body past
``DRAIN_MAX_BYTES`` is left, and the answer says ``Connection: close``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import reverse

from whatsblast.core.loop_lag import LoopLag

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# The most of a body left unread (a 404, a 401, a CSRF refusal, a 413 by its length) that is
# read and dropped to keep the connection: the largest body the API takes
# (API_CONTACTS_MAX_BODY_BYTES). Past it, closing costs less than reading.
DRAIN_MAX_BYTES = 8 * 1024 * 1024
_CLOSE = (b"connection", b"close")


class BodyDrain:
    """One request's ``receive`` and ``send`` as the application sees them, which read what
    it left of the body before its answer goes out.

    gunicorn's asgi worker keeps a connection alive only once the whole request body has
    been received; when an answer is complete before that (the application did not read
    the body, and the rest of it was still on its way or held back by the worker's read
    pause at 256 KiB), it closes the connection after an answer that did not say so, and
    the client's next request on it fails. Reading the rest first makes the body complete
    when the answer starts; for a body too long for that, the answer says
    ``Connection: close``, as a server that will close must.
    """

    __slots__ = ("_declared", "_ended", "_expects_continue", "_receive", "_send")

    def __init__(self, receive: Receive, send: Send, declared: int, expects_continue: bool) -> None:
        self._receive = receive
        self._send = send
        self._declared = declared
        self._expects_continue = expects_continue
        self._ended = False

    @classmethod
    def around(cls, scope: Scope, receive: Receive, send: Send) -> tuple[Receive, Send]:
        """``receive`` and ``send`` for the application: as they are for a request without
        a body (most GETs, every click), else a drain's."""
        declared, expects_continue = _body_declared(scope)
        if declared == 0:
            return receive, send
        drain = cls(receive, send, declared, expects_continue)
        return drain.receive, drain.send

    async def receive(self) -> Message:
        message = await self._receive()
        self._expects_continue = False  # asked for: the worker sends its 100 (Continue)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._ended = True
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and not self._ended:
            if not await self._rest_read():
                headers = [*message.get("headers", []), _CLOSE]
                message = {**message, "headers": headers}
        await self._send(message)

    async def _rest_read(self) -> bool:
        """Read the rest of the body and drop it; ``False`` when it is not worth it (longer
        than DRAIN_MAX_BYTES, or held back by its client until asked for) and the
        connection must close instead."""
        if self._expects_continue or self._declared > DRAIN_MAX_BYTES:
            # A body held back for a 100 (Continue) was never sent, so closing leaves nothing
            # behind; one declared past the cap would cost more to read than a new connection.
            return False
        taken = 0
        while not self._ended:
            message = await self.receive()
            taken += len(message.get("body", b""))
            if taken > DRAIN_MAX_BYTES:
                return False
        return True


def _body_declared(scope: Scope) -> tuple[int, bool]:
    """The body's length (-1 for a chunked body) and whether the client waits for a
    100 (Continue) before sending it."""
    length = 0
    expects_continue = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = int(value) if value.isdigit() else -1
        elif name == b"transfer-encoding":
            length = -1
        elif name == b"expect":
            expects_continue = value.lower() == b"100-continue"
    return length, expects_continue


class WebProcess:
    """Route webhook POSTs and clicks to their async handlers, every other request to Django."""

    def __init__(self) -> None:
        django_app = get_wsgi_application()
        from whatsblast.views.clicks_async import click_get
        from whatsblast.views.webhooks_async import webhook_post

        self.webhook_post = webhook_post
        self.webhook_path = reverse("webhooks:whatsapp")
        self.click_get = click_get
        self.click_prefix = reverse("click", args=["-"])[:-1]  # "/c/"
        self.django = WSGIMiddleware(django_app, workers=settings.WEB_THREADS)  # type: ignore[arg-type]
        self.lag = LoopLag()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            self.lag.start()
            receive, send = BodyDrain.around(scope, receive, send)
            if scope["method"] == "POST" and scope["path"] == self.webhook_path:
                await self.webhook_post(scope, receive, send, lag=self.lag)
            elif scope["method"] in ("GET", "HEAD") and scope["path"].startswith(self.click_prefix):
                await self.click_get(scope, receive, send, prefix=self.click_prefix)
            else:
                await self.django(scope, receive, send)  # type: ignore[arg-type]
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        # websockets: none are served

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.lag.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.lag.stop()
                from delivery.engagement.clicks import committer_stop as clicks_committer_stop
                from webhooks.ingest import committer_stop

                committer_stop()
                clicks_committer_stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _application() -> WebProcess:
    app = WebProcess()
    # Everything loaded so far (Django, the apps, the URL conf) lives as long as the process:
    # out of the collector's sight, a full collection no longer scans it. Measured: p99 of the
    # webhook POSTs 62-97 ms without, 17-42 ms with (bench/webhook_ingest.py, 2 processes).
    gc.freeze()
    return app


application = _application()
