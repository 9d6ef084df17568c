"""What a campaign cost, and what it will cost: per-message pricing and the rate card.

Since July 2025 Meta bills each delivered template message (``pricing_model: PMP``) by
its category and the recipient's country; ``pricing.type`` says whether it was charged
(``regular``) or free (``free_customer_service``, ``free_entry_point``). ``billable`` is
deprecated and read only for messages Meta priced before PMP. Prices come from the rate
card (``campaigns.RateCard``) the operator keeps: the longest matching country prefix,
else the ``*`` row; a message no row prices is counted as unpriced, never as free.

Every page, the campaign list and the export write an amount one way (``money_text``: four
decimals, as Meta's rates have, and the currency); with no rate card loaded they say so
(``NO_RATE_CARD``) instead of showing 0. The rate card is loaded from Meta's published file
by ``manage.py ratecard load`` (``delivery.campaigns.rate_cards``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import redis
from django.db import connection
from django.db.models import Max, Q
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, RateCard
from delivery.campaigns.audience import AudienceError, campaign_audience
from delivery.campaigns.languages import LanguageError
from delivery.campaigns.skips import SkipRules
from delivery.models import MessageStatus as S
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

CHARGED_TYPE = "regular"
# The one word for a message Meta bills (pricing.type "regular"), on every page.
CHARGED_LABEL = "Charged messages"
NO_RATE_CARD = "no rate card loaded"
# Meta's rates have four decimals (0.0625): every amount is written with four.
COST_PLACES = 4


def amount_text(amount: Decimal) -> str:
    """An amount's figure as every page writes it: "1,234.5625"."""
    return f"{amount:,.{COST_PLACES}f}"


def money_text(amount: Decimal, currency: str) -> str:
    """An amount as every page writes it: "1,234.5625 USD"."""
    return f"{amount_text(amount)} {currency}".rstrip()


def cost_text(*, cost: Decimal, currency: str, unpriced: int, card_currency: str) -> str:
    """A cost for a page: the amount, the charged messages no rate priced, or, with no rate
    card at all, ``NO_RATE_CARD`` (never a 0.00 that reads as free)."""
    if not card_currency:
        return NO_RATE_CARD
    text = money_text(cost, currency or card_currency)
    if unpriced:
        text += f" (+{unpriced:,} not on the rate card)"
    return text


def rate_card_currency() -> str:
    """The rate card's currency, '' when no rate card is loaded (one indexed aggregate)."""
    return str(RateCard.objects.aggregate(c=Max("currency"))["c"] or "")


# The price of one message (alias m) for its category: a lateral lookup, longest prefix first.
_PRICE_JOIN = """
LEFT JOIN LATERAL (
    SELECT r.price, r.currency FROM campaigns_ratecard AS r
     WHERE r.category = {category}
       AND (r.country_prefix = '*' OR m."to" LIKE r.country_prefix || '%%')
     ORDER BY (r.country_prefix = '*'), length(r.country_prefix) DESC
     LIMIT 1) AS rc ON true
"""


def _charged_sql(m: str) -> str:
    """True for a message Meta charged, over the message alias ``m``."""
    before_pmp = f"({m}.pricing_type = '' AND {m}.billable IS TRUE)"
    return f"({m}.pricing_type = '{CHARGED_TYPE}' OR {before_pmp})"


_CHARGED = _charged_sql("m")

_COSTS_SQL = f"""
SELECT m.pricing_category, m.pricing_type, count(*),
       count(*) FILTER (WHERE {_CHARGED}),
       sum(rc.price) FILTER (WHERE {_CHARGED}),
       count(*) FILTER (WHERE {_CHARGED} AND rc.price IS NULL),
       max(rc.currency)
  FROM delivery_message AS m
  {_PRICE_JOIN.format(category="m.pricing_category")}
 WHERE m.campaign_id = %s AND m.pricing_category <> ''
 GROUP BY 1, 2
 ORDER BY 1, 2
"""  # noqa: S608 - constants only

# The pre-flight: every message still to go (launched) or every sendable contact (a draft),
# priced at the template's category.
_ESTIMATE_PENDING_SQL = f"""
SELECT count(*), sum(rc.price), count(*) FILTER (WHERE rc.price IS NULL), max(rc.currency)
  FROM delivery_message AS m
  {_PRICE_JOIN.format(category="%(category)s")}
 WHERE m.campaign_id = %(campaign_id)s AND m.send_status = '{S.PENDING}'
"""  # noqa: S608 - constants only

