"""One person's page, and every list that shows a phone finding them as people say it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, Contact, ContactList, ListMembership
from delivery.consent import contacts_resume, contacts_stop
from delivery.messages import SEND_OPT_OUT_REASON, settlements_record
from delivery.models import DeadLetter, Message
from tests.factories import make_campaign, make_contact, make_message, make_phone_number
from tests.ui.support import PASSWORD, dead_message, role_user
from webhooks.inbound import OPT_OUT_SKIP_REASON
from webhooks.models import InboundMessage
from webhooks.users import PREFERENCE_STOP_REASON
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db

ANA = "+5511987654321"
BO = "+5511912345678"
SAID = "(11) 98765-4321"
TEMPLATE = "promo"  # make_campaign's template


@dataclass
class People:
    ana: Contact
    bo: Contact
    campaign: Campaign
    message: Message
    letter: DeadLetter
    reply: InboundMessage


def people() -> People:
    # The business's own number is Brazilian: national numbers are read as Brazil's.
    number = make_phone_number(display_phone_number="+55 11 4000-1234")
    campaign = make_campaign(phone_number=number, name="Spring sale", status="completed")
    vip = ContactList.objects.create(name="VIP")
    ana = make_contact(phone=ANA, name="Ana Souza", attributes={"plan": "gold", "city": "SP"})
    ListMembership.objects.create(contact_list=vip, contact=ana)
    bo = make_contact(phone=BO, name="Bo Lima")
    message = make_message(
        campaign=campaign, to=ANA, contact=ana, status="delivered", sent_at=timezone.now()
    )
    make_message(campaign=campaign, to=BO, contact=bo, status="sent")
    other = make_campaign(
        phone_number=number, template=campaign.template, name="Winter sale", status="completed"
    )
    letter = dead_message(campaign=other, to=ANA, contact=ana)
    dead_message(campaign=other, to=BO, contact=bo)
    reply = InboundMessage.objects.create(
        wamid="wamid.ana-stop",
        from_phone=ANA,
        type="text",
        text="STOP please",
        sent_at=timezone.now(),
        phone_number=number,
        contact=ana,
        campaign=campaign,
        is_opt_out=True,
        payload={},
    )
    InboundMessage.objects.create(
        wamid="wamid.bo-hi",
        from_phone=BO,
        type="text",
        text="hi",
        sent_at=timezone.now(),
        contact=bo,
        payload={},
    )
    contacts_stop(contact_ids=[ana.pk], at=timezone.now(), reason=OPT_OUT_SKIP_REASON)
    return People(ana, bo, campaign, message, letter, reply)


def logged_in(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


def customer_page(key: str = ANA) -> str:
    return reverse("wb_customer", args=[key])


@pytest.mark.parametrize(
    ("changelist", "of"),
    [
        ("admin:delivery_message_changelist", lambda p: {p.message.pk, p.letter.message_id}),
        ("admin:campaigns_contact_changelist", lambda p: {p.ana.pk}),
        ("admin:webhooks_inboundmessage_changelist", lambda p: {p.reply.pk}),
        ("admin:delivery_deadletter_changelist", lambda p: {p.letter.pk}),
    ],
)
@pytest.mark.parametrize("typed", [SAID, "+55 11 98765-4321", "0055 11 98765 4321", ANA])
def test_every_list_finds_the_customer_as_they_say_their_number_and_links_to_their_page(
    changelist: str, of: Any, typed: str
) -> None:
    found = people()
    response = logged_in(SUPPORT).get(reverse(changelist), {"q": typed})
    assert response.status_code == 200
    assert {row.pk for row in response.context["cl"].result_list} == of(found), typed
    assert f'href="{customer_page()}"' in response.content.decode()


def test_a_name_and_a_wamid_are_still_searched_as_before() -> None:
    found = people()
    support = logged_in(SUPPORT)
    contacts = support.get(reverse("admin:campaigns_contact_changelist"), {"q": "Souza"})
    assert [c.pk for c in contacts.context["cl"].result_list] == [found.ana.pk]
    letters = support.get(reverse("admin:delivery_deadletter_changelist"), {"q": "Ana Souza"})
    assert [x.pk for x in letters.context["cl"].result_list] == [found.letter.pk]
    inbound = support.get(
        reverse("admin:webhooks_inboundmessage_changelist"), {"q": "wamid.ana-stop"}
    )
    assert [x.pk for x in inbound.context["cl"].result_list] == [found.reply.pk]


def test_the_messages_list_shows_the_template_and_the_change_pages_link_the_customer() -> None:
    found = people()
    support = logged_in(SUPPORT)
    listing = support.get(reverse("admin:delivery_message_changelist")).content.decode()
    assert "<th" in listing and "column-template_name" in listing
    assert f">{TEMPLATE}<" in listing
    message = support.get(reverse("admin:delivery_message_change", args=[found.message.pk]))
    assert f'href="{customer_page()}"' in message.content.decode()
    contact = support.get(reverse("admin:campaigns_contact_change", args=[found.ana.pk]))
    page = contact.content.decode()
    assert f'href="{customer_page()}"' in page and "opted out by reply" in page


def test_the_customer_page_shows_their_record_messages_replies_and_dead_letters() -> None:
    found = people()
    response = logged_in(SUPPORT).get(customer_page())
    assert response.status_code == 200
    page = response.content.decode()
    context = response.context
    assert context["contact"] == found.ana
    assert [m.pk for m in context["sent"]] == [found.letter.message_id, found.message.pk]
    assert [r.pk for r in context["replies"]] == [found.reply.pk]
    assert [row["letter"].pk for row in context["letters"]] == [found.letter.pk]
    # The record in words and tables, never raw JSON.
    assert "Ana Souza" in page and "VIP" in page
    assert "<th>plan</th><td>gold</td>" in page and '{"plan"' not in page
    assert "replied asking to stop" in page
    assert "Spring sale" in page and "Winter sale" in page and TEMPLATE in page
    assert "STOP please" in page
    # Nobody else's rows.
    assert BO not in page and "Bo Lima" not in page and "hi</td>" not in page
    # Support decides the dead letter here.
    assert 'value="requeue"' in page and 'value="discard"' in page
    assert reverse("admin:delivery_deadletter_change", args=[found.letter.pk]) in page


def test_marketing_reads_the_page_without_the_dead_letter_decisions() -> None:
    found = people()
    marketing = logged_in(MARKETING)
    response = marketing.get(customer_page())
    assert response.status_code == 200
    page = response.content.decode()
    assert "Ana Souza" in page and "Something went wrong" in page
    assert 'value="requeue"' not in page and 'value="discard"' not in page
    assert reverse("admin:delivery_deadletter_change", args=[found.letter.pk]) not in page
    refused = marketing.post(
        customer_page(), {"dead_letter": found.letter.pk, "decision": "requeue", "note": ""}
    )
    assert refused.status_code == 403
    assert DeadLetter.objects.get(pk=found.letter.pk).status == "open"


def test_the_page_is_refused_without_a_role_and_asks_for_a_login_without_a_user() -> None:
    people()
    anonymous = Client().get(customer_page())
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    nobody = get_user_model().objects.create_user("nobody", password=PASSWORD, is_staff=True)
    client = Client()
    client.force_login(nobody)
    assert client.get(customer_page()).status_code == 403


def test_a_number_as_people_say_it_or_a_user_id_leads_to_the_page_and_a_stranger_to_404() -> None:
    found = people()
    Contact.objects.filter(pk=found.ana.pk).update(user_id="BR.1234567890")
    support = logged_in(SUPPORT)
    for key in (SAID, "BR.1234567890", "5511987654321"):
        response = support.get(customer_page(key))
        assert (response.status_code, response["Location"]) == (302, customer_page()), key
    assert support.get(customer_page("+5511900000000")).status_code == 200  # no contact
    assert support.get(customer_page("nobody at all")).status_code == 404


def test_support_requeues_and_discards_from_the_page_only_their_own_dead_letters() -> None:
    found = people()
    support = logged_in(SUPPORT)
    bo_letter = DeadLetter.objects.get(message__to=BO)
    stranger = support.post(
        customer_page(), {"dead_letter": bo_letter.pk, "decision": "discard", "note": "x"}
    )
    assert stranger.status_code == 404
    assert DeadLetter.objects.get(pk=bo_letter.pk).status == "open"
    done = support.post(
        customer_page(),
        {"dead_letter": found.letter.pk, "decision": "requeue", "note": "call"},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == customer_page()
    assert "1 dead letter(s) requeued." in done.content.decode()
    assert DeadLetter.objects.get(pk=found.letter.pk).status == "requeued"
    assert Message.objects.get(pk=found.letter.message_id).status == "pending"
    page = done.content.decode()
    assert "Requeued" in page and 'value="requeue"' not in page


def test_an_opt_out_keeps_how_it_came_until_the_customer_comes_back() -> None:
    ana = make_contact(phone=ANA)
    support = logged_in(SUPPORT)
    contacts_stop(contact_ids=[ana.pk], at=timezone.now(), reason=PREFERENCE_STOP_REASON)
    assert (
        "chose to stop marketing messages in WhatsApp"
        in support.get(customer_page()).content.decode()
    )
    contacts_resume(contact_ids=[ana.pk], at=timezone.now())
    ana.refresh_from_db()
    assert (ana.opted_out_at, ana.opted_out_reason) == (None, "")
    # A send Meta refused with 131050: the settlement opts them out and says why.
    settlements_record([], opted_out_contact_ids=[ana.pk])
    ana.refresh_from_db()
    assert ana.opted_out_reason == SEND_OPT_OUT_REASON
    assert "(131050)" in support.get(customer_page()).content.decode()
    Contact.objects.filter(pk=ana.pk).update(opted_out_reason="")
    assert "no reason recorded" in support.get(customer_page()).content.decode()
