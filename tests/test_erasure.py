"""Erasing a contact (webhooks.erasure): afterwards no table holds their number, user id or
name, anywhere; their campaign's counts and reports are what they were; the CLI erases by
phone or id.

The person is stored the way the system stores people: imported into a list, sent a
campaign message and an API message (one failed into a dead letter), replying through
Meta's callbacks (a text and a quick-reply tap), clicking, converting, counted in the
messaging-limit budget, named by an outgoing event and by the admin's history. Every text,
JSON and binary column of every table is then searched for them.
"""

from __future__ import annotations

import copy
import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from campaigns.models import Contact, ListMembership
from delivery.api.keys import api_key_create
from delivery.campaigns.status_counts import campaigns_status_counts
from delivery.engagement.buttons import campaign_button_taps, campaign_button_taps_by_variant
from delivery.engine.reach import reach_key
from delivery.models import (
    Click,
    Conversion,
    DeadLetter,
    MarketingHold,
    Message,
    MessageKind,
    MessageStatus,
    PoolHome,
    ServiceWindow,
)
from journeys.events_in import events_record
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_message,
    make_phone_number,
)
from tests.journeys.support import journey_live
from tests.journeys.support import run as journeys_run
from webhooks.applier import events_drain
from webhooks.erasure import ERASED_REASON, ContactNotFound, contact_erase
from webhooks.models import InboundMessage, UnmatchedStatus, WebhookEvent
from webhooks.services import event_store
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures"
NUMBER_ID = "106540352242922"  # the recorded callbacks' phone_number_id
PHONE = "+5511987650123"
DIGITS = PHONE[1:]
USER_ID = "BR.55119876501239999"
NAME = "Zuleide Erasmo"
PROFILE = "Zuzu Profile"
OTHER_PHONE = "+5511987650999"
CAMPAIGN_WAMID = "wamid.CAMPAIGN-SENT-TO-ZULEIDE"
NEEDLES = (PHONE, DIGITS, USER_ID, NAME, PROFILE, "Zuleide")


def meta(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def received(payload: dict[str, Any]) -> None:
    event_store(body=meta(payload))
    events_drain(budget_seconds=30)


def inbound_text(*, wamid: str, text: str) -> dict[str, Any]:
    payload = json.loads((FIXTURES / "webhooks" / "inbound_text.json").read_text())
    value = payload["entry"][0]["changes"][0]["value"]
    value["contacts"][0].update(wa_id=DIGITS, user_id=USER_ID, profile={"name": PROFILE})
    value["messages"][0].update({"from": DIGITS, "id": wamid, "text": {"body": text}})
    return payload


def quick_reply(*, wamid: str, answers: str, text: str) -> dict[str, Any]:
    path = FIXTURES / "real" / "inbound" / "meta_doc_button_quick_reply.json"
    payload = json.loads(path.read_text())
    value = payload["entry"][0]["changes"][0]["value"]
    value["contacts"][0].update(wa_id=DIGITS, profile={"name": PROFILE})
    message = value["messages"][0]
    message.update({"from": DIGITS, "id": wamid, "button": {"payload": text, "text": text}})
    message["context"]["id"] = answers
    return payload


def status(*, wamid: str, callback: str | None, state: str = "delivered") -> dict[str, Any]:
    payload = json.loads((FIXTURES / "webhooks" / "status_delivered.json").read_text())
    item = payload["entry"][0]["changes"][0]["value"]["statuses"][0]
    item.update(id=wamid, status=state, recipient_id=DIGITS, timestamp=str(int(time_now())))
    if callback is None:
        item.pop("biz_opaque_callback_data")
    else:
        item["biz_opaque_callback_data"] = callback
    return payload


def time_now() -> float:
    return timezone.now().timestamp()


def holdings(needle: str) -> list[str]:
    """Every table.column holding ``needle``: text, JSON and binary columns alike."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT table_name, column_name, data_type FROM information_schema.columns
            WHERE table_schema = 'public'
              AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'bytea',
                                'ARRAY', 'USER-DEFINED')
            """
        )
        columns = cursor.fetchall()
        found = []
        for table, column, data_type in columns:
            if data_type == "bytea":
                condition = f'position(%s::bytea IN "{column}") > 0'
                param: Any = needle.encode()
            else:
                condition = f'strpos("{column}"::text, %s) > 0'
                param = needle
            cursor.execute(f'SELECT count(*) FROM "{table}" WHERE {condition}', [param])
            if cursor.fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


