"""Values a template send carries that are written one way by people and another by Meta.

A limited-time offer's expiry is typed as a date and time and sent as Unix milliseconds;
a multi-product message's products are typed as SKUs separated by commas and sent as a
list. The mapping checks them (campaigns.catalogue.params), the launch stores them as
typed, and the send (delivery.cloud.client) converts them, each with these functions.
"""

from __future__ import annotations

from datetime import UTC, datetime

# Unix milliseconds have 13 digits until the year 2286; 10 digits are seconds.
_MIN_MS_DIGITS = 12


def offer_expiry_ms(value: str) -> int | None:
    """A limited-time offer's expiry as Unix milliseconds (what Meta's send takes).

    Accepts Unix milliseconds ("1767225540000") or an ISO 8601 date and time; a time
    without a zone is read as UTC. None when the text is neither (seconds included: a
    10-digit number would be read by Meta as a moment in January 1970).
    """
    text = value.strip()
    if text.isdigit():
        return int(text) if len(text) >= _MIN_MS_DIGITS else None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def sku_list(text: str) -> list[str]:
    """SKUs written one after another, separated by commas (blanks dropped)."""
    return [sku.strip() for sku in text.split(",") if sku.strip()]
