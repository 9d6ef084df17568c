"""manage.py contact erase PHONE-OR-ID: erase one person; prints a JSON summary.

The contact (by its phone in international form, its WhatsApp user id, or its id) is
deleted with everything that names the person; their messages and replies stay, under a
placeholder, so campaign counts and reports still add up (``webhooks/erasure.py``). It
cannot be undone.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from campaigns.audience.phones import PhoneNormaliser
from campaigns.models import Contact
from delivery.cloud.client import is_user_id
from webhooks.erasure import ContactNotFound, contact_erase
from whatsblast.management.base import SubcommandCommand

MAX_ID = 2**63 - 1


class Command(SubcommandCommand):
    help = "One contact: erase it (personal data removed, message history anonymised)."
    subcommands = {
        "erase": "Erase a contact by phone (+5511…), WhatsApp user id or id; prints a summary.",
    }

    def add_erase_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "contact", metavar="PHONE-OR-ID", help="+5511987654321, US.1349…, or the contact's id"
        )

    def handle_erase(self, options: dict[str, Any]) -> None:
        contact_id = _contact_id(options["contact"])
        try:
            result = contact_erase(contact_id=contact_id)
        except ContactNotFound:
            raise CommandError(f"no contact has the id {contact_id}") from None
        self.stdout.write(json.dumps(result.as_dict()))


def _contact_id(key: str) -> int:
    """The id of the contact ``key`` names: a phone with its +, a user id, or an id."""
    key = key.strip()
    if key.startswith("+"):
        phone, reason = PhoneNormaliser(None)(key)
        if phone is None:
            raise CommandError(f"{key!r} is not a phone number: {reason}")
        found = Contact.objects.filter(phone=phone).values_list("pk", flat=True).first()
    elif is_user_id(key):
        found = Contact.objects.filter(user_id=key).values_list("pk", flat=True).first()
    elif key.isascii() and key.isdigit() and int(key) <= MAX_ID:
        found = int(key)
    else:
        raise CommandError(
            f"{key!r} is neither a phone with its + and country code, a WhatsApp user id, "
            "nor a contact id"
        )
    if found is None:
        raise CommandError(f"no contact is {key}")
    return int(found)
