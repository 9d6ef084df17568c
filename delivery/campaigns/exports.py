"""Per-recipient results of a campaign as CSV, produced row by row for a streamed response.

A campaign may have ten million recipients: the rows come from a server-side cursor in
chunks, and each CSV line is handed on as soon as it is written, so neither the process
nor the browser's wait grows with the campaign. Every text cell passes through
``spreadsheet_safe``: a contact named ``=HYPERLINK(...)`` stays text in Excel. Each row has
its price at the rate card (``cost``, four decimals as every page writes it, and its
``currency``): empty until Meta reports the message's pricing, 0 when Meta did not charge it.
The site adds what other apps know of each message as ``extra`` columns, each a correlated
subquery of the same streamed statement (``whatsblast.figures.export_extra_columns``:
replies, opt-out, clicks, conversions and their value), never a query per row.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models.expressions import RawSQL

from campaigns.audience.rejects import spreadsheet_safe
from campaigns.models import Campaign
from delivery.campaigns.pricing import COST_PLACES, message_price_currency_sql, message_price_sql
from delivery.models import Message
from whatsblast.core.csv_lines import csv_line_writer

# Rows fetched per round trip of the server-side cursor: ~1 MB of tuples.
CHUNK_ROWS = 5_000

COLUMNS = (
    ("message_id", "id"),
    ("phone", "to"),
    ("name", "contact__name"),
    ("status", "status"),
    ("skip_reason", "skip_reason"),
    ("attempts", "attempt"),
    ("error_code", "last_error_code"),
    ("error_title", "last_error_title"),
    ("sent_at", "sent_at"),
    ("delivered_at", "delivered_at"),
    ("read_at", "read_at"),
    ("failed_at", "failed_at"),
    ("pricing_category", "pricing_category"),
    ("billable", "billable"),
    ("pricing_type", "pricing_type"),
    ("cost", "cost_price"),
    ("currency", "cost_currency"),
    ("wamid", "wamid"),
    # The version sent (a campaign in many languages) and where the send went: '' for
    # /messages, else delivery.engine.routes' names.
    ("language", "template__language"),
    ("sent_through", "send_route"),
)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return f"{value:.{COST_PLACES}f}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return spreadsheet_safe(value)
    return str(value)


def campaign_results_rows(
    *, campaign: Campaign, extra: dict[str, Any] | None = None
) -> Iterator[list[str]]:
    """The header, then one row per recipient in message id order.

    ``extra``: more columns, each a query expression over the message (the site adds what
    other apps know of the recipient, such as their replies), after the fixed ones.
    """
    extra = extra or {}
    yield [name for name, _ in COLUMNS] + list(extra)
    rows = (
        Message.objects.filter(campaign=campaign)
        .annotate(
            # Constants only (delivery.campaigns.pricing): nothing of a request reaches them.
            cost_price=RawSQL(message_price_sql(), ()),  # noqa: S611
            cost_currency=RawSQL(message_price_currency_sql(), ()),  # noqa: S611
            **{f"extra_{name}": expression for name, expression in extra.items()},
        )
        .order_by("id")
        .values_list(*(field for _, field in COLUMNS), *(f"extra_{name}" for name in extra))
        .iterator(chunk_size=CHUNK_ROWS)
    )
    for row in rows:
        yield [_cell(value) for value in row]


def campaign_results_csv(
    *, campaign: Campaign, extra: dict[str, Any] | None = None
) -> Iterator[str]:
    """CSV lines for ``campaign_results_rows``, one string per line."""
    writer = csv_line_writer()
    for row in campaign_results_rows(campaign=campaign, extra=extra):
        yield writer.writerow(row)


def campaign_results_filename(campaign: Campaign) -> str:
    return f"campaign-{campaign.pk}-results.csv"
