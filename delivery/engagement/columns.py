"""A message's engagement as query expressions over ``delivery.Message``: the campaign
export's columns (``whatsblast.figures.export_extra_columns``).

Each is a correlated subquery the export's one streamed query carries, so a million-row
export reads each message's clicks and conversions through their foreign keys' indexes
(one probe per row, no per-row query, no list of ids held in the process):

- ``clicks``: people's taps on the message's tracked link (``Click.is_preview`` false:
  link-preview fetchers left out, as the report counts them);
- ``conversions``, ``conversion_value``, ``conversion_currency``: the conversions
  attributed to the message (delivered or clicked, as ``delivery.engagement.roi`` counts
  them; a holdout's control conversions are never the message's), the sum of their values
  and the currencies those values are in ("BRL", or "BRL,USD" when mixed: amounts in
  different currencies are summed as they are, and the column says so).
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.aggregates import StringAgg
from django.db.models import (
    CharField,
    Count,
    DecimalField,
    IntegerField,
    OuterRef,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce

from delivery.engagement.conversions import CLICKED, DELIVERED
from delivery.models import Click, Conversion

ATTRIBUTED = (DELIVERED, CLICKED)


def message_clicks_expression() -> Coalesce:
    """People's clicks on the message's tracked link (0 when none)."""
    clicks = (
        Click.objects.filter(message=OuterRef("pk"), is_preview=False)
        .order_by()
        .values("message")
        .annotate(n=Count("id"))
        .values("n")
    )
    return Coalesce(Subquery(clicks, output_field=IntegerField()), 0)


def _attributed() -> Any:
    return Conversion.objects.filter(
        message=OuterRef("pk"), attributed_by__in=ATTRIBUTED
    ).order_by()


def message_conversions_expression() -> Coalesce:
    """Conversions attributed to the message (0 when none)."""
    conversions = _attributed().values("message").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(conversions, output_field=IntegerField()), 0)


def message_conversion_value_expression() -> Subquery:
    """The sum of the attributed conversions' values (null when none has a value)."""
    values = _attributed().values("message").annotate(total=Sum("value")).values("total")
    return Subquery(values, output_field=DecimalField(max_digits=20, decimal_places=4))


def message_conversion_currency_expression() -> Coalesce:
    """The currencies of the attributed conversions' values, "" when none has a value."""
    currencies = (
        _attributed()
        .filter(value__isnull=False)
        .exclude(currency="")
        .values("message")
        .annotate(
            currencies=StringAgg("currency", delimiter=",", distinct=True, order_by="currency")
        )
        .values("currencies")
    )
    return Coalesce(Subquery(currencies, output_field=CharField()), Value(""))


def export_engagement_columns() -> dict[str, Any]:
    """The export's engagement columns, in order."""
    return {
        "clicks": message_clicks_expression(),
        "conversions": message_conversions_expression(),
        "conversion_value": message_conversion_value_expression(),
        "conversion_currency": message_conversion_currency_expression(),
    }
