"""A campaign report's engagement and A/B test sections, in the words every page uses.

- **Clicks** on the campaign's tracked links (``delivery.engagement.clicks``): people's
  taps, the people who tapped (one recipient, one message) and, apart, the link-preview
  fetches of machines; the click rate is the people who clicked of those delivered.
- **Button taps** per quick reply (``delivery.engagement.buttons``).
- **Conversions and money** (``delivery.engagement.roi``): attributed conversions, revenue,
  revenue per message, cost, return on spend, and the lift against the holdout with its
  95 % interval.
- **Meta says**: Meta's own daily counts of the campaign's templates
  (``delivery.graph_reads.campaign_template_analytics``) beside ours, or why they are not
  available.
- **A/B test** (``delivery.campaigns.ab_tests.ab_summary``): each arm's sends, successes,
  rate with its interval, probability to be the best, and difference from A.

Every figure is text here, written once: counts with thousands separators, shares as
``percent_of`` writes them (never 100 % unless everyone, never 0 % unless nobody),
differences in percentage points, amounts as the cost is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format

from campaigns.models import AbMetric, AbState, Campaign
from delivery.campaigns.ab_tests import AbSummary, ArmResult, ab_summary
from delivery.campaigns.pricing import CostLine, money_text
from delivery.engagement.buttons import (
    ButtonTaps,
    campaign_button_taps,
    template_marketing_clicks,
)
from delivery.engagement.clicks import ClickCounts, campaign_clicks
from delivery.engagement.roi import CampaignRoi, Lift, campaign_roi
from delivery.graph_reads import CampaignTemplateAnalytics, campaign_template_analytics
from whatsblast.core.proportions import Comparison
from whatsblast.figures import percent_of

# Meta counts a button's clicks by type; these are the ones set beside ours.
URL_CLICKS = "url_button"  # every tap on a URL button
UNIQUE_URL_CLICKS = "unique_url_button"  # the WhatsApp accounts that tapped one
QUICK_REPLY_CLICKS = "quick_reply_button"
META_CLICK_TYPES = (URL_CLICKS, UNIQUE_URL_CLICKS, QUICK_REPLY_CLICKS)
# States in which the marketer may still choose the winner.
PICKABLE = (AbState.TESTING, AbState.WAITING_PICK)
# What a success is called, per metric: the A/B table's column.
SUCCESS_LABELS = {
    AbMetric.READ: "Read",
    AbMetric.CLICK: "Clicked",
    AbMetric.REPLY: "Replied",
    AbMetric.CONVERSION: "Converted",
}


# --- figures as text ---------------------------------------------------------------------


def count_text(count: int) -> str:
    return f"{count:,}"


def share_text(part: int, whole: int) -> str:
    """``part`` of ``whole`` as "12.3 %"; "-" when there is no whole."""
    percent = percent_of(part, whole)
    return "-" if percent is None else f"{percent} %"


def rate_text(rate: float) -> str:
    """A rate (0-1) read off an interval or a model: "12.3 %"."""
    return f"{_one_decimal(rate * 100)} %"


def points_text(difference: float) -> str:
    """A difference of two rates in percentage points, signed: "+2.1 points"."""
    value = _one_decimal(difference * 100)
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return f"{sign}{abs(value)} points"


def interval_text(low: float, high: float, *, points: bool = False) -> str:
    """A 95 % interval: "95 %: 10.1 % to 14.6 %", or in points for a difference."""
    if points:
        return f"95 %: {points_text(low)} to {points_text(high)}"
    return f"95 %: {rate_text(low)} to {rate_text(high)}"


def p_text(p_value: float | None) -> str:
    """ "p = 0.03", "p < 0.001", or "-" when there was nothing to test."""
    if p_value is None:
        return "-"
    if p_value < 0.001:
        return "p < 0.001"
    return f"p = {p_value:.3f}" if p_value < 0.01 else f"p = {p_value:.2f}"


def _one_decimal(value: float) -> float:
    rounded = round(value, 1)
    return 0.0 if rounded == 0 else rounded  # never "-0.0"


def relative_text(lift: float | None) -> str:
    """A relative lift: "+25 % relative", or "" when there is no baseline."""
    if lift is None:
        return ""
    percent = round(lift * 100)
    return f"{'+' if percent > 0 else '−' if percent < 0 else '±'}{abs(percent)} % relative"


def comparison_text(comparison: Comparison) -> dict[str, str]:
    """A difference as the report writes it: the points, the interval, the test."""
    return {
        "difference": points_text(comparison.difference),
        "interval": interval_text(comparison.interval.low, comparison.interval.high, points=True),
        "p_value": p_text(comparison.p_value),
        "relative": relative_text(comparison.relative_lift),
        "verdict": "a real difference (95 %)"
        if comparison.significant
        else "could be chance (95 %)",
    }


def when_text(moment: Any) -> str:
    return date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT") if moment else "-"


# --- clicks, taps, money ---------------------------------------------------------------------


@dataclass(frozen=True)
class Clicks:
    counts: ClickCounts
    delivered: int

    @property
    def rate(self) -> str:
        return share_text(self.counts.unique, self.delivered)


def _money(amount: Decimal | None, currency: str) -> str:
    if amount is None:
        return "-"
    return money_text(amount, currency)


def roi_rows(roi: CampaignRoi, *, attribution_days: int) -> list[dict[str, str]]:
    """Conversions and money, one (label, figure, note) row each."""
    currency = roi.currency
    revenue = money_text(roi.revenue, currency) if currency or roi.revenue else "-"
    if roi.return_on_spend is not None:
        return_on_spend = f"{roi.return_on_spend:,.2f}× the cost"
        return_note = "Revenue ÷ cost."
    else:
        return_on_spend = "not known"
        return_note = "Nothing was charged." if roi.cost_known else "The cost is not known in full."
    return [
        {
            "key": "conversions",
            "label": "Conversions",
            "text": count_text(roi.conversions),
            "note": f"Within {attribution_days} days of a delivered or clicked message.",
        },
        {"key": "revenue", "label": "Revenue", "text": revenue, "note": ""},
        {
            "key": "revenue_per_message",
            "label": "Revenue per message",
            "text": _money(roi.revenue_per_message, currency),
            "note": f"Revenue ÷ {count_text(roi.messages_sent)} messages sent.",
        },
        {"key": "cost", "label": "Cost", "text": roi.cost.text, "note": ""},
        {
            "key": "return_on_spend",
            "label": "Return on spend",
            "text": return_on_spend,
            "note": return_note,
        },
    ]


def lift_view(lift: Lift | None) -> dict[str, Any] | None:
    """The holdout comparison: each arm's conversion rate, the difference and its interval."""
    if lift is None:
        return None
    view: dict[str, Any] = {
        "treated": f"{share_text(lift.treated_converted, lift.treated)} of "
        f"{count_text(lift.treated)} recipients",
        "control": f"{share_text(lift.control_converted, lift.control)} of "
        f"{count_text(lift.control)} recipients",
        "comparison": comparison_text(lift.comparison) if lift.comparison else None,
        "window": (
            f"Every conversion within {lift.window_days} days of the launch is in."
            if lift.complete
            else f"Conversions still count until {when_text(lift.window_closes_at)}."
        ),
    }
    return view


