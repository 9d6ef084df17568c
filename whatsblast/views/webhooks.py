"""``/webhooks/whatsapp``: Meta's subscription handshake (GET) and its callbacks (POST).

A POST does the least that makes the callback durable: read the raw body (size-capped),
check its signature, hand it to the process's group commit (one INSERT for every POST
waiting at that moment, ``webhooks.ingest``), answer 200 once it is committed. Parsing
statuses and touching messages happen in the applier job. Past capacity it answers 503
with Retry-After: when too many bodies wait for the commit (the database is slow), and
when the POST waited too long for a thread (the process's CPU is the limit).
"""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from webhooks import metrics
from webhooks.ingest import NotStored, Overloaded, webhook_body_store
from webhooks.payloads import envelope_check
from webhooks.signature import handshake_challenge, signature_is_valid
from whatsblast.core.request_queue import queue_wait_s

logger = logging.getLogger(__name__)

_missing_secret_logged = False


@csrf_exempt
@require_http_methods(["GET", "POST"])
def whatsapp_webhook(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _handshake(request)
    return _receive(request)


def _handshake(request: HttpRequest) -> HttpResponse:
    challenge = handshake_challenge(
        mode=request.GET.get("hub.mode"),
        token=request.GET.get("hub.verify_token"),
        challenge=request.GET.get("hub.challenge"),
        verify_token=settings.WHATSAPP_VERIFY_TOKEN,
    )
    if challenge is None:
        return HttpResponse("verification failed", status=403, content_type="text/plain")
    return HttpResponse(challenge, content_type="text/plain")


def _receive(request: HttpRequest) -> HttpResponse:
    waited = queue_wait_s()
    if waited is not None and waited > settings.WEBHOOK_QUEUE_LIMIT_S:
        # The process is past capacity (its threads cannot keep up): a late answer helps
        # nobody, Meta would time out and resend. Refuse before reading or verifying.
        return _busy()
    refused = refusal_of_length(request.META.get("CONTENT_LENGTH"))
    if refused is not None:
        status, text = refused
        return HttpResponse(text, status=status, content_type="text/plain")
    limit = settings.WEBHOOK_MAX_BODY_BYTES
    secret = settings.WHATSAPP_APP_SECRET
    if not secret:
        # Fail closed: without the secret no callback can be told from a forgery.
        log_missing_secret()
        return HttpResponse("forbidden", status=403, content_type="text/plain")
    # Read from the stream rather than request.body: Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    # (2.5 MB) would refuse Meta's 3 MB callbacks, and the cap here is our own.
    body = request.read(limit + 1)
    if len(body) > limit:
        return _too_large()
    if not signature_is_valid(
        body=body, header=request.headers.get("X-Hub-Signature-256"), secret=secret
    ):
        metrics.webhook_received("forbidden")
        return HttpResponse("forbidden", status=403, content_type="text/plain")
    try:
        webhook_body_store(body=body, rejected_reason=rejection(body))
    except (Overloaded, NotStored):
        # Past capacity, or the database too slow: Meta retries, and nothing was acked.
        return _busy()
    return HttpResponse("ok", content_type="text/plain")


def _busy() -> HttpResponse:
    metrics.webhook_shed()
    response = HttpResponse("busy", status=503, content_type="text/plain")
    response["Retry-After"] = str(settings.WEBHOOK_RETRY_AFTER_S)
    return response


def refusal_of_length(content_length: str | None) -> tuple[int, str] | None:
    """The answer a declared Content-Length calls for before the body is read, if any:
    (400, …) when it is no number, (413, …) when it is over ``WEBHOOK_MAX_BODY_BYTES``.
    Both web processes' webhook views ask this first."""
    try:
        declared = int(content_length or 0)
    except ValueError:
        return 400, "bad Content-Length"
    if declared > settings.WEBHOOK_MAX_BODY_BYTES:
        return 413, "payload too large"
    return None


def rejection(body: bytes) -> str | None:
    """Why a signed body cannot be a callback; Meta still gets 200 so it stops retrying."""
    try:
        return envelope_check(json.loads(body))
    except (ValueError, RecursionError) as exc:
        return f"not JSON: {exc}"[:2000]


def _too_large() -> HttpResponse:
    return HttpResponse("payload too large", status=413, content_type="text/plain")


def log_missing_secret() -> None:
    global _missing_secret_logged
    if not _missing_secret_logged:
        _missing_secret_logged = True
        logger.error("WHATSAPP_APP_SECRET is not set: every webhook POST is refused")
