"""The per-recipient CSV: streamed, one row per message, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from delivery.campaigns.exports import campaign_results_rows
from tests.factories import make_campaign, make_contact, make_message

pytestmark = pytest.mark.django_db


def test_the_export_streams_every_recipient_with_formulas_neutralised(marketer: Client) -> None:
    campaign = make_campaign()
    sneaky = make_contact(phone="+5511900000009", name='=HYPERLINK("http://x","click")')
    make_message(
        campaign=campaign,
        to=sneaky.phone,
        contact=sneaky,
        status="read",
        sent_at=timezone.now(),
        pricing_category="marketing",
        billable=True,
    )
    make_message(
        campaign=campaign,
        status="failed",
        last_error_code=131026,
        last_error_title="@SUM(A1:A2) Message undeliverable",
    )
    make_message(campaign=campaign, status="skipped", skip_reason="opted out")

    response = marketer.get(reverse("admin:campaigns_campaign_export", args=[campaign.pk]))

    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="campaign-{campaign.pk}-results.csv"' in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == 3
    first, second, third = rows
    assert first["name"] == '\'=HYPERLINK("http://x","click")'
    assert first["phone"] == "+5511900000009"  # a phone number, not a formula: as it is
    assert (first["status"], first["pricing_category"], first["billable"]) == (
        "read",
        "marketing",
        "true",
    )
    assert first["sent_at"].startswith(str(timezone.now().year))
    assert (second["error_code"], second["error_title"]) == (
        "131026",
        "'@SUM(A1:A2) Message undeliverable",
    )
    assert (third["status"], third["skip_reason"], third["name"]) == ("skipped", "opted out", "")


def test_rows_come_in_message_order_after_the_header() -> None:
    campaign = make_campaign()
    ids = [make_message(campaign=campaign).pk for _ in range(5)]
    rows: list[Any] = list(campaign_results_rows(campaign=campaign))
    assert rows[0][:4] == ["message_id", "phone", "name", "status"]
    assert [int(r[0]) for r in rows[1:]] == ids
