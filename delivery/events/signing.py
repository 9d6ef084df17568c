"""Signing a delivery, and checking one as a receiver should.

Each POST carries ``Whatsblast-Signature: t=<unix seconds>,v1=<hex>`` where ``v1`` is
HMAC-SHA256, keyed with the subscription's secret, over ``"<t>." + raw body``. The time is
inside what is signed, so a receiver that refuses a ``t`` older than a few minutes refuses
a replayed request; the event ids (stable across retries) let it drop the duplicates that
at-least-once delivery brings.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "Whatsblast-Signature"
DEFAULT_TOLERANCE_S = 300


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def signature_verify(
    *,
    secret: str,
    header: str,
    body: bytes,
    now: float | None = None,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """What a receiver does (docs/events.md shows it standalone): the header parses, the
    time is recent, and the signature matches in constant time."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((now if now is not None else time.time()) - timestamp) > tolerance_s:
        return False
    expected = signature(secret=secret, timestamp=timestamp, body=body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
