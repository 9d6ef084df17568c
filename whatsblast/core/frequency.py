"""A frequency cap as people write it: ``"2/7d"`` is at most 2 in any rolling 7 days.

The policy's text form is shared by the setting ``MARKETING_FREQUENCY_CAP``, a campaign's
override and the CLI's ``--frequency-cap``; where it is enforced is
``delivery.engine.frequency_cap``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

OFF = "off"
_CAP = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*([dh])\s*$", re.IGNORECASE)
# A window past a year is a typo, not a policy.
MAX_WINDOW = timedelta(days=366)


@dataclass(frozen=True)
class FrequencyCap:
    limit: int  # at most this many …
    window: timedelta  # … in any rolling window this long

    def __str__(self) -> str:
        """ "1 marketing message per 7 days", "2 marketing messages per 12 hours"."""
        hours = int(self.window.total_seconds() // 3600)
        count, unit = (hours // 24, "day") if hours % 24 == 0 else (hours, "hour")
        span = unit if count == 1 else f"{count} {unit}s"
        messages = "message" if self.limit == 1 else "messages"
        return f"{self.limit} marketing {messages} per {span}"

    @property
    def text(self) -> str:
        """The policy written back as it is typed ("1/7d")."""
        hours = int(self.window.total_seconds() // 3600)
        return f"{self.limit}/{hours // 24}d" if hours % 24 == 0 else f"{self.limit}/{hours}h"


def frequency_cap_parse(text: str) -> FrequencyCap | None:
    """``"N/Dd"`` or ``"N/Hh"`` → the cap; ``""`` or ``"off"`` → ``None``; else ``ValueError``
    saying what is expected."""
    if not text.strip() or text.strip().lower() == OFF:
        return None
    match = _CAP.match(text)
    if match is None:
        raise ValueError(
            f"frequency cap {text!r}: write it as N/Dd or N/Hh, e.g. 2/7d (at most 2 "
            "marketing messages per contact in any 7 days), or off"
        )
    limit, span, unit = int(match[1]), int(match[2]), match[3].lower()
    window = timedelta(days=span) if unit == "d" else timedelta(hours=span)
    if limit < 1 or span < 1:
        raise ValueError(f"frequency cap {text!r}: the count and the span are at least 1")
    if window > MAX_WINDOW:
        raise ValueError(f"frequency cap {text!r}: the window is at most 366 days")
    return FrequencyCap(limit, window)