# Only the contacts the launch will send to ({{sendable}}: delivery.campaigns.skips).
_ESTIMATE_DRAFT_SQL = f"""
SELECT count(*), sum(rc.price), count(*) FILTER (WHERE rc.price IS NULL), max(rc.currency)
  FROM (SELECT COALESCE(c.phone, c.user_id) AS "to" FROM campaigns_contact AS c
         WHERE {{sendable}}
           AND {{audience}}) AS m
  {_PRICE_JOIN.format(category="%(category)s")}
"""  # noqa: S608 - constants only


@dataclass(frozen=True, kw_only=True)
class PricedAmount:
    """An amount at the rate card, written one way on every page (``cost_text``)."""

    cost: Decimal
    unpriced: int
    currency: str
    card_currency: str = ""  # '' when no rate card is loaded

    @property
    def text(self) -> str:
        return cost_text(
            cost=self.cost,
            currency=self.currency,
            unpriced=self.unpriced,
            card_currency=self.card_currency,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "cost": f"{self.cost:.{COST_PLACES}f}",
            "unpriced": self.unpriced,
            "currency": self.currency,
            "text": self.text,
        }


@dataclass(frozen=True, kw_only=True)
class CostLine(PricedAmount):
    category: str
    type: str  # regular, free_customer_service, free_entry_point, "" (before PMP)
    messages: int
    charged: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "type": self.type or "(not reported)",
            "messages": self.messages,
            "charged": self.charged,
            **super().as_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class CostTotal(PricedAmount):
    """What a whole campaign cost: its charged messages and their price."""

    charged: int

    def as_dict(self) -> dict[str, Any]:
        return {"charged": self.charged, **super().as_dict()}


def cost_total(lines: Iterable[CostLine], *, card_currency: str) -> CostTotal:
    rows = list(lines)
    return CostTotal(
        charged=sum(line.charged for line in rows),
        cost=sum((line.cost for line in rows), Decimal(0)),
        unpriced=sum(line.unpriced for line in rows),
        currency=next((line.currency for line in rows if line.currency), ""),
        card_currency=card_currency,
    )


def campaign_costs(*, campaign: Campaign) -> list[CostLine]:
    """What the campaign's messages cost, by pricing category and type.

    Reads every priced message of the campaign (a million-message campaign takes a second
    or more), so the total is remembered for the campaign list (``campaigns_costs_known``):
    the live page, which reads this while anyone watches a campaign, and the report keep
    it fresh.
    """
    card_currency = rate_card_currency()
    with connection.cursor() as cursor:
        cursor.execute(_COSTS_SQL, [campaign.pk])
        rows = cursor.fetchall()
    lines = [
        CostLine(
            category=category,
            type=kind,
            messages=int(messages),
            charged=int(charged),
            cost=cost or Decimal(0),
            unpriced=int(unpriced),
            currency=currency or "",
            card_currency=card_currency,
        )
        for category, kind, messages, charged, cost, unpriced, currency in rows
    ]
    _cost_remember(campaign.pk, cost_total(lines, card_currency=card_currency))
    return lines


# The campaign list shows each campaign's last reckoned cost: one MGET for the page, never a
# read of the messages. A lost key reads as "not reckoned yet" until the next reckoning.
_COST_KEY = "wb:campaign-cost:{}"
_COST_KEEP_S = 90 * 24 * 3600


def _cost_remember(campaign_id: int, total: CostTotal) -> None:
    value = {k: v for k, v in total.as_dict().items() if k != "text"}
    try:
        get_redis().set(_COST_KEY.format(campaign_id), json.dumps(value), ex=_COST_KEEP_S)
    except redis.RedisError:
        pass  # a cache: the page that reckoned the cost shows it; the list reads "-" for now


def campaigns_costs_known(*, campaign_ids: list[int], card_currency: str) -> dict[int, CostTotal]:
    """{campaign id: its last reckoned cost} for the campaigns that have one: one Redis
    round trip whatever the number of campaigns (``card_currency`` is the caller's
    ``rate_card_currency()``, read once for the page)."""
    if not campaign_ids:
        return {}
    try:
        values = get_redis().mget([_COST_KEY.format(pk) for pk in campaign_ids])
    except redis.RedisError:
        return {}  # without Redis the list shows no cost rather than failing
    known: dict[int, CostTotal] = {}
    for pk, raw in zip(campaign_ids, values, strict=True):
        if raw is None:
            continue
        value = json.loads(raw)
        known[pk] = CostTotal(
            charged=int(value["charged"]),
            cost=Decimal(value["cost"]),
            unpriced=int(value["unpriced"]),
            currency=str(value["currency"]),
            card_currency=card_currency,
        )
    return known


