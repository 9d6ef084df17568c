"""The user's own choices and identity: ``user_preferences`` and business-scoped user ids.

``user_preferences`` is Meta telling us the user tapped "stop marketing messages" (or
"resume") in WhatsApp itself: a stop is an opt-out as binding as a STOP reply. Status and
message callbacks name the user's business-scoped user id (with its parent id and the
user's username) beside their phone; recording it on the contact lets a later message from
the bare user id find them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from campaigns.audience.identities import (
    Identity,
    KnownIdentity,
    contacts_find,
    contacts_known,
    identities_learn,
    identity_news,
)
from delivery.consent import contacts_resume, contacts_stop
from delivery.models import Message
from webhooks.payloads import Inbound, StatusUpdate, UserIdentity, UserPreference

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


def user_ids_from_contacts(
    matched: Sequence[tuple[int, StatusUpdate]], identities: Sequence[UserIdentity]
) -> int:
    """Record on contacts the user ids (parent ids, usernames) a batch's callbacks name in
    their value-level ``contacts[]`` and statuses.

    The user id of a send to a phone comes only in a status value's ``contacts[]`` (Meta,
    2026), found by its phone; an entry showing no phone, and a status's own
    ``recipient_user_id`` (a send to a user id), by the message the status answers. Returns
    how many contacts learnt something.
    """
    by_phone = {i.phone: _identity(i) for i in identities if i.phone}
    by_message = {
        message_id: Identity(s.recipient_user_id)
        for message_id, s in matched
        if s.recipient_user_id
    }
    if identities and not all(i.phone for i in identities):
        message_of = {s.wamid: message_id for message_id, s in matched if s.wamid}
        for i in identities:
            if not i.phone and i.wamid in message_of:
                by_message[message_of[i.wamid]] = _identity(i)  # the entry says more
    return _learn(by_phone=by_phone, by_message=by_message)


def user_ids_from_inbound(messages: Sequence[Inbound]) -> int:
    """A sender's user id, parent user id and username, onto the contact with their phone
    (tying the two together) or, with no phone shown, the contact with that user id."""
    by_phone: dict[str, Identity] = {}
    by_user: dict[str, Identity] = {}
    # A system message's sender is the user id being replaced (inbound.py moves it).
    senders = [m for m in messages if m.from_user_id and m.type != "system"]
    for m in sorted(senders, key=lambda m: m.timestamp or _EPOCH):  # the latest word wins
        seen = Identity(m.from_user_id, m.from_parent_user_id, m.username)
        if m.from_phone:
            by_phone[m.from_phone] = seen
        else:
            by_user[m.from_user_id] = seen
    return _learn(by_phone=by_phone, by_user_id=by_user)


def user_ids_from_preferences(preferences: Sequence[UserPreference]) -> int:
    """``user_preferences`` names the user as a message does: learnt the same way."""
    by_phone: dict[str, Identity] = {}
    by_user: dict[str, Identity] = {}
    for p in sorted(preferences, key=lambda p: p.timestamp or _EPOCH):
        if not p.user_id:
            continue
        seen = Identity(p.user_id, p.parent_user_id, p.username)
        if p.phone:
            by_phone[p.phone] = seen
        else:
            by_user[p.user_id] = seen
    return _learn(by_phone=by_phone, by_user_id=by_user)


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _identity(seen: UserIdentity) -> Identity:
    return Identity(seen.user_id, seen.parent_user_id, seen.username)


def _learn(
    *,
    by_phone: Mapping[str, Identity],
    by_user_id: Mapping[str, Identity] | None = None,
    by_message: Mapping[int, Identity] | None = None,
) -> int:
    """Find the contacts (one query by phone and user id, one by message: never one per
    item) and record what is new on them in one statement."""
    by_user_id, by_message = by_user_id or {}, by_message or {}
    sightings: list[tuple[KnownIdentity, Identity]] = []
    if by_phone or by_user_id:
        known = contacts_known(phones=by_phone, user_ids=by_user_id)
        for key, seen in (*by_phone.items(), *by_user_id.items()):
            if key in known:
                sightings.append((known[key], seen))
    if by_message:
        rows = Message.objects.filter(pk__in=list(by_message), contact__isnull=False).values_list(
            "pk", "contact_id", "contact__user_id", "contact__parent_user_id", "contact__username"
        )
        for message_id, contact_id, user_id, parent_user_id, username in rows:
            held = KnownIdentity(contact_id, user_id, parent_user_id, username)
            sightings.append((held, by_message[message_id]))
    news: dict[int, Identity] = {}
    for held, seen in sightings:
        if (new := identity_news(held, seen)) is not None:
            news[held.contact_id] = _together(news.get(held.contact_id), new)
    return identities_learn(by_contact=news) if news else 0


def _together(before: Identity | None, after: Identity) -> Identity:
    """Two sightings of one contact in a batch (its status's ``recipient_user_id`` and its
    ``contacts[]`` entry): one identity, the later word first. A second, different user id
    is not taken: the first stands, as it would against one recorded."""
    if before is None:
        return after
    if before.user_id != after.user_id:
        return before
    return Identity(
        after.user_id,
        after.parent_user_id or before.parent_user_id,
        after.username or before.username,
    )
