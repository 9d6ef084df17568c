"""What a campaign earned: attributed conversions and revenue, cost and return on spend,
and the lift measured against its holdout.

- **Conversions, revenue**: conversions attributed to the campaign's messages (delivered
  or clicked; ``delivery.engagement.conversions``), revenue by currency. Holdout
  conversions are control conversions: never revenue.
- **Main currency**: the currency most of its valued conversions are in (ties: the rate
  card's currency, then alphabetical); the report shows that one, and every currency in
  ``revenue_by_currency``. Amounts in different currencies are never added up.
- **Revenue per message**: main-currency revenue / messages sent (sent, delivered or read).
- **Cost**: ``delivery.campaigns.pricing`` (charged messages at the rate card).
- **Return on spend**: revenue / cost, None when the cost is 0 or not known in full: no
  rate card, charged messages the rate card does not price (the cost would be too low and
  the return too high), or a rate card in another currency than the revenue.
- **Lift**: treated = the recipients the campaign set out to send and tried (sent,
  delivered, read, failed or dead-lettered, or held back by the frequency cap: by intention
  to treat, as the holdout is drawn from the same eligible people, so leaving failures out
  would compare the reachable against everyone and overstate the lift), control = its
  holdout rows (skipped as holdout at launch). Rows not tried yet count in neither. A
  recipient converted when the contact reported any conversion within
  ``attribution_days`` of the launch (its row's ``created_at``, the same moment for both
  arms). Both arms are counted over the same
  calendar window and *whatever the conversion was attributed to*: attribution gives a
  holdout contact's conversion to another campaign's message that reached them, which
  would empty the control arm selectively and overstate the lift; what a holdout measures
  is whether being sent this campaign changed the rate. Difference (treated − control)
  with its 95 % interval from ``whatsblast.core.proportions.proportion_diff``, and
  relative lift.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from campaigns.models import Campaign
from delivery.campaigns.pricing import (
    CostLine,
    CostTotal,
    campaign_costs,
    cost_total,
    rate_card_currency,
)
from delivery.campaigns.skips import HOLDOUT
from delivery.campaigns.status_counts import campaigns_status_counts
from delivery.engagement.conversions import CLICKED, DELIVERED, HOLDOUT_ATTRIBUTION
from delivery.engine.frequency_cap import CAPPED
from delivery.models import MessageStatus as S
from whatsblast.core.proportions import Comparison, proportion_diff

SENT_STATUSES = (S.SENT, S.DELIVERED, S.READ)
PLACES = Decimal("0.0001")
_ATTRIBUTED = f"('{DELIVERED}', '{CLICKED}')"


@dataclass(frozen=True)
class Lift:
    treated: int  # recipients the campaign tried to send (see the module's docstring)
    treated_converted: int
    control: int  # holdout rows
    control_converted: int
    comparison: Comparison | None  # a = control, b = treated; None when an arm is empty
    window_days: int
    window_closes_at: datetime | None  # the launch + window_days (the last row's)
    complete: bool  # the window has closed: no later conversion can change the figures

    @property
    def treated_rate(self) -> float | None:
        return self.treated_converted / self.treated if self.treated else None

    @property
    def control_rate(self) -> float | None:
        return self.control_converted / self.control if self.control else None


@dataclass(frozen=True)
class CampaignRoi:
    campaign_id: int
    event: str | None  # only this event's conversions, or every event
    currency: str  # the main currency ('' when nothing has a value and no rate card)
    conversions: int  # attributed (delivered or clicked), every currency and none
    revenue: Decimal  # attributed, in ``currency``
    revenue_by_currency: dict[str, Decimal]
    conversions_by_currency: dict[str, int]  # '' for conversions without a value
    holdout_conversions: int  # attributed to the holdout (control), never revenue
    messages_sent: int
    revenue_per_message: Decimal | None  # None when nothing was sent
    cost: CostTotal
    cost_known: bool  # a rate card, every charged message priced, in ``currency``
    return_on_spend: Decimal | None  # revenue / cost; None when cost is 0 or not known
    lift: Lift | None  # None when the campaign has no holdout
    notes: list[str] = field(default_factory=list)


_REVENUE_SQL = f"""
SELECT currency,
       count(*) FILTER (WHERE attributed_by IN {_ATTRIBUTED}),
       sum(value) FILTER (WHERE attributed_by IN {_ATTRIBUTED}),
       count(*) FILTER (WHERE attributed_by = '{HOLDOUT_ATTRIBUTION}'),
       count(value) FILTER (WHERE attributed_by IN {_ATTRIBUTED})
  FROM delivery_conversion
 WHERE campaign_id = %(campaign_id)s AND (%(event)s::text IS NULL OR event = %(event)s)
 GROUP BY currency
