"""Sends to a business-scoped user id (BSUID), for contacts known by it alone.

Meta (2026): a user who hides their number behind a username is reached with the user id
in ``recipient`` instead of ``to``; when both are given ``to`` wins, and authentication
templates (one-tap, zero-tap, copy-code) still need a phone, refused with 131062. Sources
in tests/fixtures/real/README.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import override_settings

from campaigns.models import CampaignStatus, Contact, ListMembership
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.skips import USER_ID_REFUSED
from delivery.cloud.client import SendRequest, build_message_body, is_user_id
from delivery.models import Message
from delivery.simulator.config import user_id_for
from tests.engine_support import (
    campaign_on,
    number_on,
    running_simulator,
    settle,
    simulator_calling,
)
from tests.factories import make_campaign, make_template
from tests.webhooks.support import APP_SECRET
from webhooks.models import InboundMessage
from webhooks.selectors import (
    campaign_replier_counts,
    message_opted_out_expression,
    message_replies_expression,
)

pytestmark = pytest.mark.django_db(transaction=True)

ONLY_IDS = ["CA.13491208655302741918", "BR.ENT.88127766551234"]
STOPPING = "IN.4455667788990011"
BOTH = ("+447700900123", "GB.7712345678901")


def sent_bodies(sim: Any) -> list[dict[str, Any]]:
    return [json.loads(r["body"]) for r in sim.records(bodies=True) if r.get("body")]


def user_id_contacts(campaign: Any) -> list[Contact]:
    """Add the user-id-only contacts and one known by both to the campaign's list."""
    contact_list = campaign.lists.get()
    contacts = [Contact.objects.create(user_id=u, name="U") for u in [*ONLY_IDS, STOPPING]]
    contacts.append(Contact.objects.create(phone=BOTH[0], user_id=BOTH[1], name="B"))
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contacts


def test_a_send_to_a_user_id_goes_in_recipient_and_a_phone_in_to() -> None:
    def body(to: str) -> dict[str, Any]:
        req = SendRequest("http://x", "1", "t", to=to, callback_data="", template_name="p")
        return build_message_body(req)

    assert body("US.13491208655302741918")["recipient"] == "US.13491208655302741918"
    assert "to" not in body("US.13491208655302741918")
    assert body("+5511999990000")["to"] == "+5511999990000"
    assert "recipient" not in body("+5511999990000")
    assert is_user_id("US.ENT.11815799212886844830")
    assert not is_user_id("+5511999990000") and not is_user_id("5511999990000")


