"""``POST /webhooks/whatsapp`` on the ASGI web process: the same checks, on the event loop.

At Meta's pace of one status per POST a web process takes thousands of callbacks a second,
and a thread per request (gunicorn's ``gthread``) cost more CPU than the callback's own work.
Here the whole POST runs on the process's event loop: read the raw body (size-capped), check
its signature, hand it to the process's group commit (``webhooks.ingest``, the same committer
threads as the threaded view) and answer 200 once it is committed; the loop serves other
POSTs meanwhile. Nothing here touches the database from the loop. The answers are those of
``whatsblast.views.webhooks``: 403 unsigned or no secret, 413 too large, 400 a bad
Content-Length, 503 with Retry-After past capacity (the loop too late, or too many bodies
waiting for the commit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from webhooks import metrics
from webhooks.ingest import NotStored, Overloaded, webhook_body_store_async
from webhooks.signature import signature_is_valid
from whatsblast.core.loop_lag import LoopLag
from whatsblast.views.webhooks import log_missing_secret, refusal_of_length, rejection

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_TEXT = (b"content-type", b"text/plain")


async def webhook_post(scope: Scope, receive: Receive, send: Send, *, lag: LoopLag) -> None:
    if lag.lag_s > settings.WEBHOOK_QUEUE_LIMIT_S:
        # The process is past capacity: a late answer helps nobody, Meta would time out and
        # resend. Refuse before verifying (what was sent of the body is only read and
        # dropped, by whatsblast.asgi.BodyDrain, to keep the connection).
        await _busy(send)
        return
    headers = dict(scope["headers"])
    length = headers.get(b"content-length")
    refused = refusal_of_length(None if length is None else length.decode("latin-1"))
    if refused is not None:
        status, text = refused
        await _answer(send, status, text.encode())
        return
    secret = settings.WHATSAPP_APP_SECRET
    if not secret:
        # Fail closed: without the secret no callback can be told from a forgery.
        log_missing_secret()
        await _answer(send, 403, b"forbidden")
        return
    body = await _body_read(receive, settings.WEBHOOK_MAX_BODY_BYTES)
    if body is None:
        await _answer(send, 413, b"payload too large")
        return
    signature = headers.get(b"x-hub-signature-256")
    if not signature_is_valid(
        body=body, header=None if signature is None else signature.decode("latin-1"), secret=secret
    ):
        # A Redis round trip: off the loop, which serves everyone else meanwhile.
        await asyncio.to_thread(metrics.webhook_received, "forbidden")
        await _answer(send, 403, b"forbidden")
        return
    try:
        await webhook_body_store_async(body=body, rejected_reason=rejection(body))
    except (Overloaded, NotStored):
        # Past capacity, or the database too slow: Meta retries, and nothing was acked.
        await _busy(send)
        return
    await _answer(send, 200, b"ok")


async def _body_read(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or ``None`` once it is longer than ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _busy(send: Send) -> None:
    metrics.webhook_shed()
    await _answer(
        send, 503, b"busy", (b"retry-after", str(settings.WEBHOOK_RETRY_AFTER_S).encode())
    )


async def _answer(send: Send, status: int, body: bytes, *extra: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_TEXT, (b"content-length", str(len(body)).encode()), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})
