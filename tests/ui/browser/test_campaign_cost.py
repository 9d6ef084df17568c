"""A marketer reads what campaigns cost, in a real browser: the same amount, in the same
words, on the campaign list and the report, and the estimate on the pre-flight, all at the
rate card loaded from (a sample of) Meta's own file."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.rate_cards import SAMPLE_RATE_CARD, rate_card_load
from delivery.models import Message, MessageStatus
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.browser.conftest import log_in
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]


def test_a_marketer_reads_the_same_cost_on_the_list_and_the_report(
    wide: Any, live_server: Any
) -> None:
    rate_card_load(SAMPLE_RATE_CARD)
    number = make_phone_number()
    template = make_template(account=number.account, category="MARKETING")
    contact_list = make_contact_list(name="Spring")
    for i in range(3):
        make_contact(phone=f"+55119999900{i:02d}", name="Ana", contact_list=contact_list)
    draft = make_campaign(phone_number=number, template=template, lists=[contact_list])
    done = make_campaign(phone_number=number, template=template, lists=[contact_list])
    Campaign.objects.filter(pk=done.pk).update(status=CampaignStatus.COMPLETED)
    for i in range(1_200):
        Message.objects.create(
            campaign=done,
            phone_number=number,
            to=f"+55119{i:08d}" if i % 4 else f"+1416555{i:04d}",
            status=MessageStatus.DELIVERED,
            pricing_model="PMP",
            pricing_type="regular" if i % 10 else "free_entry_point",
            pricing_category="marketing",
            next_attempt_at="2026-01-01T00:00:00Z",
        )
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    wide.goto(base + reverse("admin:campaigns_campaign_report", args=[done.pk]))
    wide.wait_for_selector("#wb-report-billing")
    total = wide.inner_text("#wb-report-cost")
    # 1,080 charged: 840 Brazilian at 0.0625 and 240 Canadian at 0.0250.
    assert total == "58.5000 USD for 1,080 charged messages"
    headers = wide.eval_on_selector_all(
        "#wb-report-billing th", "cells => cells.map(c => c.textContent)"
    )
    assert headers == ["Category", "Pricing", "Messages", "Charged messages", "Cost"]
    wide.screenshot(path="/tmp/campaign-report-cost.png", full_page=True)

    wide.goto(base + reverse("admin:campaigns_campaign_changelist"))
    row = f"#result_list tr:has(a[href*='/{done.pk}/'])"
    assert wide.inner_text(f"{row} td.field-cost") == "58.5000\nUSD\nReport"
    link = wide.locator(f"{row} a.wb-report-link").bounding_box()
    table = wide.locator("#changelist-form .results").bounding_box()
    assert link is not None and table is not None
    assert link["x"] + link["width"] <= table["x"] + table["width"]  # fits 1366 px
    wide.screenshot(path="/tmp/campaign-list-cost.png")

    wide.goto(base + reverse("admin:campaigns_campaign_preflight", args=[draft.pk]))
    assert wide.inner_text("#wb-cost") == ("0.1875 USD for 3 marketing messages at the rate card")
    wide.screenshot(path="/tmp/campaign-preflight-cost.png", full_page=True)
