"""Who a contact is on WhatsApp: their phone, their business-scoped user id, or both.

Meta gives a user's business-scoped user id (BSUID) beside their phone in status and
message callbacks, and only the BSUID once the user hides their number behind a username.
Learning the pair while both are shown is what lets a later STOP from the bare user id find
the contact.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.models import Q

from campaigns.models import Contact

logger = logging.getLogger(__name__)


def contacts_find(*, phones: Iterable[str], user_ids: Iterable[str]) -> list[Contact]:
    """Contacts with any of these phones or user ids."""
    phones, user_ids = {p for p in phones if p}, {u for u in user_ids if u}
    if not phones and not user_ids:
        return []
    return list(Contact.objects.filter(Q(phone__in=phones) | Q(user_id__in=user_ids)))


_LEARN_SQL = """
UPDATE campaigns_contact AS c SET user_id = u.user_id, updated_at = now()
  FROM unnest(%s::bigint[], %s::text[]) AS u(id, user_id)
 WHERE c.id = u.id AND c.user_id IS NULL
   AND NOT EXISTS (SELECT 1 FROM campaigns_contact AS o WHERE o.user_id = u.user_id)
"""


def user_ids_learn(*, by_contact: dict[int, str]) -> int:
    """Record each contact's user id where it has none yet; returns how many were recorded.

    One statement for the batch (the applier calls it for every batch of statuses). A user
    id already held by another contact is left there (Meta's word would be needed to move
    it); a race with another applier over the same id loses quietly and learns it later.
    """
    pairs: dict[str, int] = {}
    for contact_id, user_id in sorted(by_contact.items()):
        pairs.setdefault(user_id, contact_id)  # one contact per user id
    if not pairs:
        return 0
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_LEARN_SQL, [list(pairs.values()), list(pairs)])
            return int(cursor.rowcount)
    except IntegrityError:
        logger.info("user ids not learnt this time: another writer took one")
        return 0


@dataclass(frozen=True)
class NumberChange:
    contact_id: int | None
    moved: bool
    reason: str


def contact_number_change(*, old_phone: str, new_phone: str, user_id: str = "") -> NumberChange:
    """The user behind ``old_phone`` now uses ``new_phone`` (Meta's ``user_changed_number``).

    The contact row keeps its id, so its messages, list memberships and opt-out stay with
    the person. When a contact with the new number already exists (imported later), the
    old one keeps its number and the opt-out passes to the new one: nobody who said stop is
    messaged again under another number.
    """
    contact = Contact.objects.filter(phone=old_phone).first() if old_phone else None
    if contact is None and user_id:
        contact = Contact.objects.filter(user_id=user_id).first()
    return _identity_move(contact, "phone", new_phone)


def contact_user_id_change(*, old_user_id: str, new_user_id: str, phone: str = "") -> NumberChange:
    """The user behind ``old_user_id`` now has ``new_user_id`` (``user_changed_user_id``).

    As for a changed number: the same row takes the new id (messages, lists and opt-out
    stay), and onto a contact that already holds it the opt-out passes on. The old id stays
    on the inbound messages that carried it.
    """
    contact = Contact.objects.filter(user_id=old_user_id).first() if old_user_id else None
    if contact is None and phone:
        contact = Contact.objects.filter(phone=phone).first()
    return _identity_move(contact, "user_id", new_user_id)


def _identity_move(contact: Contact | None, field: str, new_value: str) -> NumberChange:
    """Give ``contact`` the new phone or user id, or pass its opt-out to whoever holds it."""
    if contact is None or not new_value or getattr(contact, field) == new_value:
        return NumberChange(contact.id if contact else None, False, "no contact to move")
    existing = Contact.objects.filter(**{field: new_value}).first()
    if existing is not None:
        if contact.opted_out_at and not existing.opted_out_at:
            existing.opted_out_at = contact.opted_out_at
            existing.save(update_fields=["opted_out_at", "updated_at"])
        return NumberChange(existing.id, False, f"{new_value} is already a contact")
    old_value = getattr(contact, field)
    try:
        with transaction.atomic():
            setattr(contact, field, new_value)
            contact.save(update_fields=[field, "updated_at"])
    except IntegrityError:
        return NumberChange(contact.id, False, f"{new_value} was refused")
    logger.info("contact %s changed %s %s -> %s", contact.id, field, old_value, new_value)
    return NumberChange(contact.id, True, "moved")
