"""A campaign's figures in the one vocabulary every page uses.

Message outcomes come from ``delivery.campaigns.progress`` (``OUTCOMES``: each word a set
of statuses, cumulative like a funnel); replies and opt-outs from ``webhooks.selectors``.
The campaign list, the live page, the report, the Messages filter and the CSV export all
read them from here, so "delivered" means the same thing on each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from delivery.campaigns.progress import OUTCOME_LABELS, outcome_counts
from delivery.campaigns.status_counts import campaigns_status_counts
from delivery.engagement.columns import export_engagement_columns
from webhooks.selectors import (
    campaign_replier_counts,
    message_opted_out_expression,
    message_replies_expression,
)

REPLY_LABELS: dict[str, tuple[str, str]] = {
    "replies": ("Replied", "Recipients who wrote back, each counted once."),
    "opt_outs": ("Opted out", "Recipients who asked to stop marketing messages in a reply."),
}

# The order figures are shown in, everywhere.
FIGURE_ORDER = (
    "audience",
    "sent",
    "delivered",
    "read",
    "failed",
    "replies",
    "opt_outs",
    "to_send",
    "skipped",
    "cancelled",
)
LABELS: dict[str, tuple[str, str]] = {**OUTCOME_LABELS, **REPLY_LABELS}


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    help: str
    count: int
    # Share of the stage before: delivered of sent, read of delivered, failed of audience.
    percent: float | None

    @property
    def text(self) -> str:
        return f"{self.count:,}"

    @property
    def outcome_query(self) -> str:
        """The Messages filter that lists these messages (after the campaign's filter)."""
        value = {"audience": "", "replies": "replied", "opt_outs": "opted_out"}.get(
            self.key, self.key
        )
        return f"&outcome={value}" if value else ""


def campaigns_figures(*, campaign_ids: list[int]) -> dict[int, dict[str, int]]:
    """{campaign id: {figure: count}} for several campaigns: two grouped queries, the
    message counts from the maintained counters (never over the messages themselves)."""
    statuses = campaigns_status_counts(campaign_ids=campaign_ids)
    replies = campaign_replier_counts(campaign_ids=campaign_ids)
    result: dict[int, dict[str, int]] = {}
    for pk in campaign_ids:
        figures = outcome_counts(counts=statuses.get(pk, {}))
        reply = replies.get(pk, {})
        figures["replies"] = reply.get("replied", 0)
        figures["opt_outs"] = reply.get("opted_out", 0)
        result[pk] = figures
    return result


def duration_text(span: timedelta) -> str:
    """A duration as people say it: "29 s", "3 min 05 s", "1 h 04 min", "2 d 03 h"."""
    seconds = max(0, round(span.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours:02d} h"


def percent_of(part: int, whole: int, *, digits: int = 1) -> float | None:
    """``part`` as a percentage of ``whole``, rounded to ``digits``, for every page: never
    100 unless every one is, never 0 unless none is (99.96 % reads 99.9 %, not 100 %;
    0.02 % reads 0.1 %). None when there is no whole."""
    if whole <= 0:
        return None
    step = 10.0**-digits
    value = round(100 * part / whole, digits)
    if part < whole and value >= 100:
        value = round(100 - step, digits)
    elif part > 0 and value <= 0:
        value = step if digits else 1.0
    return int(value) if digits == 0 else value


_BASE = {"sent": "audience", "delivered": "sent", "read": "delivered", "failed": "audience"}


def figure_rows(figures: dict[str, int], *, keep_zero: bool = False) -> list[Figure]:
    """The figures in their order, labelled; zero ones of the tail left out unless asked."""
    rows = []
    for key in FIGURE_ORDER:
        count = figures.get(key, 0)
        if not count and not keep_zero and key in ("to_send", "skipped", "cancelled"):
            continue
        base = figures.get(_BASE.get(key, ""), 0)
        percent = percent_of(count, base) if key in _BASE else None
        label, help_text = LABELS[key]
        rows.append(Figure(key, label, help_text, count, percent))
    return rows


def campaign_figures(*, campaign_id: int, status_counts: dict[str, int]) -> dict[str, int]:
    """One campaign's figures from per-status counts already read (the live page)."""
    reply = campaign_replier_counts(campaign_ids=[campaign_id]).get(campaign_id, {})
    return {
        **outcome_counts(counts=status_counts),
        "replies": reply.get("replied", 0),
        "opt_outs": reply.get("opted_out", 0),
    }


def figures_as_dicts(figures: dict[str, int]) -> list[dict[str, Any]]:
    return [row.__dict__ for row in figure_rows(figures)]


def export_extra_columns() -> dict[str, Any]:
    """The export's columns other apps know of: each recipient's replies and opt-out, then
    their clicks and the conversions attributed to their message."""
    return {
        "replies": message_replies_expression(),
        "opted_out": message_opted_out_expression(),
        **export_engagement_columns(),
    }