@pytest.fixture
def person(db: Any) -> dict[str, Any]:
    """The person to erase, everywhere the system keeps people, and a bystander beside."""
    number = make_phone_number(phone_number_id=NUMBER_ID)
    vip = make_contact_list(name="vip")
    contact = make_contact(
        phone=PHONE, user_id=USER_ID, name=NAME, attributes={"nick": "Zuleide"}, contact_list=vip
    )
    bystander = make_contact(phone=OTHER_PHONE, name="Bystander Person", contact_list=vip)
    campaign = make_campaign(phone_number=number, lists=[vip])
    # A live journey they are in, waiting for a reply: their event's properties quote them,
    # and their replies become its events too.
    journey = journey_live(
        number,
        {
            "entry": {"type": "event", "event": "cart_updated"},
            "steps": [{"id": "reply", "type": "wait", "for_reply": True, "timeout": {"hours": 1}}],
        },
        name="erasure",
    )
    journey.test_contacts.add(contact)
    events_record(
        api_key_id=None,
        items=[{"phone": PHONE, "name": "cart_updated", "properties": {"who": NAME, "tel": PHONE}}],
        idempotency_key=None,
    )
    journeys_run()
    now = timezone.now()
    sent = make_message(
        campaign=campaign,
        contact=contact,
        to=PHONE,
        status=MessageStatus.SENT,
        wamid=CAMPAIGN_WAMID,
        wa_id=DIGITS,
        params={"body": [NAME]},
        sent_at=now - timedelta(minutes=5),
    )
    make_message(
        campaign=campaign,
        contact=bystander,
        to=OTHER_PHONE,
        status=MessageStatus.DELIVERED,
        wamid="wamid.BYSTANDER",
        params={"body": ["Bystander Person"]},
    )
    later = make_campaign(phone_number=number, template=campaign.template, lists=[vip])
    pending = make_message(campaign=later, contact=contact, to=PHONE, params={"body": [NAME]})
    api_key, _ = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
    failed = Message.objects.create(
        kind=MessageKind.TRANSACTIONAL,
        phone_number=number,
        to=PHONE,
        text=f"Hello {NAME}, your code is 1234",
        status=MessageStatus.DEAD,
        next_attempt_at=now,
        api_key=api_key,
        idempotency_key=f"otp-{PHONE}",
        request_sha256="a" * 64,
        last_error_code=131026,
        last_error_title="Message undeliverable",
        last_error_details=f"{PHONE} is not on WhatsApp",
        error_history=[{"at": now.isoformat(), "code": 131026, "details": f"to {PHONE}"}],
    )
    DeadLetter.objects.create(
        message=failed,
        phone_number=number,
        error_code=131026,
        payload={"to": DIGITS, "type": "text", "text": {"body": f"Hello {NAME}"}},
        attempts=[{"code": 131026, "details": f"{PHONE} unreachable", "at": now.isoformat()}],
        note=f"called {PHONE}, no answer",
    )
    # What Meta calls back: the campaign message delivered, a status for a message whose
    # wamid nothing holds yet, a text reply and a tap on the campaign message.
    received(status(wamid=CAMPAIGN_WAMID, callback=f"wb:{sent.pk}"))
    received(status(wamid="wamid.NOT-YET-KNOWN", callback=None, state="sent"))
    received(inbound_text(wamid="wamid.TEXT-FROM-ZULEIDE", text=f"I am {NAME}, stop"))
    received(quick_reply(wamid="wamid.TAP-FROM-ZULEIDE", answers=CAMPAIGN_WAMID, text="Yes"))
    Click.objects.create(
        message=sent, campaign=campaign, contact=contact, clicked_at=now, user_agent="Phone/1"
    )
    Conversion.objects.create(
        contact=contact,
        phone=PHONE,
        user_id=USER_ID,
        event="purchase",
        value=10,
        currency="BRL",
        occurred_at=now,
        source="api",
        dedupe_key="order-1",
        message=sent,
        campaign=campaign,
        attributed_by="delivered",
    )
    PoolHome.objects.create(contact=contact, account=number.account, phone_number=number)
    MarketingHold.objects.create(contact=contact, until=now, since=now)
    journeys_run()  # the reply ends the wait: the history quotes what they said
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO delivery_eventoutbox (event_type, message_id, data)"
            " VALUES ('message.delivered', %s, %s::jsonb), ('contact.opted_out', NULL, %s::jsonb)",
            [
                sent.pk,
                json.dumps({"message_id": sent.pk, "to": PHONE, "status": "delivered"}),
                json.dumps({"contact_id": contact.pk, "phone": PHONE, "user_id": USER_ID}),
            ],
        )
    admin = User.objects.create_user("agent")
    LogEntry.objects.create(
        user=admin,
        content_type=ContentType.objects.get_for_model(Contact),
        object_id=str(contact.pk),
        object_repr=str(contact),
        action_flag=CHANGE,
        change_message="[]",
    )
    get_redis().zadd(reach_key(number.account.waba_id), {PHONE: 1_000, OTHER_PHONE: 2_000})
    return {
        "number": number,
        "contact": contact,
        "bystander": bystander,
        "campaign": campaign,
        "sent": sent,
        "pending": pending,
        "failed": failed,
    }


