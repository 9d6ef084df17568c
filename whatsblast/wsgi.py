"""WSGI entry point for gunicorn: ``gunicorn whatsblast.wsgi``.

Meta's callbacks (``POST /webhooks/whatsapp``) take a lean path: the same Django view, called
without the middleware stack and URL resolver. Sessions, CSRF, auth, messages, clickjacking
headers and per-view request metrics mean nothing to a signed machine-to-machine POST, and
at Meta's pace of one status per POST (some 3,000 a second for a number sending 1,000
messages a second) they were most of a POST's cost. Everything else, the handshake GET
included, goes through Django's full handler.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.handlers.exception import response_for_exception
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest
from django.core.signals import request_started
from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")

logger = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
View = Callable[[HttpRequest], HttpResponse]


class LeanPath:
    """Route POSTs to one path straight to its view; everything else to ``app``.

    The request signals still fire (``request_finished`` closes stale database connections
    exactly as Django's handler does), and an exception becomes the response Django would
    have made of it.
    """

    def __init__(self, app: WSGIHandler, *, path: str, view: View) -> None:
        self.app = app
        self.path = path
        self.view = view

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != self.path:
            return self.app(environ, start_response)
        request_started.send(sender=self.__class__, environ=environ)
        request = WSGIRequest(environ)
        try:
            response = self.view(request)
        except Exception as exc:  # noqa: BLE001 - Django's own handler does the same
            response = response_for_exception(request, exc)
        if not response.streaming and not response.has_header("Content-Length"):
            # As CommonMiddleware would: a sized answer, not gunicorn's chunked encoding.
            response["Content-Length"] = str(len(response.content))
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # request_finished
        response._resource_closers.append(request.close)  # type: ignore[attr-defined]
        start_response(f"{response.status_code} {response.reason_phrase}", list(response.items()))
        return response


def _application() -> LeanPath:
    django_app = get_wsgi_application()
    from whatsblast.views.webhooks import whatsapp_webhook

    return LeanPath(django_app, path=reverse("webhooks:whatsapp"), view=whatsapp_webhook)


application = _application()
