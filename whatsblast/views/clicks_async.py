"""GET and HEAD ``/c/<token>`` on the ASGI web process: the click, on the event loop.

A campaign's tracked link is tapped by thousands of people in the minutes after a send,
as webhook callbacks come by thousands a second, and for the same reason it is served
here rather than by a thread per request: read the token, hand the click to the process's
group commit (``delivery.engagement.clicks``, the same committer threads as the threaded
view) and answer once it is committed. Nothing here touches the database or Redis from the
loop. The answers are those of ``whatsblast.views.clicks``: 302 to the destination (or to
``CLICK_FALLBACK_URL`` for a token that is not ours, unknown or expired) with
``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer`` and no body; 503 with
Retry-After and a plain "try again" text when the click could not be stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from delivery.engagement.clicks import ClicksUnavailable, click_location_async, retry_after_s
from whatsblast.views.clicks import REDIRECT_HEADERS, UNAVAILABLE_TEXT

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# A redirect's headers after its Location: the same for every click, made once.
_REDIRECT_TAIL = (
    *((k.lower().encode(), v.encode()) for k, v in REDIRECT_HEADERS.items()),
    (b"content-length", b"0"),
)


async def click_get(scope: Scope, receive: Receive, send: Send, *, prefix: str) -> None:
    """Answer a GET or HEAD of ``prefix`` + token (``prefix``: the click path, "/c/")."""
    token = scope["path"][len(prefix) :]
    user_agent = ""
    for name, value in scope["headers"]:  # lower-case names (ASGI); the first one counts
        if name == b"user-agent":
            user_agent = value.decode("latin-1")
            break
    try:
        location = await click_location_async(token, user_agent=user_agent, method=scope["method"])
    except ClicksUnavailable:
        body = UNAVAILABLE_TEXT.encode()
        await _answer(
            send,
            503,
            [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"retry-after", str(retry_after_s()).encode()),
                (b"cache-control", b"no-store"),
            ],
            b"" if scope["method"] == "HEAD" else body,
            length=len(body),
        )
        return
    # location_of() and fallback_url() give ASCII (iri_to_uri), fit for a header.
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [(b"location", location.encode("latin-1")), *_REDIRECT_TAIL],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _answer(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes, *, length: int = 0
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(length or len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
