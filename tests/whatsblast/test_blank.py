"""What counts as blank: one set for the API's checks (Python's strip) and its document's
patterns (ECMAScript's \\s), so a name one accepts the other accepts too."""

from __future__ import annotations

import re
import sys

from whatsblast.core.storable import BLANK_CHARS, BLANK_CLASS, text_stripped

# ECMAScript's \s (ECMA-262, WhiteSpace and LineTerminator): tab, VT, FF, space, NBSP,
# U+FEFF and the Space_Separator category, plus LF, CR, LS and PS.
ECMASCRIPT_SPACE = set("\t\x0b\x0c \xa0\ufeff\n\r\u2028\u2029\u1680\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}


def test_the_blank_set_is_pythons_whitespace_and_ecmascripts_alike() -> None:
    python_space = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert set(BLANK_CHARS) == python_space | ECMASCRIPT_SPACE
    assert len(BLANK_CHARS) == len(set(BLANK_CHARS))


def test_the_pattern_class_holds_exactly_the_blank_characters() -> None:
    blank = re.compile(f"[{BLANK_CLASS}]")
    matched = {chr(c) for c in range(sys.maxunicode + 1) if blank.fullmatch(chr(c))}
    assert matched == set(BLANK_CHARS)


def test_stripping_takes_every_blank_character_off_the_ends_only() -> None:
    assert text_stripped("\ufeff\x1c Ana\u3000Souza\x85\u2009") == "Ana\u3000Souza"
    assert text_stripped(BLANK_CHARS) == ""
