"""Button answers: a quick-reply tap counts for the campaign of the message it answers
(``context.id``), not merely the campaign that wrote last; the report's readers count taps
per button and people per A/B arm.

The taps are Meta's documented payloads (tests/fixtures/real/inbound/
meta_doc_button_quick_reply.json and meta_doc_interactive_button_reply.json), with only the
answered wamid, the sender and the button changed.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Campaign, Contact
from delivery.engagement.buttons import (
    ButtonTaps,
    campaign_button_taps,
    campaign_button_taps_by_variant,
    template_marketing_clicks,
)
from tests.factories import (
    make_campaign,
    make_contact,
    make_message,
    make_phone_number,
    make_template,
)
from tests.webhooks.support import store_and_apply
from webhooks.models import InboundMessage, MarketingClick

pytestmark = pytest.mark.django_db

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "inbound"
OUR_NUMBER_ID = "106540352242922"  # the fixtures' phone_number_id


def real(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())
    return data


def tap(
    *, answers: str | None, sender: str | None, text: str, payload: str = "", wamid: str
) -> dict[str, Any]:
    """Meta's quick-reply tap, answering ``answers`` (no ``context`` when None)."""
    body = copy.deepcopy(real("meta_doc_button_quick_reply"))
    value = body["entry"][0]["changes"][0]["value"]
    sender = sender or ""
    value["contacts"][0]["wa_id"] = sender.lstrip("+")
    message = value["messages"][0]
    message.update(id=wamid, button={"payload": payload or text, "text": text})
    message["from"] = sender.lstrip("+")
    if answers is None:
        del message["context"]
    else:
        message["context"]["id"] = answers
    return body


def sent(campaign: Campaign, contact: Contact, wamid: str, *, ago: int, **fields: Any) -> Any:
    return make_message(
        campaign=campaign,
        to=contact.phone,
        contact=contact,
        wamid=wamid,
        status="read",
        sent_at=timezone.now() - timedelta(minutes=ago),
        **fields,
    )


def campaign_of(number: Any, name: str) -> Campaign:
    template = make_template(account=number.account, name=f"t_{name}")
    return make_campaign(phone_number=number, template=template, name=name)


@pytest.fixture
def number() -> Any:
    return make_phone_number(phone_number_id=OUR_NUMBER_ID)


def test_a_tap_counts_for_the_campaign_of_the_message_it_answers(number: Any) -> None:
    ana = make_contact(phone="+16505551234")
    older = campaign_of(number, "spring")
    newer = campaign_of(number, "summer")
    sent(older, ana, "wamid.SPRING", ago=60)
    sent(newer, ana, "wamid.SUMMER", ago=5)  # the campaign that wrote last

    store_and_apply(tap(answers="wamid.SPRING", sender=ana.phone, text="Yes", wamid="wamid.T1"))

    row = InboundMessage.objects.get(wamid="wamid.T1")
    assert (row.campaign_id, row.context_wamid) == (older.pk, "wamid.SPRING")
    assert (row.type, row.text, row.button_payload, row.contact_id) == (
        "button",
        "Yes",
        "Yes",
        ana.pk,
    )


def test_without_a_known_answered_message_the_campaign_that_wrote_last_keeps_it(
    number: Any,
) -> None:
    ana = make_contact(phone="+16505551234")
    older = campaign_of(number, "older")
    newer = campaign_of(number, "newer")
    sent(older, ana, "wamid.OLD", ago=60)
    sent(newer, ana, "wamid.NEW", ago=5)

    # No context at all, and a context naming a message that is not ours.
    store_and_apply(tap(answers=None, sender=ana.phone, text="Yes", wamid="wamid.T1"))
    store_and_apply(tap(answers="wamid.ELSEWHERE", sender=ana.phone, text="No", wamid="wamid.T2"))

    rows = dict(InboundMessage.objects.values_list("wamid", "campaign_id"))
    assert rows == {"wamid.T1": newer.pk, "wamid.T2": newer.pk}
    assert InboundMessage.objects.get(wamid="wamid.T2").context_wamid == "wamid.ELSEWHERE"


def test_an_interactive_reply_button_names_its_message_too(number: Any) -> None:
    ana = make_contact(phone="+16505551234")
    campaign = make_campaign(phone_number=number)
    answered = "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MEM2RUJFNkI0RENGQTVDRjUA"  # as published
    sent(campaign, ana, answered, ago=5)

    store_and_apply(real("meta_doc_interactive_button_reply"))

    row = InboundMessage.objects.get()
    assert (row.type, row.text, row.button_payload) == ("interactive", "Cancel", "cancel-button")
    assert (row.context_wamid, row.campaign_id) == (answered, campaign.pk)


