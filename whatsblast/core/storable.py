"""Whether a text can be stored in PostgreSQL as it is.

PostgreSQL refuses a NUL character in text and UTF-8 cannot encode a lone surrogate (which
JSON's ``\\ud800`` escapes produce). Input checked here is refused with ``UNSTORABLE`` as
its message instead of turning into a database error.
"""

from __future__ import annotations

UNSTORABLE = "Contains a character that cannot be stored (NUL or a lone surrogate)."


def text_storable(value: str) -> bool:
    """True when ``value`` has no NUL and encodes as UTF-8."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
