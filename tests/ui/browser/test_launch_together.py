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
from tests.factories import make_campaign, make_contact, make_contact_list
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
    wide: Any, live_server: Any, workers: ProcessGroup
) -> None:
    page = wide
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

        # First the confirmation: each draft's pre-flight, nothing launched yet.
        page.wait_for_selector("#wb-together-confirm")
        cards = page.locator(".wb-together-card")
        assert cards.count() == 2
        for campaign in (north, south):
            card = page.locator(f".wb-together-card[data-campaign='{campaign.pk}']")
            text = card.inner_text()
            assert campaign.name in text and "ready" in text
            assert card.locator(".wb-will-send").inner_text() == f"{RECIPIENTS:,}"
            assert "Estimated cost" in text and "Audience (distinct contacts)" in text
        assert set(Campaign.objects.values_list("status_reason", flat=True)) == {""}
        screenshot(page, "campaign-launch-together-confirm.png", full_page=True)
        page.click("#wb-together-confirm")

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


def test_a_blocked_draft_is_shown_blocked_and_cannot_be_launched(
    wide: Any, live_server: Any
) -> None:
    page = wide
    role_user(MARKETING)
    ready = make_campaign(name="ready", lists=[make_contact_list()])
    make_contact(contact_list=ready.lists.get(), name="Ana")
    listless = make_campaign(name="listless")
    log_in(page, live_server.url, ROLE_USERS[MARKETING])
    page.goto(f"{live_server.url}/admin/campaigns/campaign/?status__exact=draft")
    for campaign in (ready, listless):
        page.check(f"#result_list input[name=_selected_action][value='{campaign.pk}']")
    page.select_option("select[name=action]", "launch_together")
    page.click("button[name=index]")

    blocked = page.locator(f".wb-together-card[data-campaign='{listless.pk}']")
    assert "blocked" in blocked.inner_text()
    assert (
        "Blocks the launch: The campaign has no contact list and no segment."
        in blocked.inner_text()
    )
    assert page.locator("#wb-together-confirm").count() == 0
    assert "Nothing was launched" in page.inner_text("#wb-together-refused")
    screenshot(page, "campaign-launch-together-blocked.png", full_page=True)
    assert set(Campaign.objects.values_list("status_reason", flat=True)) == {""}


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
