"""Inbound messages: stored once, counted as replies, and opt-outs honoured."""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from campaigns.audience.identities import (
    contact_number_change,
    contact_user_id_change,
    contacts_find,
)
from campaigns.models import Contact, PhoneNumber
from delivery.consent import contacts_stop
from delivery.service_windows import service_windows_record
from journeys.whatsapp import Reply, replies_record
from webhooks.models import InboundMessage
from webhooks.payloads import Inbound, json_clean

logger = logging.getLogger(__name__)

OPT_OUT_SKIP_REASON = "opted out by reply"
NUMBER_CHANGED = "user_changed_number"
USER_ID_CHANGED = "user_changed_user_id"
# Punctuation around a lone keyword ("Stop!", "¡PARAR!") does not change what it means.
_EDGE_PUNCTUATION = ".,;:!?¡¿'\"()[]*-_ "
_SEPARATORS = re.compile(r"[\s_\-]+")


@dataclass(frozen=True)
class InboundReport:
    stored: int
    opt_outs: int
    numbers_changed: int = 0
    user_ids_changed: int = 0


def keyword_normalise(text: str) -> str:
    """Case-, accent- and spacing-insensitive form: ``" Arrêter! "`` → ``"arreter"``."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _SEPARATORS.sub(" ", bare.casefold().strip(_EDGE_PUNCTUATION)).strip()


def opt_out_keywords() -> frozenset[str]:
    return frozenset(keyword_normalise(k) for k in settings.OPT_OUT_KEYWORDS)


def is_opt_out(inbound: Inbound, keywords: frozenset[str]) -> bool:
    """The whole message is a stop keyword, or a button whose payload or text is one."""
    candidates = [inbound.text]
    if inbound.button_payload:
        candidates.append(inbound.button_payload)
    return any(keyword_normalise(c) in keywords for c in candidates if c)


@dataclass(frozen=True)
class QuickReplyOptOut:
    """Whether tapping one of a template's quick-reply buttons opts the recipient out."""

    index: str
    text: str
    opts_out: bool | None  # None: it depends on each contact (a payload from their field)
    reason: str

    @property
    def verdict(self) -> str:
        if self.opts_out is None:
            return "depends on the contact"
        return "opts out" if self.opts_out else "does not opt out"

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "verdict": self.verdict}


def quick_reply_opt_outs(
    *, buttons: Sequence[dict[str, Any]], mapped: dict[str, Any]
) -> list[QuickReplyOptOut]:
    """The opt-out rule (``is_opt_out``) applied to a tap on each quick-reply button.

    A tap comes back as the button's text and its payload: the campaign's mapped payload,
    or, with none mapped, the button's text again (Meta's default). Either being a stop
    keyword opts the recipient out. ``mapped`` is the campaign's ``param_mapping["buttons"]``.
    """
    keywords = opt_out_keywords()
    found = []
    for button in buttons:
        if str(button.get("type", "")).upper() != "QUICK_REPLY":
            continue
        index, text = str(button.get("index", "")), str(button.get("text") or "")
        found.append(_tap_verdict(index, text, mapped.get(index), keywords))
    return found


def _tap_verdict(index: str, text: str, source: Any, keywords: frozenset[str]) -> QuickReplyOptOut:
    if keyword_normalise(text) in keywords:
        return QuickReplyOptOut(index, text, True, f"its text '{text}' is a stop keyword")
    if not isinstance(source, dict):
        reason = f"its text '{text}' is not a stop keyword and no payload is set"
        return QuickReplyOptOut(index, text, False, reason)
    if "value" in source:
        payload = str(source["value"])
        if keyword_normalise(payload) in keywords:
            return QuickReplyOptOut(index, text, True, f"payload '{payload}' is a stop keyword")
        reason = f"payload '{payload}' is not a stop keyword, nor is its text '{text}'"
        return QuickReplyOptOut(index, text, False, reason)
    field = str(source.get("field", ""))
    reason = f"the payload is each contact's '{field}': only a stop keyword there opts out"
    return QuickReplyOptOut(index, text, None, reason)


