"""A phone number as a person says it → the E.164 forms to look it up by, exactly.

Support hears "(11) 98765-4321", "+55 11 98765-4321" or "0055 11 98765 4321"; contacts,
messages, replies and dead letters store "+5511987654321". Every admin search by phone asks
``phone_search_candidates`` for the forms a typed term may mean and matches them exactly
(``= ANY``), so each lookup goes through the phone's index, never a ``LIKE`` scan.

A number typed without its country code is read as a national number of each **default
country**: the countries chosen as "Default country" of contact uploads (how the business
says which country its bare numbers are in) and the countries of the business's own
WhatsApp numbers. A term with a letter in it is not a phone (a name, a wamid, a user id).
"""

from __future__ import annotations

from collections.abc import Iterable

from campaigns.audience.phones import E164_RE, PhoneNormaliser
from campaigns.audience.regions import phone_region
from campaigns.models import ContactUpload, PhoneNumber

# Fewer digits than this is a fragment of a number, not one (E.164 has at least 7).
MIN_DIGITS = 6
# What people put between digits; anything else (a letter, "@", "#") is not a phone.
_PHONE_CHARACTERS = frozenset("0123456789 +-()./\u00a0")


def phone_search_candidates(term: str, *, regions: Iterable[str] | None = None) -> list[str]:
    """The E.164 numbers ``term`` may mean, most likely first; ``[]`` when it is no phone.

    - "+55 11 98765-4321" and "0055 11 98765 4321": the international number as written;
    - "(11) 98765-4321": a national number of each default country (``regions``, or
      ``search_regions()`` when not given) where it is a valid number;
    - "5511987654321": also the international number without its "+";
    - digits as typed with a "+" in front, so that a stored number ``phonenumbers`` would
      not call valid (a test number, a new range) is still found exactly.
    """
    text = term.strip().removeprefix("'").strip()
    digits = "".join(ch for ch in text if ch.isdigit())
    if len(digits) < MIN_DIGITS or not set(text) <= _PHONE_CHARACTERS:
        return []
    compact = "".join(ch for ch in text if ch.isdigit() or ch == "+")
    if "+" in compact[1:]:  # a "+" anywhere but first
        return []
    candidates: list[str] = []
    if compact.startswith(("+", "00")):
        international = "+" + compact.removeprefix("+").removeprefix("00")
        _add(candidates, PhoneNormaliser(None)(international)[0])
        _add(candidates, international)
        return candidates
    for region in search_regions() if regions is None else regions:
        _add(candidates, PhoneNormaliser(region)(text)[0])
    _add(candidates, PhoneNormaliser(None)("+" + digits)[0])
    _add(candidates, "+" + digits)
    return candidates


def search_regions() -> list[str]:
    """The default countries national numbers are read in: the uploads' chosen countries,
    then those of the business's own numbers. Two small queries (uploads and business
    numbers are tens of rows, not millions)."""
    regions: list[str] = list(
        ContactUpload.objects.exclude(region="")
        .values_list("region", flat=True)
        .order_by()
        .distinct()
    )
    for display in PhoneNumber.objects.values_list("display_phone_number", flat=True):
        e164 = PhoneNormaliser(None)(display)[0]
        region = phone_region(e164) if e164 else None
        if region and region not in regions:
            regions.append(region)
    return regions


def _add(candidates: list[str], phone: str | None) -> None:
    if phone and E164_RE.match(phone) and phone not in candidates:
        candidates.append(phone)