# --- Meta's counts beside ours ---------------------------------------------------------------


@dataclass(frozen=True)
class MetaRow:
    key: str
    label: str
    ours: str
    meta: str  # "" when Meta's counts are not available


def meta_rows(
    analytics: CampaignTemplateAnalytics,
    *,
    figures: dict[str, int],
    clicks: ClickCounts,
    taps: list[ButtonTaps],
) -> list[MetaRow]:
    available = not analytics.error
    sums = dict.fromkeys(("sent", "delivered", "read", *META_CLICK_TYPES), 0)
    for day in analytics.days:
        sums["sent"] += day.sent
        sums["delivered"] += day.delivered
        sums["read"] += day.read
        for clicked in day.clicked:
            if clicked.type in META_CLICK_TYPES:
                sums[clicked.type] += clicked.count
    ours = {
        "sent": figures.get("sent", 0),
        "delivered": figures.get("delivered", 0),
        "read": figures.get("read", 0),
        URL_CLICKS: clicks.total,
        UNIQUE_URL_CLICKS: clicks.unique,
        QUICK_REPLY_CLICKS: sum(t.taps for t in taps),
    }
    labels = {
        "sent": "Sent",
        "delivered": "Delivered",
        "read": "Read",
        URL_CLICKS: "Link clicks",
        UNIQUE_URL_CLICKS: "People who clicked",
        QUICK_REPLY_CLICKS: "Quick-reply taps",
    }
    return [
        MetaRow(key, label, count_text(ours[key]), count_text(sums[key]) if available else "")
        for key, label in labels.items()
    ]


