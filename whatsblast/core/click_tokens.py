"""A tracked link's token: which message a click belongs to, unguessable, and nothing else.

A token is the message's id in base 36 followed by 12 characters (72 bits) of an
HMAC-SHA256 of that id under the site's ``SECRET_KEY`` (Django's ``salted_hmac``, salted
for this use only). It carries no personal data (an id means nothing outside the
database), cannot be made up or walked (a neighbour's id fails its check), and needs no
row of its own: the sender computes it as it builds the request, and the click endpoint
checks it without a lookup. It is 13-25 characters, short enough for a URL button's
suffix. Rotating ``SECRET_KEY`` retires every token sent before (they go to the fallback).

    >>> token = click_token(12345)
    >>> message_id_from_token(token)
    12345
"""

from __future__ import annotations

import base64
import hmac
import re
import string

from django.utils.crypto import salted_hmac

_SALT = "whatsblast.click-token"
_MAC_CHARS = 12  # 9 bytes of the digest, base64url
_DIGITS = string.digits + string.ascii_lowercase
_TOKEN_RE = re.compile(r"\A([0-9a-z]{1,13})([A-Za-z0-9_-]{12})\Z")
_MAX_ID = 2**63 - 1


def _mac(id_text: str) -> str:
    digest = salted_hmac(_SALT, id_text, algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest[:9]).decode("ascii")


def _base36(number: int) -> str:
    if number == 0:
        return "0"
    digits = []
    while number:
        number, rest = divmod(number, 36)
        digits.append(_DIGITS[rest])
    return "".join(reversed(digits))


def click_token(message_id: int) -> str:
    """The token for ``message_id``'s tracked links."""
    if not 0 < message_id <= _MAX_ID:
        raise ValueError(f"not a message id: {message_id}")
    id_text = _base36(message_id)
    return id_text + _mac(id_text)


def message_id_from_token(token: str) -> int | None:
    """The message id ``token`` was made for, or ``None`` when it is not one of ours.

    The check is constant-time in the MAC, so timing tells nothing of a right prefix.
    """
    match = _TOKEN_RE.match(token)
    if match is None:
        return None
    id_text, mac = match.groups()
    if not hmac.compare_digest(mac, _mac(id_text)):
        return None
    message_id = int(id_text, 36)
    return message_id if 0 < message_id <= _MAX_ID else None