# The list's figures kept current without anyone opening a campaign: once a minute, the
# campaigns still sending and those finished in the last few days (delivered and read
# statuses, and with them Meta's pricing, keep arriving after the last send) are reckoned.
_REFRESH_DUE_KEY = "wb:campaign-cost:refresh-due"
COST_REFRESH_INTERVAL_S = 60
COST_REFRESH_FINISHED_WITHIN = timedelta(days=3)
COST_REFRESH_MOST = 20  # a pass reads every priced message of each: about 1 s per million


def campaign_costs_refresh_schedule() -> bool:
    """Enqueue the refresh unless one was enqueued within the interval (the tick asks)."""
    if not get_redis().set(_REFRESH_DUE_KEY, 1, nx=True, ex=COST_REFRESH_INTERVAL_S):
        return False
    queues.enqueue(queues.CAMPAIGN_COSTS_REFRESH)
    return True


def campaign_costs_refresh() -> list[int]:
    """Reckon (and remember for the list) the cost of the campaigns whose cost can still
    change, the most recently started first; returns their ids."""
    finished_since = timezone.now() - COST_REFRESH_FINISHED_WITHIN
    campaigns = (
        Campaign.objects.filter(
            Q(status__in=[CampaignStatus.RUNNING, CampaignStatus.PAUSED])
            | Q(
                status__in=[CampaignStatus.COMPLETED, CampaignStatus.CANCELLED],
                completed_at__gte=finished_since,
            )
        )
        .exclude(started_at=None)
        .order_by("-started_at")[:COST_REFRESH_MOST]
    )
    reckoned: list[int] = []
    for campaign in campaigns:
        campaign_costs(campaign=campaign)
        reckoned.append(campaign.pk)
    return reckoned


@dataclass(frozen=True, kw_only=True)
class CostEstimate(PricedAmount):
    messages: int
    category: str

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "category": self.category, **super().as_dict()}


def campaign_cost_estimate(*, campaign: Campaign) -> CostEstimate:
    """What the messages still to go will cost at the rate card, all of them charged."""
    category = campaign.template.category.lower()
    if campaign.status == CampaignStatus.DRAFT:
        try:
            audience = campaign_audience(campaign)
        except AudienceError:  # the pre-flight names the broken segment
            audience = None
        try:
            skips = SkipRules.for_campaign(campaign, audience)
        except LanguageError:  # the pre-flight names the missing fallback
            skips = SkipRules.for_template(campaign.template, audience)
        sql = _ESTIMATE_DRAFT_SQL.format(
            sendable=skips.sendable_sql("c"),
            audience=audience.condition if audience else "FALSE",
        )
        args: dict[str, Any] = {**skips.params, "category": category}
    else:
        sql = _ESTIMATE_PENDING_SQL
        args = {"category": category, "campaign_id": campaign.pk}
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        messages, cost, unpriced, currency = cursor.fetchone()
    return CostEstimate(
        messages=int(messages),
        cost=cost or Decimal(0),
        unpriced=int(unpriced),
        currency=currency or "",
        category=category,
        card_currency=rate_card_currency(),
    )


# A message's price for the export: '' until Meta reports its pricing, 0 when Meta did not
# charge it, else its rate (the rate card's longest prefix, as ``campaign_costs``). Over
# the export's own ``delivery_message`` rows: the rate card is small, each lookup a few rows.
_MESSAGE_PRICE_SQL = f"""
CASE WHEN delivery_message.pricing_category = '' THEN NULL
     WHEN NOT {_charged_sql("delivery_message")} THEN {{free}}
     ELSE (SELECT r.{{column}} FROM campaigns_ratecard AS r
            WHERE r.category = delivery_message.pricing_category
              AND (r.country_prefix = '*'
                   OR delivery_message."to" LIKE r.country_prefix || '%%')
            ORDER BY (r.country_prefix = '*'), length(r.country_prefix) DESC
            LIMIT 1) END
"""  # noqa: S608 - constants only


def message_price_sql() -> str:
    """SQL of a message's price (see ``_MESSAGE_PRICE_SQL``), over ``delivery_message``."""
    return _MESSAGE_PRICE_SQL.format(column="price", free="0")


def message_price_currency_sql() -> str:
    """SQL of the currency of ``message_price_sql``'s price ('' for a free message)."""
    return _MESSAGE_PRICE_SQL.format(column="currency", free="''")
