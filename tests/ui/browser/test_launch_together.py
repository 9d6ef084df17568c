"""A marketer launches several drafts together from the campaign list, in a real browser,
and real worker processes start them in one commit and send them to the simulator."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client

from campaigns.models import Campaign, CampaignStatus
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator
from tests.factories import make_campaign
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import ROLE_USERS, role_user
from whatsblast.auth.roles import MARKETING, SUPPORT
from whatsblast.core.processes import ProcessGroup

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

RECIPIENTS = 12


def wait_completed(campaigns: list[Campaign], workers: ProcessGroup, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    ids = [c.pk for c in campaigns]
    while Campaign.objects.filter(pk__in=ids).exclude(status=CampaignStatus.COMPLETED).exists():
        workers.check()
        assert time.monotonic() < deadline, (
            list(Campaign.objects.filter(pk__in=ids).values_list("status", "status_reason")),
            list(Message.objects.values_list("status", flat=True)),
        )
        time.sleep(0.2)


def test_a_marketer_launches_two_drafts_together_and_both_start_at_one_moment(
    page: Any, live_server: Any, workers: ProcessGroup
) -> None:
    role_user(MARKETING)
    with running_simulator() as sim:
        north = campaign_on(sim, number_on(sim, rate=20), recipients=RECIPIENTS, name="north")
        south = campaign_on(sim, number_on(sim, rate=20), recipients=RECIPIENTS, name="south")
        left_out = make_campaign(name="left-out")  # a draft not ticked stays a draft
        workers.manage("worker", "rqworker", "transactional", "campaigns", "maintenance")
        workers.manage("ticker", "ticker", "--every", "1")

        log_in(page, live_server.url, ROLE_USERS[MARKETING])
        page.goto(f"{live_server.url}/admin/campaigns/campaign/?status__exact=draft")
        for campaign in (north, south):
            page.check(f"#result_list input[name=_selected_action][value='{campaign.pk}']")
        page.select_option("select[name=action]", "launch_together")
        page.click("button[name=index]")

        notice = page.inner_text(".messagelist")
        assert "2 campaigns are launching together" in notice
        screenshot(page, "campaign-launch-together.png")
        wait_completed([north, south], workers)

    north.refresh_from_db()
    south.refresh_from_db()
    assert north.started_at == south.started_at is not None
    for campaign in (north, south):
        sent = Message.objects.filter(campaign=campaign, status="sent").count()
        assert sent == RECIPIENTS, campaign
    assert Campaign.objects.get(pk=left_out.pk).status == CampaignStatus.DRAFT

    page.goto(f"{live_server.url}/admin/campaigns/campaign/?status__exact=completed")
    rows = page.inner_text("#result_list")
    assert "north" in rows and "south" in rows and "Completed" in rows


def test_support_is_not_offered_the_launch_and_cannot_post_it(client: Client) -> None:
    first, second = make_campaign(name="a"), make_campaign(name="b")
    client.force_login(role_user(SUPPORT))
    url = "/admin/campaigns/campaign/"

    page = client.get(url).content.decode()
    assert 'value="launch_together"' not in page

    response = client.post(
        url, {"action": "launch_together", "_selected_action": [first.pk, second.pk]}
    )

    assert response.status_code in (200, 302)
    assert set(Campaign.objects.values_list("status", "status_reason")) == {
        (CampaignStatus.DRAFT, "")
    }
