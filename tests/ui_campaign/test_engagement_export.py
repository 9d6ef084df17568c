"""The per-recipient CSV's engagement columns: each message's clicks (people's, not preview
fetchers'), and the conversions attributed to it with their value, in one streamed query."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from delivery.campaigns.exports import COLUMNS, campaign_results_rows
from delivery.models import Click, Conversion, Message
from tests.factories import make_campaign, make_contact, make_message
from whatsblast.figures import export_extra_columns

pytestmark = pytest.mark.django_db


def click(message: Message, *, preview: bool = False) -> None:
    Click.objects.create(
        message=message,
        campaign_id=message.campaign_id,
        clicked_at=timezone.now(),
        is_preview=preview,
    )


def conversion(message: Message, key: str, value: str | None, currency: str, by: str) -> None:
    Conversion.objects.create(
        event="purchase",
        value=None if value is None else Decimal(value),
        currency=currency,
        occurred_at=timezone.now(),
        source="api",
        dedupe_key=key,
        message=message,
        campaign_id=message.campaign_id,
        attributed_by=by,
    )


def test_the_export_has_clicks_and_conversions_per_message(marketer: Client) -> None:
    campaign = make_campaign()
    other = make_campaign()
    clicked = make_message(campaign=campaign, contact=make_contact(), status="read")
    mixed = make_message(campaign=campaign, status="delivered")
    quiet = make_message(campaign=campaign, status="delivered")
    held = make_message(campaign=campaign, status="skipped", skip_reason="holdout")
    elsewhere = make_message(campaign=other, status="read")
    for _ in range(2):
        click(clicked)
    click(clicked, preview=True)  # a link preview: not a person
    click(elsewhere)
    conversion(clicked, "k1", "100.00", "BRL", "clicked")
    conversion(clicked, "k2", "50.5", "BRL", "delivered")
    conversion(clicked, "k3", None, "", "clicked")  # no value: counted, not summed
    conversion(mixed, "k4", "10", "USD", "delivered")
    conversion(mixed, "k5", "20", "BRL", "delivered")
    conversion(held, "k6", None, "", "holdout")  # a control conversion: not the message's

    response = marketer.get(reverse("admin:campaigns_campaign_export", args=[campaign.pk]))
    assert response.streaming
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert rows[0] == [
        *(name for name, _ in COLUMNS),
        "replies",
        "opted_out",
        "clicks",
        "conversions",
        "conversion_value",
        "conversion_currency",
    ]
    engagement = {int(row[0]): row[-4:] for row in rows[1:]}
    assert engagement == {
        clicked.pk: ["2", "3", "150.5000", "BRL"],
        mixed.pk: ["0", "2", "30.0000", "BRL,USD"],
        quiet.pk: ["0", "0", "", ""],
        held.pk: ["0", "0", "", ""],
    }


def test_the_columns_come_from_one_query_whatever_the_rows() -> None:
    campaign = make_campaign()
    for i in range(30):
        message = make_message(campaign=campaign, status="delivered")
        if i % 3 == 0:
            click(message)
            conversion(message, f"c{i}", "1", "EUR", "delivered")
    with CaptureQueriesContext(connection) as queries:
        rows = list(campaign_results_rows(campaign=campaign, extra=export_extra_columns()))
    assert len(rows) == 31
    assert sum(row[-4] == "1" for row in rows[1:]) == 10
    selects = [q["sql"] for q in queries.captured_queries if "delivery_click" in q["sql"]]
    assert len(selects) == 1, [q["sql"][:200] for q in queries.captured_queries]
