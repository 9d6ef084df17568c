"""Meta's pause of marketing templates to US users, as the simulator plays it.

Since 2025-04-01 Meta does not deliver marketing templates to users with a US number, "+1
and a US area code", nor to user ids issued for one (prefix ``US.``). The send is accepted
(200 with a wamid) and then fails by status webhook with 131049, the per-user marketing
limit code Meta reuses for it (Meta's "Per-user marketing template message limits" page;
Twilio's error 63049 and other providers' notes quote the same; ``shared/meta-2026.md`` §5).
Canada and the Caribbean share +1 with other area codes and are delivered.

The simulator decides the region with ``phonenumbers`` itself (it imports nothing of the
project), so a campaign engine that sent a US number by mistake sees what Meta would do.
"""

from __future__ import annotations

import functools

import phonenumbers

US_MARKETING_PAUSE_CODE = 131049


@functools.lru_cache(maxsize=65536)
def is_us_user(recipient: str) -> bool:
    """A US phone (+1 and a US area code) or a user id issued for one."""
    if recipient.startswith("US."):
        return True
    digits = recipient.removeprefix("+")
    if not digits.startswith("1") or not digits.isdigit():
        return False
    try:
        number = phonenumbers.parse("+" + digits)
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.region_code_for_number(number) == "US"


def us_marketing_failure(recipient: str, category: str) -> int | None:
    """The code a marketing template to ``recipient`` fails with later, or None."""
    if category.upper() == "MARKETING" and is_us_user(recipient):
        return US_MARKETING_PAUSE_CODE
    return None
