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
from django.utils import timezone

from campaigns.models import Contact

logger = logging.getLogger(__name__)


def contacts_find(*, phones: Iterable[str], user_ids: Iterable[str]) -> list[Contact]:
    """Contacts with any of these phones or user ids."""
    phones, user_ids = {p for p in phones if p}, {u for u in user_ids if u}
    if not phones and not user_ids:
        return []
    return list(Contact.objects.filter(Q(phone__in=phones) | Q(user_id__in=user_ids)))


@dataclass(frozen=True)
class Identity:
    """What Meta says of a user: their business-scoped user id, and with it, when given,
    their parent user id and username ("" for not given)."""

    user_id: str
    parent_user_id: str = ""
    username: str = ""


@dataclass(frozen=True)
class KnownIdentity:
    """What a contact holds now."""

    contact_id: int
    user_id: str | None
    parent_user_id: str | None
    username: str | None


def identity_news(known: KnownIdentity, seen: Identity) -> Identity | None:
    """What of ``seen`` the contact should record, or ``None`` when it changes nothing.

    A contact holding another user id keeps it: a user id names one person, and only Meta's
    ``user_changed_user_id`` moves it. The parent id and username belong to the user id
    they came with, so they are recorded only beside that id; one Meta leaves out is not
    taken as gone (a callback shows the username only when there is one to show).
    """
    if not seen.user_id or (known.user_id and known.user_id != seen.user_id):
        return None
    parent = seen.parent_user_id or known.parent_user_id or None
    username = seen.username or known.username or None
    if (known.user_id, known.parent_user_id, known.username) == (seen.user_id, parent, username):
        return None
    return seen


def contacts_known(
    *, phones: Iterable[str] = (), user_ids: Iterable[str] = ()
) -> dict[str, KnownIdentity]:
    """What the contacts with these phones or user ids hold, by phone and by user id."""
    known: dict[str, KnownIdentity] = {}
    for contact in contacts_find(phones=phones, user_ids=user_ids):
        held = KnownIdentity(contact.id, contact.user_id, contact.parent_user_id, contact.username)
        for key in (contact.phone, contact.user_id):
            if key:
                known[key] = held
    return known


# One statement for a batch of contacts. Its WHERE is the guard against the other writers
# (another applier thread, an import, user_changed_user_id) between our read and this write:
# a contact takes a user id only while it holds none and no other contact holds it (the
# unique index would refuse the whole batch), and a parent id or username only beside the
# user id it holds. A row that would not change is not written: a batch of statuses mostly
# repeats what its contacts already hold, and PostgreSQL writes a new row version even for
# an UPDATE that changes nothing.
_LEARN_SQL = """
UPDATE campaigns_contact AS c
   SET user_id = u.user_id,
       parent_user_id = COALESCE(u.parent_user_id, c.parent_user_id),
       username = COALESCE(u.username, c.username),
       updated_at = now()
  FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])
       AS u(id, user_id, parent_user_id, username)
 WHERE c.id = u.id
   AND (c.user_id = u.user_id
        OR (c.user_id IS NULL
            AND NOT EXISTS (SELECT 1 FROM campaigns_contact AS o WHERE o.user_id = u.user_id)))
   AND (c.user_id IS NULL
        OR c.parent_user_id IS DISTINCT FROM COALESCE(u.parent_user_id, c.parent_user_id)
        OR c.username IS DISTINCT FROM COALESCE(u.username, c.username))
"""


def identities_learn(*, by_contact: dict[int, Identity]) -> int:
    """Record each contact's user id (where it has none yet), parent user id and username;
    returns how many contacts changed.

    Callers pass only what ``identity_news`` says is new, so a batch that teaches nothing
    costs no write. A user id already held by another contact is left there (Meta's word
    would be needed to move it); a race with another writer over the same id loses quietly
    and learns it later.
    """
    chosen: dict[str, tuple[int, Identity]] = {}
    for contact_id, identity in sorted(by_contact.items()):
        if identity.user_id:
            chosen.setdefault(identity.user_id, (contact_id, identity))  # one contact an id
    if not chosen:
        return 0
    rows = list(chosen.values())
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                _LEARN_SQL,
                [
                    [contact_id for contact_id, _ in rows],
                    [identity.user_id for _, identity in rows],
                    [identity.parent_user_id or None for _, identity in rows],
                    [identity.username or None for _, identity in rows],
                ],
            )
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


def contact_user_id_change(
    *, old_user_id: str, new_user_id: str, phone: str = "", parent_user_id: str = ""
) -> NumberChange:
    """The user behind ``old_user_id`` now has ``new_user_id`` (``user_changed_user_id``).

    As for a changed number: the same row takes the new id (messages, lists and opt-out
    stay), and onto a contact that already holds it the opt-out passes on. The old id stays
    on the inbound messages that carried it. The parent user id the change names, if any,
    is recorded beside the new id.
    """
    contact = Contact.objects.filter(user_id=old_user_id).first() if old_user_id else None
    if contact is None and phone:
        contact = Contact.objects.filter(phone=phone).first()
    change = _identity_move(contact, "user_id", new_user_id)
    if parent_user_id and change.contact_id is not None:
        Contact.objects.filter(pk=change.contact_id, user_id=new_user_id).update(
            parent_user_id=parent_user_id, updated_at=timezone.now()
        )
    return change


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
