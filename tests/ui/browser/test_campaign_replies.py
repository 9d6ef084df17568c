"""Marketing ("mia") reads a campaign's replies from its live page, sees the reply on the
message page, and reads what a testing canary waits for, in a real browser at 1366 px."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import CampaignStatus, CanaryState
from delivery.campaigns.canary import HOLD_AT
from tests.factories import make_campaign, make_contact, make_contact_list, make_message
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import ROLE_USERS, role_user
from webhooks.models import InboundMessage
from whatsblast.auth.roles import MARKETING

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]


def test_marketing_reads_a_campaigns_replies_from_its_live_page(
    wide: Any, live_server: Any
) -> None:
    page = wide
    role_user(MARKETING)
    campaign = make_campaign(name="Spring sale", status=CampaignStatus.COMPLETED)
    now = timezone.now()
    people = [
        make_contact(phone="+5511900000101", name="Ana Souza"),
        make_contact(phone="+5511900000102", name="Bruno Lima"),
    ]
    messages = [
        make_message(campaign=campaign, to=p.phone, contact=p, status="read", sent_at=now)
        for p in people
    ]
    said = [
        (people[0], "text", "Is the sale on in Recife too?", "", False, 40),
        (people[1], "button", "Stop promotions", "STOP_PROMO", True, 20),
        (people[0], "text", "Thanks, ordered two!", "", False, 5),
    ]
    for contact, kind, text, payload, opt_out, minutes in said:
        InboundMessage.objects.create(
            wamid=f"wamid.in.{minutes}",
            from_phone=contact.phone or "",
            profile_name=contact.name.split()[0],
            type=kind,
            text=text,
            button_payload=payload,
            is_opt_out=opt_out,
            sent_at=now - timedelta(minutes=minutes),
            contact=contact,
            campaign=campaign,
            payload={},
        )

    log_in(page, live_server.url, ROLE_USERS[MARKETING])
    page.goto(f"{live_server.url}/admin/campaigns/campaign/{campaign.pk}/change/")
    replied = page.locator("#wb-replies")
    replied.wait_for()
    assert replied.inner_text() == "2 recipients replied (3 replies) · 1 opted out"
    screenshot(page, "campaign-live-replies-link.png")
    page.click("#wb-replies-count")

    page.wait_for_selector("#wb-replies-table")
    assert page.inner_text("#wb-replies-summary") == (
        "2 recipients replied (3 replies) · 1 opted out"
    )
    rows = page.locator("#wb-replies-table tbody tr")
    assert rows.count() == 3
    newest = rows.nth(0).inner_text()
    assert "Thanks, ordered two!" in newest and "Ana Souza" in newest
    assert "+5511900000101" in newest and f"message #{messages[0].pk}" in newest
    tap = rows.nth(1).inner_text()
    assert "Stop promotions" in tap and "STOP_PROMO" in tap and "opted out" in tap
    assert "Bruno Lima" in tap
    screenshot(page, "campaign-replies.png", full_page=True)

    rows.nth(1).locator(f"a[href$='/delivery/message/{messages[1].pk}/change/']").click()
    page.wait_for_selector("#wb-message-replies")
    assert "Stop promotions" in page.inner_text("#wb-message-replies")
    screenshot(page, "message-replies.png", full_page=True)

    # Inbound, Support's page, stays closed to Marketing.
    response = page.goto(f"{live_server.url}/admin/webhooks/inboundmessage/")
    assert response.status == 403


def test_the_canary_line_says_what_it_waits_for_and_held_rows_are_named(
    wide: Any, live_server: Any
) -> None:
    page = wide
    role_user(MARKETING)
    campaign = make_campaign(
        name="Canary run",
        status=CampaignStatus.RUNNING,
        canary_size=4,
        canary_state=CanaryState.TESTING,
        started_at=timezone.now(),
    )
    now = timezone.now()
    for _ in range(3):
        make_message(campaign=campaign, status="delivered", sent_at=now)
    make_message(
        campaign=campaign, status="pending", attempt=1, next_attempt_at=now + timedelta(seconds=30)
    )
    held = make_message(campaign=campaign, status="pending", next_attempt_at=HOLD_AT)

    log_in(page, live_server.url, ROLE_USERS[MARKETING])
    page.goto(f"{live_server.url}/admin/campaigns/campaign/{campaign.pk}/change/")
    canary = page.locator("#wb-canary")
    canary.wait_for()
    text = canary.inner_text()
    assert "testing — 3 of 4 settled (0 failed), 1 waiting on a retry at " in text, text
    screenshot(page, "campaign-canary-waiting.png")

    page.goto(f"{live_server.url}/admin/delivery/message/{held.pk}/change/")
    body = page.inner_text("#content")
    assert "held until the canary passes" in body and "9999" not in body


def test_the_preflight_says_which_quick_reply_buttons_opt_out(
    wide: Any, live_server: Any, settings: Any
) -> None:
    settings.OPT_OUT_KEYWORDS = ["STOP", "UNSUBSCRIBE"]
    page = wide
    role_user(MARKETING)
    buttons = [
        {
            "index": index,
            "type": "QUICK_REPLY",
            "text": text,
            "sub_type": "quick_reply",
            "param": "optional",
        }
        for index, text in enumerate(("Stop promotions", "Unsubscribe"))
    ]
    audience = make_contact_list()
    make_contact(contact_list=audience, name="Ana")
    draft = make_campaign(name="Buttons", lists=[audience])
    draft.template.buttons = buttons
    draft.template.save(update_fields=["buttons"])
    draft.param_mapping = {"body": {"1": {"field": "name"}}, "buttons": {"0": {"value": "PROMO"}}}
    draft.save(update_fields=["param_mapping"])

    log_in(page, live_server.url, ROLE_USERS[MARKETING])
    page.goto(f"{live_server.url}/admin/campaigns/campaign/{draft.pk}/preflight/")
    box = page.locator("#wb-quick-replies")
    stop = box.locator("tr[data-button='0']").inner_text()
    assert "Stop promotions" in stop and "does not opt out" in stop
    assert "Payload 'PROMO' is not a stop keyword" in stop
    assert "opts out" in box.locator("tr[data-button='1']").inner_text()
    assert "Parameter mapping" not in page.inner_text("#wb-findings")
    box.scroll_into_view_if_needed()
    screenshot(page, "campaign-preflight-quick-replies.png")