def inbound_store(
    *, items: Sequence[tuple[Inbound, int]], fallback_times: dict[int, datetime], now: datetime
) -> InboundReport:
    """Store inbound messages (once per wamid), link them, and apply opt-outs.

    ``items`` pairs each message with its event id; a message without a timestamp takes
    its event's receipt time from ``fallback_times``.
    """
    unique: dict[str, Inbound] = {}
    sent_times: dict[str, datetime] = {}
    for inbound, event_id in items:
        if inbound.wamid not in unique:
            unique[inbound.wamid] = inbound
            sent_times[inbound.wamid] = inbound.timestamp or fallback_times.get(event_id, now)
    if not unique:
        return InboundReport(0, 0)
    messages = list(unique.values())
    numbers = dict(
        PhoneNumber.objects.filter(
            phone_number_id__in={m.phone_number_id for m in messages}
        ).values_list("phone_number_id", "id")
    )
    found = contacts_find(
        phones=(m.from_phone for m in messages), user_ids=(m.from_user_id for m in messages)
    )
    by_phone = {c.phone: c for c in found if c.phone}
    by_user = {c.user_id: c for c in found if c.user_id}
    campaigns = _last_campaigns(c.id for c in found)
    answered = _answered_campaigns({m.context_wamid for m in messages if m.context_wamid})
    keywords = opt_out_keywords()
    rows = []
    opting_out: dict[int, datetime] = {}
    for m in messages:
        # The phone first; a sender who shares none is found by their user id.
        contact = by_phone.get(m.from_phone) or by_user.get(m.from_user_id)
        number_id = numbers.get(m.phone_number_id)
        opt_out = is_opt_out(m, keywords)
        if opt_out and contact is not None:
            said_at = sent_times[m.wamid]
            opting_out[contact.id] = max(said_at, opting_out.get(contact.id, said_at))
        rows.append(
            InboundMessage(
                wamid=m.wamid,
                from_phone=m.from_phone,
                from_user_id=m.from_user_id,
                type=m.type,
                text=m.text,
                button_payload=m.button_payload,
                profile_name=m.profile_name,
                sent_at=sent_times[m.wamid],
                phone_number_id=number_id,
                contact=contact,
                context_wamid=m.context_wamid,
                # The campaign of the message it answers (a tap names the template message
                # tapped), else the one that last messaged the contact.
                campaign_id=answered.get(m.context_wamid)
                or _campaign_for(campaigns, contact, number_id),
                is_opt_out=opt_out,
                payload=json_clean(m.raw),
            )
        )
    stored = _insert_new(rows)
    # Each message opens (or extends) the user's customer-service window with that number,
    # under each name the API may be given for them: their phone and their user id.
    service_windows_record(
        [
            (r.phone_number_id, user, r.sent_at)
            for r in rows
            if r.phone_number_id
            for user in (r.from_phone, r.from_user_id)
            if user
        ]
    )
    opted = _contacts_opt_out(found, opting_out, now)
    # What people say reaches the journeys too: a reply ends a wait for one, a tap on
    # Confirm answers an order's question (journeys.whatsapp).
    replies_record(
        [
            Reply(
                contact_id=r.contact.pk,
                wamid=r.wamid,
                phone_number_id=m.phone_number_id,
                type=r.type,
                text=r.text,
                payload=r.button_payload,
                context_wamid=r.context_wamid,
                sent_at=r.sent_at,
            )
            for r, m in zip(rows, messages, strict=True)
            if r.contact is not None and r.type != "system"
        ]
    )
    moved_numbers, moved_user_ids = _identities_change(messages)
    return InboundReport(stored, opted, moved_numbers, moved_user_ids)


