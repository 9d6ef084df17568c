"""Proof that a callback came from Meta: the POST signature and the GET handshake."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_PREFIX = "sha256="
# Meta's challenge is a short number; anything longer is not a handshake.
MAX_CHALLENGE_LENGTH = 256


def signature_compute(*, body: bytes, secret: str) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends for ``body``."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def signature_is_valid(*, body: bytes, header: str | None, secret: str) -> bool:
    """HMAC-SHA256 of the exact raw bytes, compared in constant time.

    Meta signs the bytes it sent, with ``/``, ``@`` and non-ASCII characters escaped, so the
    signature must be computed over ``request.body`` and never over re-serialised JSON.
    """
    if not secret or not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    # Meta sends lower-case hex; the comparison is on ASCII bytes so no input can raise.
    given = header[len(SIGNATURE_PREFIX) :].strip().lower().encode("ascii", "replace")
    return hmac.compare_digest(expected.encode("ascii"), given)


def handshake_challenge(
    *, mode: str | None, token: str | None, challenge: str | None, verify_token: str | None
) -> str | None:
    """The challenge to echo when the subscription handshake is valid, else ``None``."""
    if not verify_token or mode != "subscribe" or token is None or not challenge:
        return None
    if len(challenge) > MAX_CHALLENGE_LENGTH:
        return None
    if not hmac.compare_digest(token.encode(), verify_token.encode()):
        return None
    return challenge
