"""Which country a recipient is in, from its E.164 phone or its business-scoped user id.

``+1`` is not a country: it is the North American Numbering Plan, shared by the United
States, Canada and twenty Caribbean and Pacific regions, told apart only by the three-digit
area code. Meta's pause of marketing templates covers users with a **US** number, "+1 and
a US area code" (``shared/meta-2026.md`` §5; Meta's per-user marketing limits page), so
the area code decides: ``phonenumbers``' metadata names the region of each one.

A user id's prefix is the ISO 3166 country of the phone the user had when Meta issued it
(``US.13491208655302741918``, ``US.ENT.…`` for a parent id; Meta's "Business-scoped user
IDs" page), so a contact known only by its user id is placed by that prefix.

US territories with area codes of their own (Puerto Rico 787/939, Guam 671, the US Virgin
Islands 340, American Samoa 684, the Northern Mariana Islands 670) are regions of their own
in ``phonenumbers`` and are not "US numbers" here: Meta's rule names US area codes, and
those are not assigned to the US region. Toll-free codes (800, 888, …) are the US region's.
"""

from __future__ import annotations

import functools

import phonenumbers
from phonenumbers import geocoder
from phonenumbers.phonenumberutil import COUNTRY_CODE_TO_REGION_CODE

US = "US"
NANP_CALLING_CODE = 1
# Any valid subscriber part: phonenumbers decides a +1 number's region from its area code
# (other regions' leading-digit patterns, then the US patterns of valid area codes).
_SUBSCRIBER_PROBES = ("2345678", "3456789", "8675309")


@functools.cache
def nanp_area_regions() -> dict[str, str]:
    """``"+1416"`` → ``"CA"``: every area code ``phonenumbers`` places, by its region."""
    regions: dict[str, str] = {}
    for area in range(200, 1000):
        for probe in _SUBSCRIBER_PROBES:
            number = phonenumbers.parse(f"+1{area}{probe}")
            region = phonenumbers.region_code_for_number(number)
            if region:
                regions[f"+1{area}"] = region
                break
    return regions


@functools.cache
def us_area_prefixes() -> tuple[str, ...]:
    """The five-character prefixes (``"+1212"``) of every US area code, sorted."""
    return tuple(sorted(p for p, region in nanp_area_regions().items() if region == US))


def phone_region(phone: str) -> str | None:
    """The region of an E.164 phone: by area code under ``+1``, else by calling code.

    A calling code several regions share (``+7``, ``+44``) answers its main region; an
    unassigned area code or calling code answers None.
    """
    if not phone.startswith("+"):
        return None
    if phone.startswith("+1"):
        return nanp_area_regions().get(phone[:5])
    return calling_code_region(phone[:4])


def calling_code_region(prefix: str) -> str | None:
    """The main region of the calling code ``prefix`` starts with (``"+551"`` → ``"BR"``).

    Calling codes are prefix-free, so at most one of its first one to three digits is one.
    """
    digits = prefix.removeprefix("+")
    for length in (1, 2, 3):
        code = digits[:length]
        if len(code) == length and code.isdigit():
            regions = COUNTRY_CODE_TO_REGION_CODE.get(int(code))
            if regions and int(code) != NANP_CALLING_CODE:
                region = regions[0]
                return None if region == "001" else region  # 001: non-geographic
    return None


def user_id_region(user_id: str) -> str | None:
    """The country prefix of a business-scoped user id (``US.1349…`` → ``"US"``)."""
    prefix, dot, _ = user_id.partition(".")
    if dot and len(prefix) == 2 and prefix.isalpha() and prefix.isupper():
        return prefix
    return None


def recipient_region(recipient: str) -> str | None:
    """The region of a campaign recipient: an E.164 phone, or a user id when there is none."""
    return phone_region(recipient) if recipient.startswith("+") else user_id_region(recipient)


def is_us_recipient(recipient: str) -> bool:
    """Meta's US rule in Python: the same answer as ``delivery.campaigns.skips`` in SQL."""
    return recipient_region(recipient) == US


@functools.cache
def region_name(region: str) -> str:
    """``"CA"`` → ``"Canada"``; the code itself where phonenumbers has no example."""
    example = phonenumbers.example_number(region)
    if example is None:
        return region
    return geocoder.country_name_for_number(example, "en") or region


@functools.cache
def region_phone_prefixes(region: str) -> tuple[str, ...]:
    """The E.164 prefixes ``phone_region`` places in ``region``: its area codes under +1
    (``"CA"`` → ``"+1204"``, …), else each calling code whose main region it is (``"BR"`` →
    ``"+55"``). Empty for a region with neither."""
    nanp = tuple(sorted(p for p, r in nanp_area_regions().items() if r == region))
    codes = tuple(
        f"+{code}"
        for code, regions in sorted(COUNTRY_CODE_TO_REGION_CODE.items())
        if code != NANP_CALLING_CODE and regions and regions[0] == region
    )
    return nanp + codes
