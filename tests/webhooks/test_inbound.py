"""Inbound messages: stored once, linked to the campaign that last wrote, opt-outs honoured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Contact
from delivery.models import Message
from delivery.service_windows import service_window_open
from tests.factories import make_campaign, make_contact, make_phone_number
from tests.webhooks.support import fixture_json, make_message, store_and_apply
from webhooks.inbound import is_opt_out, keyword_normalise, opt_out_keywords
from webhooks.models import InboundMessage
from webhooks.payloads import Inbound
from webhooks.selectors import campaign_reply_counts

pytestmark = pytest.mark.django_db

SENDER = "+16505551234"
OUR_NUMBER_ID = "106540352242922"


def inbound(text: str = "", payload: str = "", kind: str = "text") -> Inbound:
    return Inbound("wamid.x", SENDER, kind, text, payload, "", None, OUR_NUMBER_ID)


def text_payload(body: str, wamid: str = "wamid.TEXT-1") -> dict[str, Any]:
    payload = fixture_json("inbound_text")
    message = payload["entry"][0]["changes"][0]["value"]["messages"][0]
    message["text"]["body"] = body
    message["id"] = wamid
    return payload


def test_an_inbound_text_is_stored_with_its_sender_time_and_text() -> None:
    number = make_phone_number(phone_number_id=OUR_NUMBER_ID)
    report = store_and_apply(fixture_json("inbound_text"))
    row = InboundMessage.objects.get()
    assert report.inbound == 1
    assert row.from_phone == SENDER
    assert row.type == "text"
    assert row.text == "Ça existe en bleu\u00a0? https://shop.example/p/42 @Sheena"
    assert row.profile_name == "Sheena Nelson"
    assert row.sent_at == datetime.fromtimestamp(1749416383, tz=UTC)
    assert row.phone_number == number
    assert row.is_opt_out is False
    assert row.contact is None and row.campaign is None


def test_a_redelivered_inbound_message_is_stored_once() -> None:
    store_and_apply(fixture_json("inbound_text"))
    payload = fixture_json("inbound_text")
    payload["entry"][0]["time"] = 1  # re-batched: another body, the same message
    assert store_and_apply(payload).inbound == 0
    assert InboundMessage.objects.count() == 1


def test_a_reply_counts_on_the_campaign_that_last_messaged_the_contact() -> None:
    number = make_phone_number(phone_number_id=OUR_NUMBER_ID)
    contact = make_contact(phone=SENDER)
    older = make_campaign(phone_number=number)
    latest = make_campaign(phone_number=number, template=older.template)
    unsent = make_campaign(phone_number=number, template=older.template)
    now = timezone.now()
    make_message(
        phone_number=number,
        campaign=older,
        contact=contact,
        to=SENDER,
        status="read",
        sent_at=now - timedelta(days=2),
    )
    make_message(
        phone_number=number,
        campaign=latest,
        contact=contact,
        to=SENDER,
        status="delivered",
        sent_at=now - timedelta(hours=1),
    )
    make_message(phone_number=number, campaign=unsent, contact=contact, to=SENDER, status="pending")
    store_and_apply(fixture_json("inbound_text"))
    row = InboundMessage.objects.get()
    assert (row.contact, row.campaign) == (contact, latest)
    counts = campaign_reply_counts(campaign_ids=[older.id, latest.id, unsent.id])
    assert counts == {latest.id: {"replies": 1, "opt_outs": 0}}


def test_a_reply_to_another_number_is_not_counted_on_this_numbers_campaign() -> None:
    ours = make_phone_number(phone_number_id=OUR_NUMBER_ID)
    other = make_phone_number(account=ours.account)
    contact = make_contact(phone=SENDER)
    campaign = make_campaign(phone_number=other)
    make_message(
        phone_number=other,
        campaign=campaign,
        contact=contact,
        to=SENDER,
        status="read",
        sent_at=timezone.now(),
    )
    store_and_apply(fixture_json("inbound_text"))
    assert InboundMessage.objects.get().campaign is None


@pytest.mark.parametrize(
    "body",
    ["STOP", " stop ", "Stop!", "parar", "SAIR", "Arrêter", "ARRETER", "stopp", "Stop promotions"],
)
def test_a_stop_keyword_opts_the_contact_out_and_skips_waiting_campaign_messages(
    body: str,
) -> None:
    number = make_phone_number(phone_number_id=OUR_NUMBER_ID)
    contact = make_contact(phone=SENDER)
    campaign = make_campaign(phone_number=number)
    waiting = make_message(
        phone_number=number, campaign=campaign, contact=contact, to=SENDER, status="pending"
    )
    otp = make_message(
        phone_number=number, contact=contact, to=SENDER, status="pending", kind="transactional"
    )
    report = store_and_apply(text_payload(body))
    contact.refresh_from_db()
    assert report.opt_outs == 1
    assert contact.opted_out_at is not None
    assert InboundMessage.objects.get().is_opt_out is True
    assert Message.objects.get(pk=waiting.pk).status == "skipped"
    assert Message.objects.get(pk=otp.pk).status == "pending"  # transactional still goes


@pytest.mark.parametrize("body", ["stop sending me the blue one", "STOP?? why", "stopped", ""])
def test_a_message_that_merely_contains_stop_does_not_opt_out(body: str) -> None:
    contact = make_contact(phone=SENDER)
    store_and_apply(text_payload(body))
    contact.refresh_from_db()
    assert contact.opted_out_at is None


def test_a_stop_button_opts_out_by_its_payload() -> None:
    contact = make_contact(phone=SENDER)
    store_and_apply(fixture_json("inbound_stop_button"))
    contact.refresh_from_db()
    row = InboundMessage.objects.get()
    assert (row.type, row.button_payload, row.text) == ("button", "STOP_PROMO", "Stop promotions")
    assert row.is_opt_out is True
    assert contact.opted_out_at is not None


def test_an_opt_out_from_an_unknown_sender_is_recorded_but_creates_no_contact() -> None:
    store_and_apply(fixture_json("inbound_stop_button"))
    assert InboundMessage.objects.get().is_opt_out is True
    assert not Contact.objects.exists()


def test_an_earlier_opt_out_time_is_kept() -> None:
    first = timezone.now() - timedelta(days=3)
    contact = make_contact(phone=SENDER, opted_out_at=first)
    store_and_apply(text_payload("STOP"))
    contact.refresh_from_db()
    assert contact.opted_out_at == first


def test_a_stop_older_than_a_later_opt_in_is_history() -> None:
    contact = make_contact(phone=SENDER, opted_in_at=timezone.now())
    store_and_apply(text_payload("STOP"))  # its timestamp is from 2025
    contact.refresh_from_db()
    assert contact.opted_out_at is None


def test_keywords_come_from_settings(settings: Any) -> None:
    settings.OPT_OUT_KEYWORDS = ["ABMELDEN", "Désinscrire"]
    keywords = opt_out_keywords()
    assert is_opt_out(inbound("abmelden"), keywords)
    assert is_opt_out(inbound("DESINSCRIRE"), keywords)
    assert not is_opt_out(inbound("STOP"), keywords)


def test_keyword_normalisation_ignores_case_accents_spacing_and_edge_punctuation() -> None:
    assert keyword_normalise("  ¡Arrêter!  ") == "arreter"
    assert keyword_normalise("STOP_PROMO") == "stop promo"
    assert keyword_normalise("Stop   promotions.") == "stop promotions"


@pytest.mark.parametrize("user_id", ["US.13491208655302741918", "BR.ENT." + "7" * 116])
def test_a_message_opens_the_service_window_under_the_phone_and_the_user_id(user_id: str) -> None:
    """The API may name the user either way; a user id as long as the parser takes (123)
    is recorded like a short one, not a batch the database refuses."""
    number = make_phone_number(phone_number_id=OUR_NUMBER_ID)
    payload = text_payload("hello")
    value = payload["entry"][0]["changes"][0]["value"]
    value["messages"][0]["from_user_id"] = user_id
    value["messages"][0]["timestamp"] = str(int(timezone.now().timestamp()) - 60)
    report = store_and_apply(payload)
    assert report.inbound == 1 and report.failed == 0
    assert service_window_open(phone_number_id=number.pk, user=SENDER)
    assert service_window_open(phone_number_id=number.pk, user=user_id)
    assert not service_window_open(phone_number_id=number.pk, user="US.1")