def test_a_contact_needs_a_phone_or_a_user_id_and_a_phone_stays_e164() -> None:
    only_id = Contact.objects.create(user_id="US.13491208655302741918")
    assert only_id.phone is None and str(only_id) == "US.13491208655302741918"
    assert only_id.recipient == "US.13491208655302741918"
    both = Contact.objects.create(phone="+5511999990000", user_id="BR.1234567")
    assert both.recipient == "+5511999990000" and str(both) == "+5511999990000"
    with pytest.raises(IntegrityError), transaction.atomic():
        Contact.objects.create(name="nobody")
    with pytest.raises(IntegrityError), transaction.atomic():
        Contact.objects.create(phone="5511999990001", user_id="BR.999")
    # Several contacts without a phone: NULLs do not collide on the unique phone index.
    Contact.objects.create(user_id="US.2")
    assert Contact.objects.filter(phone__isnull=True).count() == 2


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_campaign_reaches_contacts_by_phone_by_user_id_and_by_both(live_server: Any) -> None:
    with simulator_calling(
        live_server,
        APP_SECRET,
        webhook_batch_size=10,
        reply_recipients={STOPPING: "STOP", ONLY_IDS[0]: "Thanks!"},
    ) as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=3)
        user_id_contacts(campaign)
        report = campaign_preflight(campaign=campaign)
        assert report.contacts == 7
        campaign_start(campaign=campaign)
        settle(sim)

        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED
        messages = {m.to: m for m in Message.objects.filter(campaign=campaign)}
        assert len(messages) == 7
        # A contact with both is sent to its phone; the others to their user id.
        assert {*ONLY_IDS, STOPPING, BOTH[0]} <= set(messages)
        assert BOTH[1] not in messages
        assert {m.status for m in messages.values()} == {"delivered"}
        for user_id in [*ONLY_IDS, STOPPING]:
            assert messages[user_id].wa_id == ""  # Meta answers with the user_id only
        bodies = {b.get("to") or b["recipient"]: b for b in sent_bodies(sim)}
        for user_id in [*ONLY_IDS, STOPPING]:
            assert bodies[user_id]["recipient"] == user_id and "to" not in bodies[user_id]
        assert bodies[BOTH[0]]["to"] == BOTH[0] and "recipient" not in bodies[BOTH[0]]
        # The phone sends' statuses named each user's id in value.contacts[]: the contacts
        # known by phone learnt it; the one known by both kept its own (a user id is never
        # replaced by another), and the user-id contacts kept theirs.
        contacts = {c.recipient: c.user_id for c in Contact.objects.all()}
        phones = [to for to in messages if to.startswith("+") and to != BOTH[0]]
        assert len(phones) == 3
        assert {contacts[p] for p in phones} == {user_id_for(p) for p in phones}
        assert contacts[BOTH[0]] == BOTH[1] != user_id_for(BOTH[0])
        assert all(contacts[u] == u for u in [*ONLY_IDS, STOPPING])

        # The user behind a user id replied STOP (no phone in the message): opted out.
        stop = InboundMessage.objects.get(is_opt_out=True)
        assert (stop.from_phone, stop.from_user_id) == ("", STOPPING)
        assert stop.is_opt_out and stop.campaign_id == campaign.pk
        assert Contact.objects.get(user_id=STOPPING).opted_out_at is not None
        # The campaign page counts them, and finds their message, by the user id.
        repliers = campaign_replier_counts(campaign_ids=[campaign.pk])[campaign.pk]
        assert repliers == {"replied": 2, "opted_out": 1}
        figures = Message.objects.filter(campaign=campaign).annotate(
            replies=message_replies_expression(), opted=message_opted_out_expression()
        )
        assert {m.to for m in figures if m.opted} == {STOPPING}
        assert {m.to: m.replies for m in figures if m.replies} == {STOPPING: 1, ONLY_IDS[0]: 1}

        # The next campaign to the list skips them and sends to the other user ids again.
        second = make_campaign(
            phone_number=number, template=campaign.template, lists=list(campaign.lists.all())
        )
        campaign_start(campaign=second)
        settle(sim)
        rows = dict(Message.objects.filter(campaign=second).values_list("to", "status"))
        assert rows[STOPPING] == "skipped"
        assert {rows[u] for u in ONLY_IDS} == {"delivered"}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_an_authentication_template_is_not_sent_to_user_ids_meta_would_refuse() -> None:
    """Meta refuses authentication templates to a user id (131062): the launch skips those
    recipients with the reason, and nothing is sent to them."""
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=2)
        otp = make_template(account=number.account, name="otp_code", category="AUTHENTICATION")
        sim.add_template(
            name=otp.name, language=otp.language, body_params=1, category="AUTHENTICATION"
        )
        campaign.template = otp
        campaign.save(update_fields=["template"])
        user_id_contacts(campaign)
        campaign_start(campaign=campaign)
        settle(sim)
        rows = {m.to: m for m in Message.objects.filter(campaign=campaign)}
        for user_id in [*ONLY_IDS, STOPPING]:
            assert rows[user_id].status == "skipped"
            assert rows[user_id].skip_reason == USER_ID_REFUSED
        assert not [b for b in sent_bodies(sim) if "recipient" in b]
        phones = [m for to, m in rows.items() if to.startswith("+")]
        assert len(phones) == 3 and {m.status for m in phones} == {"sent"}
