"""One page for one person: their contact record, every message to them, their replies,
their opt-out, their dead letters and their journeys, at
``/admin/customer/<phone or user id>/``.

Support and Marketing open it from any list that shows a phone (Messages, Contacts,
Inbound, Dead letters) and from a message's or a contact's page. Support decides dead
letters here (requeue now, discard with a note) through ``delivery.dead_letters``; a role
without those permissions sees the entries without the buttons.

Every section is one query through an index: the contact by its unique phone or user id,
messages by ``contact_id`` (campaign sends) or, for the API's sends that carry no contact,
the partial index of API messages; replies by ``from_phone``'s index or ``contact_id``;
dead letters by the messages' ids. Each list shows its newest rows up to a cap, with the
total. The journeys section (for roles that read journeys' people) lists each journey the
person is or was in, the latest entry first: where they are now or why they left, when
their next step fires, and what happened to them and why (``journeys.reports``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from delivery.dead_letters import NOTE_MAX_LENGTH, dead_letter_discard, dead_letter_requeue
from delivery.models import DeadLetter, DeadLetterStatus
from journeys.models import HistoryKind
from journeys.reports import PersonJourney
from webhooks.customers import (
    Customer,
    customer_dead_letters,
    customer_find,
    customer_journeys,
    customer_messages,
    customer_replies,
    opt_out_source,
)
from whatsblast.admin.customer_links import customer_url
from whatsblast.admin.dead_letters import requeue_account
from whatsblast.admin.tables import json_table

# Who may open the page: both roles read contacts and messages.
VIEW_PERMISSIONS = ("campaigns.view_contact", "delivery.view_message")
# Who reads the journeys section: people's ways through journeys, and what happened.
JOURNEY_PERMISSIONS = ("journeys.view_journeyinstance", "journeys.view_journeyhistory")
# The newest rows each section shows; the total is given beside it.
SHOWN = 50


class DeadLetterDecisionForm(forms.Form):
    dead_letter = forms.IntegerField()
    decision = forms.ChoiceField(choices=[("requeue", "Requeue"), ("discard", "Discard")])
    note = forms.CharField(required=False, max_length=NOTE_MAX_LENGTH)


def customer_view(request: HttpRequest, key: str) -> HttpResponse:
    if not all(request.user.has_perm(p) for p in VIEW_PERMISSIONS):
        raise PermissionDenied
    customer = customer_find(key)
    if customer is None:
        raise Http404("No customer with this phone or user id.")
    if customer.key != key:  # "(11) 98765-4321" or the user id of a contact with a phone
        return HttpResponseRedirect(customer_url(customer.key))
    if request.method == "POST":
        _decide(request, customer)
        return HttpResponseRedirect(customer_url(customer.key))
    return TemplateResponse(request, "admin/customer.html", _context(request, customer))


customer = admin.site.admin_view(customer_view)


def _decide(request: HttpRequest, customer: Customer) -> None:
    """A requeue (now) or a discard of one of the person's dead letters."""
    form = DeadLetterDecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The note is too long.")
        return
    data = form.cleaned_data
    permission = f"delivery.{data['decision']}_deadletter"
    if not request.user.has_perm(permission):
        raise PermissionDenied
    # Only the person's own entries: the id in the form is not trusted to be theirs.
    letter = customer_dead_letters(customer).filter(pk=data["dead_letter"]).first()
    if letter is None:
        raise Http404("No such dead letter for this customer.")
    try:
        if data["decision"] == "requeue":
            decision = dead_letter_requeue(
                dead_letters=[letter], user=request.user, note=data["note"]
            )
            verb = "requeued"
        else:
            decision = dead_letter_discard(
                dead_letters=[letter], user=request.user, note=data["note"]
            )
            verb = "discarded"
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return
    level = messages.SUCCESS if decision.done else messages.WARNING
    messages.add_message(request, level, decision.summary(verb))


def _context(request: HttpRequest, customer: Customer) -> dict[str, Any]:
    user = request.user
    contact = customer.contact
    sent = customer_messages(customer).select_related("campaign", "template")
    replies = customer_replies(customer).select_related("campaign")
    letters = customer_dead_letters(customer).select_related("message", "campaign", "resolved_by")
    shown_letters = list(letters[:SHOWN])
    can_requeue = user.has_perm("delivery.requeue_deadletter")
    can_discard = user.has_perm("delivery.discard_deadletter")
    letter_rows = [_letter_row(letter, can_requeue, can_discard) for letter in shown_letters]
    title = contact.name if contact is not None and contact.name else customer.key
    return {
        **admin.site.each_context(request),
        "title": f"Customer: {title}",
        "customer": customer,
        "contact": contact,
        "contact_url": (
            reverse("admin:campaigns_contact_change", args=[contact.pk])
            if contact is not None
            else ""
        ),
        "lists": list(contact.lists.order_by("name").values_list("name", flat=True))
        if contact is not None
        else [],
        "attributes": json_table(contact.attributes, empty="None.") if contact else "",
        "opt_out_source": opt_out_source(contact) if contact is not None else "",
        "sent": list(sent[:SHOWN]),
        "sent_count": (sent_count := sent.count()),
        "sent_total": f"{sent_count:,}",
        "replies": list(replies[:SHOWN]),
        "reply_count": (reply_count := replies.count()),
        "reply_total": f"{reply_count:,}",
        "letters": letter_rows,
        "letter_count": (letter_count := letters.count()),
        "letter_total": f"{letter_count:,}",
        "shown": SHOWN,
        "may_see_dead_letters": user.has_perm("delivery.view_deadletter"),
        # The Decide column only while an entry shown is open and the viewer may decide it.
        "may_decide": any(row["can_requeue"] or row["can_discard"] for row in letter_rows),
        "may_see_campaigns": user.has_perm("campaigns.view_campaign"),
        "may_see_journeys": (
            may_see_journeys := all(user.has_perm(p) for p in JOURNEY_PERMISSIONS)
        ),
        "journeys": [_journey_row(j) for j in customer_journeys(customer)]
        if may_see_journeys
        else [],
        "may_open_journeys": user.has_perm("journeys.view_journey"),
    }


def _journey_row(person: PersonJourney) -> dict[str, Any]:
    return {
        "journey": person.journey,
        "instance": person.instance,
        "where": person.where,
        "next_at": person.next_at,
        "history": [
            {
                "at": h.at,
                "kind": h.kind,
                "label": HistoryKind(h.kind).label,
                "step": h.step,
                "detail": h.detail,
            }
            for h in person.history
        ],
    }


def _letter_row(letter: DeadLetter, can_requeue: bool, can_discard: bool) -> dict[str, Any]:
    is_open = letter.status == DeadLetterStatus.OPEN
    return {
        "letter": letter,
        "error": f"{letter.error_code or ''} {letter.error_title}".strip(),
        "account": requeue_account(letter, letter.message),
        "can_requeue": is_open and can_requeue,
        "can_discard": is_open and can_discard,
    }
