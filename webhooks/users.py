"""The user's own choices and identity: ``user_preferences`` and business-scoped user ids.

``user_preferences`` is Meta telling us the user tapped "stop marketing messages" (or
"resume") in WhatsApp itself: a stop is an opt-out as binding as a STOP reply. Status and
message callbacks name the user's business-scoped user id beside their phone; recording it
on the contact lets a later message from the bare user id find them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from campaigns.audience.identities import contacts_find, user_ids_learn
from campaigns.models import Contact
from delivery.consent import contacts_resume, contacts_stop
from delivery.models import Message
from webhooks.payloads import Inbound, StatusUpdate, UserPreference

logger = logging.getLogger(__name__)

PREFERENCE_STOP_REASON = "opted out in WhatsApp (user_preferences)"
MARKETING = "marketing_messages"


@dataclass(frozen=True)
class PreferencesReport:
    opted_out: int = 0
    opted_in: int = 0
    unknown: int = 0


def preferences_apply(*, preferences: Sequence[UserPreference], now: datetime) -> PreferencesReport:
    """Opt contacts out on ``stop`` and back in on ``resume``, in the order they were said."""
    if not preferences:
        return PreferencesReport()
    contacts = contacts_find(
        phones=(p.phone for p in preferences), user_ids=(p.user_id for p in preferences)
    )
    by_phone = {c.phone: c for c in contacts if c.phone}
    by_user = {c.user_id: c for c in contacts if c.user_id}
    # Per contact, the last word wins: stop then resume is a resume.
    last: dict[int, tuple[datetime, str]] = {}
    unknown = 0
    for pref in preferences:
        if pref.category and pref.category != MARKETING:
            continue
        contact = by_phone.get(pref.phone) or by_user.get(pref.user_id)
        if contact is None:
            unknown += 1
            continue
        said = pref.timestamp or now
        if pref.value in ("stop", "resume") and (
            contact.id not in last or last[contact.id][0] <= said
        ):
            last[contact.id] = (said, pref.value)
    stops = {cid: at for cid, (at, value) in last.items() if value == "stop"}
    resumes = {cid: at for cid, (at, value) in last.items() if value == "resume"}
    opted_in_at = {c.id: c.opted_in_at for c in contacts}
    stop_ids = [cid for cid, at in stops.items() if _after(at, opted_in_at[cid])]
    out = 0
    if stop_ids:
        out = contacts_stop(
            contact_ids=stop_ids, at=max(stops[c] for c in stop_ids), reason=PREFERENCE_STOP_REASON
        )
    back = sum(contacts_resume(contact_ids=[cid], at=at) for cid, at in resumes.items())
    if unknown:
        logger.info("%s user_preferences for people who are not contacts", unknown)
    return PreferencesReport(out, back, unknown)


def _after(said: datetime, opted_in_at: datetime | None) -> bool:
    return opted_in_at is None or opted_in_at < said


def user_ids_from_statuses(matched: Iterable[tuple[int, StatusUpdate]]) -> int:
    """Record the user id a status names on the contact its message was sent to."""
    by_message = {mid: s.recipient_user_id for mid, s in matched if s.recipient_user_id}
    if not by_message:
        return 0
    # Only contacts without one yet: after a message's first status, the rest cost nothing.
    contacts = Message.objects.filter(
        pk__in=list(by_message), contact__user_id__isnull=True
    ).values_list("pk", "contact_id")
    return user_ids_learn(
        by_contact={contact_id: by_message[pk] for pk, contact_id in contacts if contact_id}
    )


def user_ids_from_inbound(messages: Sequence[Inbound]) -> int:
    """A message from both a phone and a user id ties the two together on the contact."""
    both = [m for m in messages if m.from_phone and m.from_user_id]
    if not both:
        return 0
    by_phone = {c.phone: c for c in Contact.objects.filter(phone__in={m.from_phone for m in both})}
    pairs = {
        by_phone[m.from_phone].id: m.from_user_id
        for m in both
        if m.from_phone in by_phone and m.from_user_id and not by_phone[m.from_phone].user_id
    }
    return user_ids_learn(by_contact=pairs)