"""  # noqa: S608 - constants only

# Both arms over the same window from the launch; conversions found by the contact's
# index (conversion_contact_idx: contact, occurred_at), one probe per recipient. The arms
# are read through message_campaign_status_idx (campaign, send_status): send_status folds
# delivered and read into sent.
_LIFT_SQL = f"""
SELECT m.skip_reason <> %(holdout)s AS treated,
       count(*),
       count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM delivery_conversion AS v
            WHERE v.contact_id = m.contact_id
              AND v.occurred_at >= m.created_at
              AND v.occurred_at < m.created_at + %(days)s * interval '1 day'
              AND (%(event)s::text IS NULL OR v.event = %(event)s))),
       max(m.created_at)
  FROM delivery_message AS m
 WHERE m.campaign_id = %(campaign_id)s
   AND (m.send_status IN ('{S.SENT}', '{S.FAILED}', '{S.DEAD}')
        OR (m.send_status = '{S.SKIPPED}'
            AND (m.skip_reason = %(holdout)s OR m.skip_reason LIKE %(capped)s)))
 GROUP BY 1
"""  # noqa: S608 - constants only


def campaign_roi(
    campaign: Campaign, *, event: str | None = None, costs: Sequence[CostLine] | None = None
) -> CampaignRoi:
    """The campaign's conversions, revenue, cost, return on spend and lift.

    Reads the campaign's conversions (indexed), its status counters, every priced message
    (``pricing.campaign_costs``, unless the caller read them already: ``costs``) and, with
    a holdout, one index probe per recipient.
    """
    with connection.cursor() as cursor:
        cursor.execute(_REVENUE_SQL, {"campaign_id": campaign.pk, "event": event})
        rows = cursor.fetchall()
    conversions_by_currency: dict[str, int] = {}
    valued: dict[str, int] = {}
    revenue_by_currency: dict[str, Decimal] = {}
    holdout = 0
    for currency, count, revenue, holdout_count, valued_count in rows:
        holdout += int(holdout_count)
        if count:
            conversions_by_currency[currency] = int(count)
        if revenue is not None:
            revenue_by_currency[currency] = Decimal(revenue)
            valued[currency] = int(valued_count)
    card_currency = rate_card_currency()
    lines = list(costs) if costs is not None else campaign_costs(campaign=campaign)
    cost = cost_total(lines, card_currency=card_currency)
    currency = main_currency(valued, preferred=cost.currency or card_currency)
    revenue = revenue_by_currency.get(currency, Decimal(0))
    counts = campaigns_status_counts(campaign_ids=[campaign.pk])[campaign.pk]
    messages_sent = sum(counts.get(status, 0) for status in SENT_STATUSES)
    notes: list[str] = []
    cost_known = bool(card_currency) and cost.unpriced == 0
    if not card_currency:
        notes.append("No rate card loaded: the cost is not known.")
    elif cost.unpriced:
        notes.append(f"{cost.unpriced:,} charged messages are not on the rate card.")
    if cost_known and cost.charged and currency and (cost.currency or card_currency) != currency:
        cost_known = False
        notes.append(f"The cost is in {cost.currency or card_currency}, the revenue in {currency}.")
    if len(revenue_by_currency) > 1:
        others = ", ".join(sorted(set(revenue_by_currency) - {currency}))
        notes.append(f"Revenue in {others} is not converted into {currency}.")
    return_on_spend = (
        (revenue / cost.cost).quantize(PLACES) if cost_known and cost.cost > 0 else None
    )
    return CampaignRoi(
        campaign_id=campaign.pk,
        event=event,
        currency=currency,
        conversions=sum(conversions_by_currency.values()),
        revenue=revenue,
        revenue_by_currency=revenue_by_currency,
        conversions_by_currency=conversions_by_currency,
        holdout_conversions=holdout,
        messages_sent=messages_sent,
        revenue_per_message=(revenue / messages_sent).quantize(PLACES) if messages_sent else None,
        cost=cost,
        cost_known=cost_known,
        return_on_spend=return_on_spend,
        lift=campaign_lift(campaign, event=event),
        notes=notes,
    )


def main_currency(valued: dict[str, int], *, preferred: str = "") -> str:
    """The currency of the most valued conversions; ties go to ``preferred`` (the rate
    card's), then alphabetical. ``preferred`` when nothing has a value."""
    candidates = {c: n for c, n in valued.items() if c}
    if not candidates:
        return preferred
    return min(candidates, key=lambda c: (-candidates[c], c != preferred, c))


def campaign_lift(
    campaign: Campaign, *, event: str | None = None, confidence: float = 0.95
) -> Lift | None:
    """Treated (tried) against control (holdout), each converting within the window from
    the launch; None when the campaign has no holdout row."""
    days = int(campaign.attribution_days)
    with connection.cursor() as cursor:
        cursor.execute(
            _LIFT_SQL,
            {
                "campaign_id": campaign.pk,
                "days": days,
                "event": event,
                "holdout": HOLDOUT,
                "capped": f"{CAPPED}:%",
            },
        )
        arms = {
            bool(treated): (int(n), int(converted), last) for treated, n, converted, last in cursor
        }
    if False not in arms:
        return None
    treated, treated_converted, treated_last = arms.get(True, (0, 0, None))
    control, control_converted, control_last = arms[False]
    last = max(t for t in (treated_last, control_last) if t is not None)
    closes_at = last + timedelta(days=days)
    comparison = (
        proportion_diff(control_converted, control, treated_converted, treated, confidence)
        if treated and control
        else None
    )
    return Lift(
        treated=treated,
        treated_converted=treated_converted,
        control=control,
        control_converted=control_converted,
        comparison=comparison,
        window_days=days,
        window_closes_at=closes_at,
        complete=timezone.now() >= closes_at,
    )


_BY_VARIANT_SQL = f"""
SELECT m.variant, count(*),
       sum(v.value) FILTER (WHERE v.currency = %(currency)s)
  FROM delivery_conversion AS v
  JOIN delivery_message AS m ON m.id = v.message_id
 WHERE v.campaign_id = %(campaign_id)s AND v.attributed_by IN {_ATTRIBUTED}
 GROUP BY m.variant
"""  # noqa: S608 - constants only


def campaign_conversions_by_variant(
    campaign_id: int, *, currency: str | None = None
) -> dict[int | None, tuple[int, Decimal]]:
    """{A/B variant (``Message.variant``; None outside a test): (attributed conversions,
    their revenue in ``currency``)}. ``currency`` defaults to the campaign's main
    currency; conversions are counted whatever their currency."""
    if currency is None:
        currency = _campaign_main_currency(campaign_id)
    with connection.cursor() as cursor:
        cursor.execute(_BY_VARIANT_SQL, {"campaign_id": campaign_id, "currency": currency})
        return {variant: (int(count), Decimal(revenue or 0)) for variant, count, revenue in cursor}


def _campaign_main_currency(campaign_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT currency, count(value) FROM delivery_conversion
             WHERE campaign_id = %s AND attributed_by IN {_ATTRIBUTED} AND value IS NOT NULL
             GROUP BY currency
            """,  # noqa: S608 - constants only
            [campaign_id],
        )
        valued = {currency: int(n) for currency, n in cursor}
    return main_currency(valued, preferred=rate_card_currency())


def message_conversion_counts(
    message_ids: Iterable[int], *, currency: str | None = None
) -> dict[int, tuple[int, Decimal]]:
    """{message id: (conversions attributed to it, their value)} for the messages that
    have any (an export's columns). The value adds up ``currency`` only when given, else
    every value (an export of one campaign, whose conversions share a currency)."""
    ids = list(message_ids)
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT message_id, count(*),
                   sum(value) FILTER (WHERE %(currency)s::text IS NULL
                                         OR currency = %(currency)s)
              FROM delivery_conversion
             WHERE message_id = ANY(%(ids)s) AND attributed_by IN {_ATTRIBUTED}
             GROUP BY message_id
            """,  # noqa: S608 - constants only
            {"ids": ids, "currency": currency},
        )
        return {int(pk): (int(n), Decimal(total or 0)) for pk, n, total in cursor}