def _identities_change(messages: Sequence[Inbound]) -> tuple[int, int]:
    """``system`` ``user_changed_number`` / ``user_changed_user_id``, oldest first: the
    contact takes the new number or user id, history and opt-out kept (the row is the
    same). Returns how many numbers and user ids moved."""
    numbers = user_ids = 0
    for m in sorted(messages, key=lambda m: m.timestamp or datetime.min.replace(tzinfo=UTC)):
        if m.type != "system":
            continue
        if m.system_type == NUMBER_CHANGED and m.new_phone:
            old, new = m.from_phone, m.new_phone
            result = contact_number_change(old_phone=old, new_phone=new, user_id=m.from_user_id)
            numbers += int(result.moved)
        elif m.system_type == USER_ID_CHANGED and m.new_user_id:
            old, new = m.previous_user_id, m.new_user_id
            # The phone, when shown, is the sender's or the system object's wa_id.
            phone = m.from_phone or m.new_phone
            result = contact_user_id_change(
                old_user_id=old, new_user_id=new, phone=phone, parent_user_id=m.new_parent_user_id
            )
            user_ids += int(result.moved)
        else:
            continue
        logger.info("%s: %s -> %s: %s", m.system_type, old, new, result.reason)
    return numbers, user_ids


def _insert_new(rows: list[InboundMessage]) -> int:
    # Meta redelivers: the wamid is unique, so a message seen before is not stored again.
    before = InboundMessage.objects.filter(wamid__in=[r.wamid for r in rows]).count()
    InboundMessage.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows) - before


def _last_campaigns(contact_ids: Iterable[int]) -> dict[int, list[tuple[int, int]]]:
    """Per contact, the campaigns that messaged them, latest first, as (number, campaign).

    Looked up through ``contact_id`` (indexed as a foreign key) rather than ``to``, which
    has no index of its own; one row per (contact, sending number) keeps it small.
    """
    ids = list(contact_ids)
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT contact_id, phone_number_id, campaign_id, last_at FROM (
                SELECT DISTINCT ON (contact_id, phone_number_id)
                    contact_id, phone_number_id, campaign_id,
                    COALESCE(sent_at, created_at) AS last_at
                FROM delivery_message
                WHERE contact_id = ANY(%s::bigint[])
                  AND campaign_id IS NOT NULL
                  AND status IN ('sent', 'delivered', 'read')
                ORDER BY contact_id, phone_number_id, COALESCE(sent_at, created_at) DESC, id DESC
            ) AS latest
            ORDER BY last_at DESC
            """,
            [ids],
        )
        result: dict[int, list[tuple[int, int]]] = {}
        for contact_id, number_id, campaign_id, _ in cursor.fetchall():
            result.setdefault(contact_id, []).append((number_id, campaign_id))
    return result


def _answered_campaigns(wamids: set[str]) -> dict[str, int]:
    """The campaign of each of our messages named by an inbound ``context.id``.

    By wamid, which is unique (an index lookup each); a message that is not a campaign's
    (transactional, or not ours) is left out, and its reply falls back to the last campaign.
    """
    if not wamids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wamid, campaign_id FROM delivery_message"
            " WHERE wamid = ANY(%s::text[]) AND campaign_id IS NOT NULL",
            [sorted(wamids)],
        )
        return {wamid: campaign_id for wamid, campaign_id in cursor.fetchall()}


def _campaign_for(
    campaigns: dict[int, list[tuple[int, int]]], contact: Contact | None, number_id: int | None
) -> int | None:
    """The campaign that last messaged the contact from the number they wrote to.

    When the number is not one of ours, the campaign that last messaged them at all.
    """
    if contact is None:
        return None
    candidates = campaigns.get(contact.id, [])
    for candidate_number, campaign_id in candidates:
        if number_id is None or candidate_number == number_id:
            return campaign_id
    return None


def _contacts_opt_out(
    contacts: Sequence[Contact], opting_out: dict[int, datetime], now: datetime
) -> int:
    """Mark contacts opted out and skip their campaign messages still waiting to go.

    A stop older than the contact's latest opt-in is history, not a new wish. Transactional
    messages (codes, receipts) are not marketing and still go out.
    """
    opted_in = {c.id: c.opted_in_at for c in contacts}
    ids = [
        contact_id
        for contact_id, said_at in opting_out.items()
        if (since := opted_in[contact_id]) is None or since < said_at
    ]
    if not ids:
        return 0
    return contacts_stop(contact_ids=ids, at=now, reason=OPT_OUT_SKIP_REASON)
