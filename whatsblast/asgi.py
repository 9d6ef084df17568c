"""ASGI entry point of the web process: ``gunicorn -c deploy/gunicorn.conf.py whatsblast.asgi``.

Meta's callbacks (``POST /webhooks/whatsapp``) are served on the process's event loop
(``whatsblast.views.webhooks_async``): at one status per POST they come by the thousand a
second, and a thread per request cost more CPU than the callback's own work. Clicks on
tracked links (GET and HEAD under ``/c/``) are too (``whatsblast.views.clicks_async``): a
campaign's recipients tap its link by the thousand in the minutes after the send. Everything
else (admin, the transactional API, ``/metrics``, probes, the handshake GET) is Django's
WSGI application, run as before by a fixed pool of threads (``GUNICORN_THREADS``): the same
middleware, the same persistent database connections per thread.
"""

from __future__ import annotations

import gc
import os
from collections.abc import MutableMapping
from typing import Any

from a2wsgi import WSGIMiddleware
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.urls import reverse

from whatsblast.core.loop_lag import LoopLag

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")

Scope = MutableMapping[str, Any]


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
