"""What a campaign cost, and what it will cost: per-message pricing and the rate card.

Since July 2025 Meta bills each delivered template message (``pricing_model: PMP``) by
its category and the recipient's country; ``pricing.type`` says whether it was charged
(``regular``) or free (``free_customer_service``, ``free_entry_point``). ``billable`` is
deprecated and read only for messages Meta priced before PMP. Prices come from the rate
card (``campaigns.RateCard``) the operator keeps: the longest matching country prefix,
else the ``*`` row; a message no row prices is counted as unpriced, never as free.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.skips import SkipRules
from delivery.models import MessageStatus as S

CHARGED_TYPE = "regular"

# The price of one message (alias m) for its category: a lateral lookup, longest prefix first.
_PRICE_JOIN = """
LEFT JOIN LATERAL (
    SELECT r.price, r.currency FROM campaigns_ratecard AS r
     WHERE r.category = {category}
       AND (r.country_prefix = '*' OR m."to" LIKE r.country_prefix || '%%')
     ORDER BY (r.country_prefix = '*'), length(r.country_prefix) DESC
     LIMIT 1) AS rc ON true
"""

_CHARGED = f"(m.pricing_type = '{CHARGED_TYPE}' OR (m.pricing_type = '' AND m.billable IS TRUE))"

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
           AND c.id IN (SELECT contact_id FROM campaigns_listmembership
                         WHERE contact_list_id = ANY(%(list_ids)s))) AS m
  {_PRICE_JOIN.format(category="%(category)s")}
"""  # noqa: S608 - constants only


@dataclass(frozen=True)
class CostLine:
    category: str
    type: str  # regular, free_customer_service, free_entry_point, "" (before PMP)
    messages: int
    charged: int
    cost: Decimal
    unpriced: int  # charged messages no rate-card row prices
    currency: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "type": self.type or "(not reported)",
            "messages": self.messages,
            "charged": self.charged,
            "cost": f"{self.cost:.4f}",
            "unpriced": self.unpriced,
            "currency": self.currency,
        }


def campaign_costs(*, campaign: Campaign) -> list[CostLine]:
    """What the campaign's messages cost, by pricing category and type."""
    with connection.cursor() as cursor:
        cursor.execute(_COSTS_SQL, [campaign.pk])
        rows = cursor.fetchall()
    return [
        CostLine(
            category=category,
            type=kind,
            messages=int(messages),
            charged=int(charged),
            cost=cost or Decimal(0),
            unpriced=int(unpriced),
            currency=currency or "",
        )
        for category, kind, messages, charged, cost, unpriced, currency in rows
    ]


@dataclass(frozen=True)
class CostEstimate:
    messages: int
    cost: Decimal
    unpriced: int
    currency: str
    category: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "cost": f"{self.cost:.2f}",
            "unpriced": self.unpriced,
            "currency": self.currency,
            "category": self.category,
        }


def campaign_cost_estimate(*, campaign: Campaign) -> CostEstimate:
    """What the messages still to go will cost at the rate card, all of them charged."""
    category = campaign.template.category.lower()
    if campaign.status == CampaignStatus.DRAFT:
        skips = SkipRules.for_template(campaign.template)
        sql = _ESTIMATE_DRAFT_SQL.format(sendable=skips.sendable_sql("c"))
        args: dict[str, Any] = {
            **skips.params,
            "category": category,
            "list_ids": list(campaign.lists.values_list("pk", flat=True)),
        }
    else:
        sql = _ESTIMATE_PENDING_SQL
        args = {"category": category, "campaign_id": campaign.pk}
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        messages, cost, unpriced, currency = cursor.fetchone()
    return CostEstimate(int(messages), cost or Decimal(0), int(unpriced), currency or "", category)
