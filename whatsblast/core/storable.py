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


# The characters that count as blank for Python's str.strip() or for ECMAScript's \s (which
# an OpenAPI pattern is read with) alike: Python's whitespace and U+FEFF. A name the API
# requires "not blank" needs one character outside these, and the API strips these, so the
# document and the checks agree on every value.
BLANK_CHARS = (
    "\t\n\x0b\x0c\r \x1c\x1d\x1e\x1f\x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# The same characters as the inside of a regular expression's [...], each as a \uXXXX
# escape, which Python's re and ECMAScript read alike.
BLANK_CLASS = "".join(f"\\u{ord(char):04x}" for char in BLANK_CHARS)


def text_stripped(value: str) -> str:
    """``value`` without the blank characters (``BLANK_CHARS``) at either end."""
    return value.strip(BLANK_CHARS)
