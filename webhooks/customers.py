"""One person as Support and Marketing look them up: their contact, and the messages,
replies and dead letters under any of their addresses (phone, user id), and the journeys
they are in or were in.

Selectors only: the customer page (``whatsblast.admin.customer``) shows them and takes its
decisions through ``delivery.dead_letters``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from campaigns.audience.phone_search import phone_search_candidates
from campaigns.models import Contact
from delivery.models import DeadLetter, Message
from journeys.reports import PersonJourney, contact_journeys
from webhooks.models import InboundMessage
from webhooks.users import PREFERENCE_STOP_REASON

# How an opt-out came, in words (the reasons ``delivery.consent`` records).
_OPT_OUT_SOURCES = {
    "opted out by reply": "replied asking to stop",
    PREFERENCE_STOP_REASON: "chose to stop marketing messages in WhatsApp",
}


@dataclass
class Customer:
    """Who the page is about: the contact when there is one, and every address of theirs
    (phone, user id) their messages and replies may be under."""

    key: str
    contact: Contact | None
    phones: list[str]
    recipients: list[str]


def customer_find(key: str) -> Customer | None:
    """The person a phone (in any format people type) or a user id names, or None."""
    key = key.strip()
    phones = [key] if key.startswith("+") else phone_search_candidates(key)
    contact = (
        Contact.objects.filter(Q(phone__in=phones) | Q(user_id=key)).order_by("id").first()
        if key
        else None
    )
    if contact is not None:
        phones = [contact.phone] if contact.phone else []
        recipients = [r for r in (contact.phone, contact.user_id) if r]
        return Customer(
            key=contact.recipient, contact=contact, phones=phones, recipients=recipients
        )
    if key.startswith("+") and phones:
        return Customer(key=key, contact=None, phones=[key], recipients=[key])
    return None


def customer_messages(customer: Customer) -> QuerySet[Message]:
    """Every message to the person, newest first: campaign sends by the contact's index,
    API sends (no contact) by their recipient among the API's rows (a partial index)."""
    match = Q(api_key__isnull=False, to__in=customer.recipients)
    if customer.contact is not None:
        match |= Q(contact_id=customer.contact.pk)
    return Message.objects.filter(match).order_by("-id")


def customer_replies(customer: Customer) -> QuerySet[InboundMessage]:
    """What the person wrote to the business numbers, newest first."""
    match = Q(from_phone__in=customer.phones) if customer.phones else Q(pk__in=[])
    if customer.contact is not None:
        match |= Q(contact_id=customer.contact.pk)
    return InboundMessage.objects.filter(match).order_by("-sent_at", "-id")


def customer_journeys(customer: Customer) -> list[PersonJourney]:
    """The journeys the person is in or was in, the latest entry first, each with where
    they are (or why they left), when their next step fires and what happened and why."""
    if customer.contact is None:
        return []
    return contact_journeys(customer.contact.pk)


def customer_dead_letters(customer: Customer) -> QuerySet[DeadLetter]:
    """The person's dead letters, newest first."""
    ids = customer_messages(customer).order_by().values("id")
    return DeadLetter.objects.filter(message_id__in=ids).order_by("-created_at", "-id")


def opt_out_source(contact: Contact) -> str:
    """Why the contact is opted out, in words; "" when they are not."""
    if contact.opted_out_at is None:
        return ""
    reason = contact.opted_out_reason
    if not reason:
        return "no reason recorded (set by hand, or before reasons were kept)"
    if "131050" in reason:
        return "Meta refused a message: the user stopped marketing messages (131050)"
    return _OPT_OUT_SOURCES.get(reason, reason)
