"""Keyword-only builders with sensible defaults for the test suite."""

from __future__ import annotations

import itertools
from typing import Any

from campaigns.models import (
    BusinessAccount,
    Campaign,
    Contact,
    ContactList,
    ListMembership,
    PhoneNumber,
    Template,
)

_seq = itertools.count(1)


def make_account(*, waba_id: str | None = None, **fields: Any) -> BusinessAccount:
    return BusinessAccount.objects.create(waba_id=waba_id or f"waba-{next(_seq)}", **fields)


def make_phone_number(
    *,
    phone_number_id: str | None = None,
    account: BusinessAccount | None = None,
    access_token: str = "test-token",
    **fields: Any,
) -> PhoneNumber:
    n = next(_seq)
    fields.setdefault("display_phone_number", f"+1555000{n:04d}")
    return PhoneNumber.objects.create(
        phone_number_id=phone_number_id or f"pn-{n}",
        account=account or make_account(),
        access_token=access_token,
        **fields,
    )


def make_template(
    *,
    account: BusinessAccount,
    name: str = "promo",
    language: str = "en_US",
    body_text: str = "Hi {{1}}",
    body_param_count: int = 1,
    **fields: Any,
) -> Template:
    return Template.objects.create(
        account=account,
        name=name,
        language=language,
        body_text=body_text,
        body_param_count=body_param_count,
        **fields,
    )


def make_contact_list(*, name: str | None = None) -> ContactList:
    return ContactList.objects.create(name=name or f"list-{next(_seq)}")


def make_contact(
    *, phone: str | None = None, contact_list: ContactList | None = None, **fields: Any
) -> Contact:
    contact = Contact.objects.create(phone=phone or f"+4915{next(_seq):09d}", **fields)
    if contact_list is not None:
        ListMembership.objects.create(contact_list=contact_list, contact=contact)
    return contact


def make_campaign(
    *,
    phone_number: PhoneNumber | None = None,
    template: Template | None = None,
    lists: list[ContactList] | None = None,
    **fields: Any,
) -> Campaign:
    phone_number = phone_number or make_phone_number()
    template = template or make_template(account=phone_number.account)
    fields.setdefault("name", f"campaign-{next(_seq)}")
    fields.setdefault("param_mapping", {"body": {"1": {"field": "name"}}})
    campaign = Campaign.objects.create(phone_number=phone_number, template=template, **fields)
    if lists:
        campaign.lists.set(lists)
    return campaign


def make_message(*, campaign: Campaign, to: str | None = None, **fields: Any) -> Any:
    """A campaign message row; ``status`` and timestamps as given (engine not involved)."""
    from django.utils import timezone

    from delivery.models import Message

    fields.setdefault("next_attempt_at", timezone.now())
    return Message.objects.create(
        campaign=campaign,
        phone_number=campaign.phone_number,
        template=campaign.template,
        to=to or f"+4915{next(_seq):09d}",
        **fields,
    )
