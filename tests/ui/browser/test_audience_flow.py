"""A marketer's loop in a real browser: build a segment of three rules and watch its count,
use it in a campaign with an exclusion list, read the pre-flight's breakdown, launch, then
follow up from the report with those who did not read it.

The people: seven customers in São Paulo who spent 100 or more (Ana … Gus), of whom Bia is
staff (the segment leaves her out) and Caio is on "do not disturb" (the campaign leaves him
out); Rui spent 50, Lia lives in Rio. Statuses after the send are written as the webhooks
leave them: Ana, Duda and Edu delivered, Fabi and Gus read.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, Segment
from delivery.models import Message, MessageStatus
from tests.engine_support import work_burst
from tests.factories import (
    make_account,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.browser.conftest import browser, log_in, screenshot, wide  # noqa: F401 - fixtures
from tests.ui.support import role_user
from tests.ui.test_segment_builder import add, rule, wait_count
from whatsblast.auth.roles import MARKETING
from whatsblast.core import queues

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

SAO_PAULO = "São Paulo"


def people() -> None:
    account = make_account()
    make_phone_number(account=account, display_phone_number="+55 11 4000-0001")
    make_template(account=account, name="autumn", body_text="Autumn sale!", body_param_count=0)
    staff = make_contact_list(name="staff")
    quiet = make_contact_list(name="do not disturb")
    on_list = {"Bia": staff, "Caio": quiet}
    for index, name in enumerate(("Ana", "Bia", "Caio", "Duda", "Edu", "Fabi", "Gus")):
        make_contact(
            phone=f"+55119000000{index:02d}",
            name=name,
            attributes={"city": SAO_PAULO, "total_spent": str(100 + index * 50)},
            contact_list=on_list.get(name),
        )
    make_contact(
        phone="+5511900000090", name="Rui", attributes={"city": SAO_PAULO, "total_spent": "50"}
    )
    make_contact(
        phone="+5521900000091", name="Lia", attributes={"city": "Rio", "total_spent": "900"}
    )


def test_a_marketer_targets_launches_and_follows_up(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    people()
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    # 1. The segment: three rules, the count after each.
    wide.goto(f"{base}/admin/campaigns/segment/add/")
    wide.wait_for_selector("#wb-builder:not([hidden])")
    wide.fill("#id_name", "SP spenders")
    add(wide, "field")
    rule(wide, 0).locator("select.wb-field").select_option("city")
    rule(wide, 0).locator("select.wb-op").select_option("eq")
    rule(wide, 0).locator("input.wb-value").fill(SAO_PAULO)
    wait_count(wide, 8)
    add(wide, "field")
    rule(wide, 1).locator("select.wb-field").select_option("total_spent")
    rule(wide, 1).locator("select.wb-op").select_option("gte")
    rule(wide, 1).locator("input.wb-value").fill("100")
    wait_count(wide, 7)
    add(wide, "list")
    rule(wide, 2).locator("select.wb-list").select_option("staff")
    rule(wide, 2).locator(".wb-not input").check()
    wait_count(wide, 6)
    wide.click("input[name=_save]")
    wide.wait_for_selector(".messagelist")
    segment = Segment.objects.get(name="SP spenders")

    # 2. The campaign: the segment, less the do-not-disturb list, capped.
    wide.goto(f"{base}/admin/campaigns/campaign/add/")
    wide.fill("#id_name", "Autumn sale")
    wide.select_option("#id_phone_number", label="+55 11 4000-0001")
    wide.select_option("#id_template", label="autumn (en_US)")
    wide.select_option("#id_segments", label="SP spenders")
    wide.select_option("#id_exclude_lists", label="do not disturb")
    wide.fill("#id_frequency_cap", "1/7d")
    screenshot(wide, "campaign-audience-form.png", full_page=True)

    # 3. The pre-flight: every subtraction as a number.
    wide.click("#wb-preflight")
    wide.wait_for_selector("#wb-findings")
    audience = wide.inner_text("#wb-preflight-audience")
    assert "Segments\t1" in audience
    assert wide.inner_text("#wb-contacts") == "6"
    left_out = wide.locator("tr.wb-left-out")
    assert left_out.count() == 1
    assert left_out.inner_text() == "Left out: list do not disturb\t1"
    assert wide.inner_text("#wb-audience") == "5"
    assert wide.inner_text("#wb-capped") == "0"
    assert "1 left out: list do not disturb." in wide.inner_text("#wb-findings")
    screenshot(wide, "campaign-preflight-audience.png", full_page=True)

    # 4. Launch: the launch job makes the rows; the send's outcomes come back.
    wide.click("#wb-launch")
    wide.wait_for_selector(".messagelist")
    work_burst(queues.CAMPAIGN_LAUNCH.queue)
    campaign = Campaign.objects.get(name="Autumn sale")
    sent = Message.objects.filter(campaign=campaign).select_related("contact")
    rows = {m.contact.name: m for m in sent}
    assert sorted(rows) == ["Ana", "Caio", "Duda", "Edu", "Fabi", "Gus"]
    assert (rows["Caio"].status, rows["Caio"].skip_reason) == (
        MessageStatus.SKIPPED,
        "left out: list do not disturb",
    )
    now = timezone.now()
    for name, status in {
        "Ana": MessageStatus.DELIVERED,
        "Duda": MessageStatus.DELIVERED,
        "Edu": MessageStatus.DELIVERED,
        "Fabi": MessageStatus.READ,
        "Gus": MessageStatus.READ,
    }.items():
        Message.objects.filter(pk=rows[name].pk).update(status=status, sent_at=now, wamid=name)
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.COMPLETED, completed_at=now, first_completed_at=now
    )

    # 5. The report: the skip named, then the follow-up.
    wide.goto(f"{base}/admin/campaigns/campaign/{campaign.pk}/report/")
    assert "left out: list do not disturb" in wide.inner_text("#wb-report-skips")
    follow = wide.locator("#wb-follow-ups tr[data-outcome='delivered_not_read']")
    assert follow.locator("td").nth(1).inner_text() == "3"
    screenshot(wide, "campaign-report-follow-up.png", full_page=True)
    follow.locator("button").click()
    wide.wait_for_selector(".messagelist")
    assert "Draft Autumn sale: follow-up, delivered but not read created" in wide.inner_text(
        ".messagelist"
    )
    draft = Campaign.objects.get(follow_up_of=campaign)
    chosen = wide.locator("#id_segments option:checked").all_inner_texts()
    assert chosen == [f"#{campaign.pk} Autumn sale: delivered but not read"]
    assert wide.locator("#id_exclude_lists option:checked").all_inner_texts() == ["do not disturb"]
    assert wide.input_value("#id_frequency_cap") == "1/7d"
    screenshot(wide, "campaign-follow-up-draft.png", full_page=True)

    # The follow-up's pre-flight: exactly the three who did not read.
    wide.click("#wb-preflight")
    wide.wait_for_selector("#wb-findings")
    assert wide.inner_text("#wb-contacts") == "3"
    assert wide.inner_text("#wb-audience") == "3"
    assert draft.segments.get() != segment