def test_taps_are_counted_per_button_and_people_per_arm(number: Any) -> None:
    campaign = make_campaign(phone_number=number)
    other = campaign_of(number, "other")
    people = [make_contact(phone=f"+1650555{1000 + i}") for i in range(5)]
    # Arms: people 0 and 1 got A (0), 2 and 3 got B (1), 4 the winner (no arm).
    for i, person in enumerate(people):
        sent(campaign, person, f"wamid.M{i}", ago=10, variant=[0, 0, 1, 1, None][i])
    sent(other, people[0], "wamid.OTHER", ago=1)

    taps = [
        (0, "Yes", "wamid.M0"),
        (0, "Yes", "wamid.M0"),  # Ana taps twice: two taps, one person
        (1, "No", "wamid.M1"),
        (2, "Yes", "wamid.M2"),
        (4, "Yes", "wamid.M4"),
        (0, "Stop promos", "wamid.OTHER"),  # the other campaign's
    ]
    for n, (who, text, answers) in enumerate(taps):
        body = tap(answers=answers, sender=people[who].phone or "", text=text, wamid=f"wamid.T{n}")
        store_and_apply(body)
    # A tap stored without a context (before the column): placed by the contact's message.
    InboundMessage.objects.create(
        wamid="wamid.OLD",
        from_phone=people[3].phone or "",
        type="button",
        text="No",
        button_payload="No",
        sent_at=timezone.now(),
        contact=people[3],
        campaign=campaign,
        payload={},
    )
    # A text reply is not a tap.
    InboundMessage.objects.create(
        wamid="wamid.TXT",
        from_phone=people[1].phone or "",
        type="text",
        text="Yes",
        sent_at=timezone.now(),
        contact=people[1],
        campaign=campaign,
        payload={},
    )

    assert campaign_button_taps(campaign.pk) == [
        ButtonTaps(text="Yes", payload="Yes", taps=4, people=3),
        ButtonTaps(text="No", payload="No", taps=2, people=2),
    ]
    assert campaign_button_taps_by_variant(campaign.pk) == {0: 2, 1: 2, None: 1}
    assert campaign_button_taps(other.pk) == [ButtonTaps("Stop promos", "Stop promos", 1, 1)]
    assert campaign_button_taps_by_variant(other.pk) == {None: 1}


def test_marketing_clicks_are_counted_for_the_only_template_the_number_sent(number: Any) -> None:
    """Meta's click names no message: it is a template's only when the number sent no other
    template through the Marketing Messages API in the week before it."""
    now = timezone.now()
    spring = campaign_of(number, "spring")
    summer = campaign_of(number, "summer")
    cloud = campaign_of(number, "cloud")
    people = [make_contact(phone=f"+1650555{2000 + i}") for i in range(3)]

    def mm_send(campaign: Campaign, person: Contact, days_ago: int, route: str) -> None:
        make_message(
            campaign=campaign,
            to=person.phone,
            contact=person,
            status="delivered",
            sent_at=now - timedelta(days=days_ago),
            send_route=route,
        )

    mm_send(spring, people[0], 30, "marketing_messages")
    mm_send(summer, people[1], 10, "rerouted_to_marketing_messages")
    mm_send(cloud, people[2], 1, "")  # through /messages: Meta reports no click for it

    def click(days_ago: float) -> None:
        MarketingClick.objects.create(
            phone_number_id=OUR_NUMBER_ID,
            action_type="marketing_messages_link_click",
            click_id=f"c{days_ago}",
            clicked_at=now - timedelta(days=days_ago),
            payload={},
        )

    click(28)  # two days after spring's send: spring's
    click(27)  # spring's
    click(9)  # summer's (spring's send is 21 days older)
    click(0.5)  # summer's send 9.5 days before: outside Meta's week, nobody's
    ids = [spring.template_id, summer.template_id, cloud.template_id]

    assert template_marketing_clicks(ids, now - timedelta(days=60)) == {
        spring.template_id: 2,
        summer.template_id: 1,
    }
    assert template_marketing_clicks([summer.template_id], now - timedelta(days=20)) == {
        summer.template_id: 1
    }
    # A second Marketing Messages template that week makes the click anyone's.
    mm_send(cloud, people[0], 10, "marketing_messages")
    assert template_marketing_clicks(ids, now - timedelta(days=20)) == {None: 1}

    # The report says it in a sentence, for an account sending through the API.
    from whatsblast.admin.campaign_engagement import mm_clicks_text

    Campaign.objects.filter(pk=spring.pk).update(started_at=now - timedelta(days=31))
    Campaign.objects.filter(pk=summer.pk).update(started_at=now - timedelta(days=11))
    spring.refresh_from_db()
    summer.refresh_from_db()
    account = spring.template.account
    account.marketing_messages_api = True
    account.save(update_fields=["marketing_messages_api"])
    assert mm_clicks_text(spring) == (
        "The Marketing Messages API reported 2 link clicks for this campaign's templates "
        "since its launch. Meta's click names no message or person: counted per template."
    )
    assert mm_clicks_text(summer) == (
        "The Marketing Messages API reported 0 link clicks for this campaign's templates "
        "since its launch, and 1 more that another template the number sent may have "
        "earned. Meta's click names no message or person: counted per template."
    )
    account.marketing_messages_api = False
    account.save(update_fields=["marketing_messages_api"])
    assert mm_clicks_text(spring) == ""
