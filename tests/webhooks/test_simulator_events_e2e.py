"""The callbacks Meta sends on its own, posted signed by the simulator over real HTTP to the
live webhook, and their effect: template status, category and quality changes,
``account_update``, and the ``system`` messages of a user who changed their number or their
user id (``delivery/simulator/events.py``; the rows of docs/webhooks.md they exercise).

Each campaign is launched but not yet sent (its senders run only in ``work_burst``), so it is
running when the callback lands; after it, nothing more of it goes out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from campaigns.models import Campaign, CampaignStatus, Contact, PhoneNumber, Template
from delivery.campaigns.launch import campaign_start
from delivery.models import Message
from delivery.simulator.server import SimulatorServer
from tests.engine_support import campaign_on, number_on, simulator_calling, work_burst
from tests.factories import make_contact
from tests.webhooks.support import APP_SECRET
from webhooks.applier import events_drain
from webhooks.models import InboundMessage, WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sim(live_server: Any) -> Any:
    with simulator_calling(live_server, APP_SECRET, webhook_batch_size=10) as server:
        yield server


@pytest.fixture
def number(sim: SimulatorServer) -> PhoneNumber:
    return number_on(sim, rate=100, reserve=0.0, display_phone_number="15550783881")


def running(sim: SimulatorServer, number: PhoneNumber, **template: Any) -> Campaign:
    campaign = campaign_on(sim, number, recipients=5)
    if template:
        Template.objects.filter(pk=campaign.template_id).update(**template)
        sim.add_template(
            name=campaign.template.name,
            language=campaign.template.language,
            body_params=1,
            waba_id=number.account.waba_id,
            **{k: v for k, v in template.items() if k == "category"},
        )
    campaign_start(campaign=campaign)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    return campaign


def land(sim: SimulatorServer, kind: str, **data: Any) -> dict[str, Any]:
    """Have the simulator post the callback; wait for it and apply it. Returns its body."""
    posted = sim.event(kind, **data)
    assert sim.wait_webhooks_idle(timeout=30)
    events_drain(budget_seconds=30)
    stored = [json.loads(bytes(e.body)) for e in WebhookEvent.objects.order_by("-id")[:1]]
    assert stored == [posted]  # the signed body arrived as posted, and was accepted
    return posted


def assert_paused_and_silent(sim: SimulatorServer, campaign: Campaign, reason: str) -> None:
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert reason in campaign.status_reason
    work_burst()
    assert sim.stats()["requests"] == 0
    assert not Message.objects.filter(campaign=campaign).exclude(status="pending").exists()


def test_a_template_paused_by_meta_pauses_its_campaign_with_the_reason(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    campaign = running(sim, number)
    template = campaign.template
    body = land(sim, "template_status", name=template.name, language="en_US", event="PAUSED")
    value = body["entry"][0]["changes"][0]["value"]
    assert value["other_info"]["title"] == "FIRST_PAUSE"
    template.refresh_from_db()
    assert template.status == "PAUSED"
    assert_paused_and_silent(sim, campaign, template.name)


def test_a_recategorisation_to_marketing_pauses_the_campaign(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    campaign = running(sim, number, category="UTILITY")
    template = campaign.template
    land(sim, "template_category", name=template.name, language="en_US", new_category="MARKETING")
    template.refresh_from_db()
    assert (template.category, template.previous_category) == ("MARKETING", "UTILITY")
    assert_paused_and_silent(sim, campaign, "recategorised")


def test_a_template_whose_quality_turns_red_pauses_its_campaign(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    campaign = running(sim, number)
    template = campaign.template
    land(sim, "template_quality", name=template.name, language="en_US", new_quality_score="RED")
    template.refresh_from_db()
    assert template.quality_score == "RED"
    assert_paused_and_silent(sim, campaign, "RED")


def test_a_deleted_account_pauses_its_campaigns_a_customer_side_restriction_does_not(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    campaign = running(sim, number)
    restriction = [{"restriction_type": "RESTRICTED_CUSTOMER_INITIATED_MESSAGING"}]
    land(
        sim,
        "account_update",
        waba_id=number.account.waba_id,
        event="ACCOUNT_RESTRICTION",
        restriction_info=restriction,
    )
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    land(
        sim,
        "account_update",
        phone_number_id=number.phone_number_id,
        event="ACCOUNT_DELETED",
    )
    assert_paused_and_silent(sim, campaign, "ACCOUNT_DELETED")


def test_a_user_who_changed_number_is_moved_with_history_and_opt_out(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    contact = make_contact(phone="+16505551234", user_id="US.1111")
    contact.opted_out_at = contact.created_at
    contact.save()
    land(
        sim,
        "user_changed_number",
        phone_number_id=number.phone_number_id,
        old="16505551234",
        new="12195555358",
    )
    contact.refresh_from_db()
    assert contact.phone == "+12195555358" and contact.opted_out_at is not None
    assert InboundMessage.objects.get().from_phone == "+16505551234"


def test_a_user_who_changed_user_id_keeps_their_contact(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    old, new = "US.13491208655302741918", "US.99999999999999999999"
    contact = Contact.objects.create(user_id=old, name="Hidden")
    land(
        sim,
        "user_changed_user_id",
        phone_number_id=number.phone_number_id,
        old_user_id=old,
        new_user_id=new,
    )
    contact.refresh_from_db()
    assert contact.user_id == new and contact.phone is None
    stored = InboundMessage.objects.get()
    assert (stored.from_user_id, stored.contact_id) == (old, contact.pk)


def test_a_click_on_a_marketing_messages_send_is_stored_as_meta_gave_it(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    from webhooks.models import MarketingClick

    posted = land(
        sim,
        "link_click",
        phone_number_id=number.phone_number_id,
        click_component="body",
        product_id="SKU-7",
        click_id="c-123",
        tracking_token="tok-9",
        timestamp=1767225600,
    )
    value = posted["entry"][0]["changes"][0]["value"]
    assert "statuses" not in value and "messages" not in value  # Meta's documented shape
    click = MarketingClick.objects.get()
    assert (click.action_type, click.click_component, click.product_id) == (
        "marketing_messages_link_click",
        "body",
        "SKU-7",
    )
    assert (click.click_id, click.tracking_token, click.phone_number_id) == (
        "c-123",
        "tok-9",
        number.phone_number_id,
    )
    assert click.clicked_at is not None and int(click.clicked_at.timestamp()) == 1767225600
    assert click.payload == value["user_actions"][0]