def test_the_fixture_puts_the_person_everywhere(person: dict[str, Any]) -> None:
    """The search below finds what it looks for: before the erasure, the person is in
    every kind of row the erasure must reach."""
    held = set(holdings(DIGITS)) | set(holdings(PHONE)) | set(holdings(NAME))
    assert {
        "campaigns_contact.phone",
        "delivery_message.to",
        "delivery_message.params",
        "delivery_message.text",
        "delivery_message.wa_id",
        "delivery_deadletter.payload",
        "delivery_conversion.phone",
        "delivery_servicewindow.user",
        "delivery_eventoutbox.data",
        "webhooks_inboundmessage.from_phone",
        "webhooks_inboundmessage.payload",
        "webhooks_unmatchedstatus.payload",
        "webhooks_webhookevent.body",
        "django_admin_log.object_repr",
        "journeys_contactevent.properties",
        "journeys_journeyinstance.properties",
        "journeys_journeyhistory.detail",
    } <= held, held
    assert InboundMessage.objects.filter(contact=person["contact"]).count() == 2


def test_after_erasure_no_table_holds_them_and_the_counts_are_unchanged(
    person: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    campaign = person["campaign"]
    counts = campaigns_status_counts(campaign_ids=[campaign.pk])
    taps = campaign_button_taps(campaign.pk)
    taps_by_arm = campaign_button_taps_by_variant(campaign.pk)
    replies = InboundMessage.objects.filter(campaign=campaign).count()
    messages = Message.objects.count()
    conversions = Conversion.objects.filter(campaign=campaign).count()
    clicks = Click.objects.filter(campaign=campaign).count()
    assert taps and taps_by_arm and replies

    with django_capture_on_commit_callbacks(execute=True):  # the Redis budget, after commit
        result = contact_erase(contact_id=person["contact"].pk)

    for needle in NEEDLES:
        assert holdings(needle) == [], needle
    assert holdings(OTHER_PHONE), "the bystander is untouched"
    assert holdings("Bystander Person")
    assert not Contact.objects.filter(pk=person["contact"].pk).exists()
    assert ListMembership.objects.filter(contact=person["bystander"]).exists()
    # History kept and still adding up.
    assert campaigns_status_counts(campaign_ids=[campaign.pk]) == counts
    assert campaign_button_taps(campaign.pk) == taps
    assert campaign_button_taps_by_variant(campaign.pk) == taps_by_arm
    assert InboundMessage.objects.filter(campaign=campaign).count() == replies
    assert Message.objects.count() == messages
    assert Conversion.objects.filter(campaign=campaign).count() == conversions
    assert Click.objects.filter(campaign=campaign).count() == clicks
    # Under one placeholder that leads back to nobody.
    placeholder = result.placeholder
    sent = Message.objects.get(pk=person["sent"].pk)
    assert sent.to == placeholder and sent.contact_id is None
    assert sent.wamid == f"{placeholder}.{sent.pk}"
    assert sent.status == MessageStatus.DELIVERED  # what Meta said, kept
    assert Message.objects.get(pk=person["failed"].pk).last_error_code == 131026
    pending = Message.objects.get(pk=person["pending"].pk)
    assert (pending.status, pending.skip_reason) == (MessageStatus.SKIPPED, ERASED_REASON)
    assert set(InboundMessage.objects.values_list("from_phone", flat=True)) == {placeholder}
    assert not ServiceWindow.objects.exists() and not PoolHome.objects.exists()
    assert not UnmatchedStatus.objects.exists()
    assert WebhookEvent.objects.count() == 4  # kept, redacted: a redelivery is still known
    reach = get_redis().zrange(reach_key(person["number"].account.waba_id), 0, -1)
    assert sorted(reach) == sorted([placeholder.encode(), OTHER_PHONE.encode()])
    assert result.messages == 3 and result.replies == 2 and result.list_memberships == 1
    assert result.dead_letters == 1 and result.clicks == 1 and result.conversions == 1
    with pytest.raises(ContactNotFound):
        contact_erase(contact_id=person["contact"].pk)


def test_a_late_status_callback_finds_the_row_and_writes_no_number_back(
    person: dict[str, Any],
) -> None:
    contact_erase(contact_id=person["contact"].pk)
    sent = person["sent"]
    received(status(wamid=CAMPAIGN_WAMID, callback=f"wb:{sent.pk}", state="read"))
    sent = Message.objects.get(pk=sent.pk)
    assert sent.status == MessageStatus.READ
    assert sent.wamid.startswith("erased-") and sent.wa_id == ""


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def test_the_cli_erases_by_phone_user_id_or_id() -> None:
    by_phone = make_contact(phone=PHONE, name=NAME)
    by_user_id = make_contact(phone=None, user_id=USER_ID)
    by_id = make_contact(phone=OTHER_PHONE)
    for argument, contact in (
        ("+55 11 98765-0123", by_phone),
        (USER_ID, by_user_id),
        (str(by_id.pk), by_id),
    ):
        result = json.loads(run("contact", "erase", argument))
        assert result["contact_id"] == contact.pk
        assert not Contact.objects.filter(pk=contact.pk).exists()
    for missing in (PHONE, "12345", "not a contact"):
        with pytest.raises(CommandError):
            run("contact", "erase", missing)


def test_replies_keep_being_placed_on_their_message(person: dict[str, Any]) -> None:
    contact_erase(contact_id=person["contact"].pk)
    tap = InboundMessage.objects.get(type="button")
    assert tap.context_wamid == Message.objects.get(pk=person["sent"].pk).wamid
    assert tap.text == "Yes"  # the button's words, the business's
    text = InboundMessage.objects.get(type="text")
    assert text.text == "" and text.profile_name == ""
    assert copy.deepcopy(text.payload) != {}