def mm_clicks_text(campaign: Campaign) -> str:
    """The link clicks Meta's Marketing Messages API reported (``user_actions``) for the
    campaign's templates since its launch, in a sentence; '' for an account that does not
    send through it. Meta's click names no message or recipient, so it is counted per
    template (delivery.engagement.buttons.template_marketing_clicks), never per person."""
    if campaign.started_at is None or not campaign.template.account.marketing_messages_api:
        return ""
    ids = [campaign.template_id, *campaign.variants.values_list("template_id", flat=True)]
    counts = template_marketing_clicks(ids, campaign.started_at)
    ours = sum(n for template, n in counts.items() if template is not None)
    shared = counts.get(None, 0)
    text = (
        f"The Marketing Messages API reported {count_text(ours)} link "
        f"{'click' if ours == 1 else 'clicks'} for this campaign's templates since its launch"
    )
    if shared:
        text += (
            f", and {count_text(shared)} more that another template the number sent may have earned"
        )
    return text + ". Meta's click names no message or person: counted per template."


# --- the A/B test ----------------------------------------------------------------------------


def arm_view(arm: ArmResult, *, leader: int | None, winner: int | None) -> dict[str, Any]:
    low, high = arm.interval
    return {
        "position": arm.position,
        "label": arm.label,
        "template": arm.template,
        "sent": count_text(arm.sent),
        "successes": count_text(arm.successes),
        "rate": share_text(arm.successes, arm.sent),
        "interval": interval_text(low, high) if arm.sent else "",
        "probability_best": f"{round(arm.probability_best * 100)} %" if arm.sent else "-",
        "comparison": comparison_text(arm.comparison) if arm.comparison else None,
        "leader": arm.position == leader,
        "winner": arm.position == winner,
    }


def ab_sentence(summary: AbSummary, campaign: Campaign) -> str:
    """Where the test stands, in one sentence (the decision's own once decided)."""
    if summary.state == AbState.DECIDED and summary.decision:
        return summary.decision
    leader = next((a for a in summary.arms if a.position == summary.leader), None)
    leads = (
        f" Variant {leader.label} leads, {round(leader.probability_best * 100)} % likely to be "
        "the best."
        if leader is not None
        else ""
    )
    if summary.state == AbState.WAITING_PICK:
        return f"The test is done: pick the variant the rest is sent.{leads}"
    if summary.state == AbState.TESTING:
        how = (
            "sent to the rest automatically"
            if campaign.ab_auto_winner
            else "yours to pick (or pick one now)"
        )
        return (
            f"Testing: the winner is decided after {when_text(summary.decide_at)}, once each "
            f"variant has sent {count_text(campaign.ab_decide_min_sample)}, and is {how}.{leads}"
        )
    return "The test starts when the campaign is launched."


def ab_view(summary: AbSummary | None, campaign: Campaign, *, can_pick: bool) -> dict[str, Any]:
    if summary is None:
        return {}
    return {
        "metric": summary.metric_label,
        "successes": SUCCESS_LABELS.get(AbMetric(summary.metric), "Successes"),
        "state": AbState(summary.state).label if summary.state else "Not started",
        "sentence": ab_sentence(summary, campaign),
        "held": count_text(summary.held),
        "held_count": summary.held,
        "arms": [arm_view(a, leader=summary.leader, winner=summary.winner) for a in summary.arms],
        "can_pick": can_pick and summary.state in PICKABLE,
    }


# --- the report's context --------------------------------------------------------------------


def engagement_context(
    *,
    campaign: Campaign,
    figures: dict[str, int],
    costs: Sequence[CostLine] | None = None,
    can_pick: bool,
) -> dict[str, Any]:
    """The report's engagement and A/B test sections (``costs``: the campaign's priced
    messages, when the report read them already)."""
    clicks = campaign_clicks(campaign.pk)
    taps = campaign_button_taps(campaign.pk)
    roi = campaign_roi(campaign, costs=costs)
    analytics = campaign_template_analytics(campaign)
    return {
        "clicks": Clicks(clicks, figures.get("delivered", 0)),
        "clicks_text": {
            "total": count_text(clicks.total),
            "unique": count_text(clicks.unique),
            "previews": count_text(clicks.previews),
        },
        "taps": [
            {
                "text": t.text,
                "payload": t.payload,
                "taps": count_text(t.taps),
                "people": count_text(t.people),
            }
            for t in taps
        ],
        "roi": roi,
        "roi_rows": roi_rows(roi, attribution_days=int(campaign.attribution_days)),
        "roi_notes": roi.notes,
        "lift": lift_view(roi.lift),
        "meta_rows": meta_rows(analytics, figures=figures, clicks=clicks, taps=taps),
        "meta_error": analytics.error,
        "mm_clicks": mm_clicks_text(campaign),
        "ab": ab_view(ab_summary(campaign), campaign, can_pick=can_pick),
    }
