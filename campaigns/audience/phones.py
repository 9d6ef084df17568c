"""Raw phone text as people type it → E.164, with ``phonenumbers``, or the reason it cannot be."""

from __future__ import annotations

import functools
import re
from typing import Any

import phonenumbers
from phonenumbers import NumberParseException, PhoneNumberFormat
from phonenumbers.phonemetadata import PhoneMetadata

# What the database's check constraint accepts (campaigns.Contact.phone).
E164_RE = re.compile(r"^\+[1-9][0-9]{6,14}$")

MISSING_PHONE = "missing phone"
INVALID_PHONE = "invalid phone number"
NOT_POSSIBLE = "not a possible number"
NOT_VALID = "not a valid number"
LETTERS = "letters in the phone number: fix the typo (letters are never read as digits)"


class PhoneNormaliser:
    """Raw text → E.164 with ``phonenumbers``, or the reason it cannot be.

    Numbers without a leading ``+`` are read as national numbers of ``region``; when that
    fails (or no region was given) and the text is all digits, it is read once more as an
    international number without its ``+`` ("5511999990000").

    ``phonenumbers.parse`` costs ~20 µs, most of an import's CPU. Plain input (``+`` or
    national digits with common separators) takes a shortcut that builds the number from
    the digits and asks only ``is_valid_number`` (~5 µs). The shortcut answers only when it
    can be sure ``parse`` would give the same number; otherwise ``parse`` decides.
    """

    def __init__(self, region: str | None) -> None:
        self.region = region.upper() if region else None
        self.country_code = (
            phonenumbers.country_code_for_region(self.region) if self.region else 0
        ) or None

    def __call__(self, raw: str) -> tuple[str, None] | tuple[None, str]:
        # A leading ' is a spreadsheet's "this is text" mark (the rejects file adds it to
        # a cell starting with +): never part of a number.
        text = raw.strip().removeprefix("'").strip()
        if not text:
            return None, MISSING_PHONE
        # phonenumbers reads letters as a keypad's digits ("9ABCD" -> "92223"): a typo would
        # become a stranger's number. No letter is ever part of a number here.
        if any(ch.isalpha() for ch in text):
            return None, LETTERS if any(ch.isdigit() for ch in text) else INVALID_PHONE
        fast = self._fast(text)
        if fast is not None:
            return fast, None
        parsed, reason = self._parse(text, self.region)
        if parsed is None and not text.startswith("+") and _digits_only(text):
            retry, _ = self._parse("+" + text.lstrip("0"), None)
            if retry is not None:
                parsed, reason = retry, None
        if parsed is None:
            return None, reason or INVALID_PHONE
        e164 = phonenumbers.format_number(parsed, PhoneNumberFormat.E164)
        if not E164_RE.match(e164):
            return None, NOT_VALID
        return e164, None

    def _fast(self, text: str) -> str | None:
        compact = text.translate(_SEPARATORS)
        if compact.startswith("+"):
            digits = compact[1:]
            if not (digits.isascii() and digits.isdigit()):
                return None
            country_code, national = _split_country_code(digits)
        elif self.country_code and compact.isascii() and compact.isdigit():
            country_code, national = self.country_code, compact
        else:
            return None
        # A leading 0 is a national or international prefix, or an Italian-style leading
        # zero that phonenumbers keeps apart from the integer: all for ``parse``.
        if not country_code or not national or national[0] == "0":
            return None
        strip_prefix = _national_prefix_pattern(country_code)
        if strip_prefix is not None and strip_prefix.match(national):
            return None  # ``parse`` would strip or rewrite a national prefix here
        number = phonenumbers.PhoneNumber(country_code=country_code, national_number=int(national))
        if not phonenumbers.is_valid_number(number):
            return None  # ``parse`` gives the reason
        e164 = f"+{country_code}{national}"
        return e164 if E164_RE.match(e164) else None

    @staticmethod
    def _parse(text: str, region: str | None) -> tuple[Any, str | None]:
        try:
            parsed = phonenumbers.parse(text, region)
        except NumberParseException:
            return None, INVALID_PHONE
        if phonenumbers.is_valid_number(parsed):
            return parsed, None
        if not phonenumbers.is_possible_number(parsed):
            return None, NOT_POSSIBLE
        return None, NOT_VALID


# Separators people type in phone numbers; anything else (letters, "ext.") goes to ``parse``.
_SEPARATORS = str.maketrans("", "", " -()./\u00a0")


def _split_country_code(digits: str) -> tuple[int | None, str]:
    # Country calling codes are prefix-free, 1 to 3 digits long, and never start with 0.
    if digits.startswith("0"):
        return None, digits
    for length in (1, 2, 3):
        code = int(digits[:length] or 0)
        if code in phonenumbers.COUNTRY_CODE_TO_REGION_CODE:
            return code, digits[length:]
    return None, digits


@functools.cache
def _national_prefix_pattern(country_code: int) -> re.Pattern[str] | None:
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(country_code, ())
    metadata = PhoneMetadata.metadata_for_region_or_calling_code(
        country_code, regions[0] if regions else ""
    )
    pattern = metadata.national_prefix_for_parsing if metadata is not None else None
    return re.compile(pattern) if pattern else None


def _digits_only(text: str) -> bool:
    return bool(text) and all(ch.isdigit() or ch in " ()-./" for ch in text)
