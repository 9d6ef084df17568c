"""Erasing a person: their personal data removed everywhere it is kept, their history kept
anonymised.

A person is stored in more places than their contact row. ``contact_erase`` reaches each
one (this app sits on top of the others, so it can):

* ``campaigns``: the contact (deleted) and its list memberships (deleted); a segment rule
  or an upload's result that quotes the number (the number replaced);
* ``delivery``: their messages, campaign sends and API sends alike, kept for the counts but
  with the recipient, wamid, params, text and error details anonymised
  (``delivery.messages.messages_anonymise``, the one writer of that table); their dead
  letters' payloads; their clicks and conversions (kept, unlinked from the person); their
  customer-service windows, their pool home and Meta's marketing hold on them (deleted);
  the outgoing events that name them; stored API answers that quote the number; the
  messaging-limit budget in Redis (their entry renamed, so the budget still counts them);
* ``journeys``: their instances, histories, events in and segment memories (deleted:
  journeys.erase);
* ``webhooks``: their replies (kept for the reply counts and button taps, their words and
  profile name removed), Meta's raw callbacks that mention them (their part of the JSON
  blanked), unmatched statuses of their messages (deleted), asynchronous errors quoting
  them;
* the admin's history (``django_admin_log``), whose entries name a contact or a message by
  its number.

The person becomes a placeholder, ``erased-`` and 16 random hex digits: the same for all
of their rows (a campaign still counts one recipient, a report one person), and not
derived from anything of theirs, so nothing leads back to them. Everything runs in one
transaction: an erasure happens whole or not at all.

What is not reached: files outside the database (a rejects file of an upload, backups,
logs) and what already left (events delivered to subscribers, Meta's own records).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import reduce
from operator import or_
from typing import Any

import redis
from django.contrib.admin.models import LogEntry
from django.db import connection, transaction
from django.db.models import Model, Q, TextField
from django.db.models.functions import Cast

from campaigns.models import BusinessAccount, Contact, ContactUpload, ListMembership, Segment
from delivery.engagement.buttons import TAP_TYPES
from delivery.engine.reach import reach_key
from delivery.messages import messages_anonymise
from delivery.models import (
    ApiCreated,
    Click,
    Conversion,
    DeadLetter,
    MarketingHold,
    Message,
    PoolHome,
    ServiceWindow,
    SupportAction,
)
from journeys.erase import journeys_person_erase
from webhooks.models import AsyncError, InboundMessage, UnmatchedStatus, WebhookEvent
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

PLACEHOLDER_PREFIX = "erased-"
ERASED_REASON = "the contact was erased"
# In a JSON object about the person (one holding their number or user id), the keys whose
# text stays: what kind of thing it is and when, never what they wrote, their name, or an
# id (a wamid carries the number, base64-encoded).
_KEEP_KEYS = frozenset(
    {
        "type",
        "status",
        "kind",
        "event",
        "event_type",
        "category",
        "pricing_model",
        "code",
        "title",
        "outcome",
        "messaging_product",
        "object",
        "field",
        "recipient_type",
        "timestamp",
    }
)
# The outgoing events' tables (delivery.events): written by triggers, read by the router
# and the deliverer.
_EVENT_TABLES = ("delivery_eventoutbox", "delivery_event")


class ContactNotFound(LookupError):
    pass


@dataclass(frozen=True)
class ErasureResult:
    """What an erasure changed, by kind of row."""

    contact_id: int
    placeholder: str
    messages: int
    replies: int
    list_memberships: int
    clicks: int
    conversions: int
    dead_letters: int
    service_windows: int
    webhook_events: int
    events: int
    other_rows: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Redactor:
    """Takes a person's identifiers out of text and JSON.

    In text, each identifier (the number with and without its +, the user ids) becomes
    the placeholder. In JSON, an object holding one is about the person: every text in it
    (and below it) is blanked, the identifiers replaced, except the few keys that say what
    it is and when (``_KEEP_KEYS``); the rest of the document keeps its text, identifiers
    replaced. Meta's callbacks batch several people: only this person's parts go.
    """

    def __init__(self, identifiers: Iterable[str], placeholder: str) -> None:
        # Longest first: "+5511…" is replaced whole before its digits are.
        self.identifiers = sorted({i for i in identifiers if i}, key=len, reverse=True)
        self.placeholder = placeholder

    def mentions(self, text: str) -> bool:
        return any(identifier in text for identifier in self.identifiers)

    def text(self, text: str) -> str:
        for identifier in self.identifiers:
            text = text.replace(identifier, self.placeholder)
        return text

    def value(self, value: Any, *, personal: bool = False) -> Any:
        if isinstance(value, str):
            if personal and not self.mentions(value):
                return ""
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item, personal=personal) for item in value]
        if isinstance(value, dict):
            mine = personal or any(
                isinstance(item, str) and self.mentions(item) for item in value.values()
            )
            return {
                key: (
                    self.text(item)
                    if mine and isinstance(item, str) and (key in _KEEP_KEYS or key.endswith("_at"))
                    else self.value(item, personal=mine)
                )
                for key, item in value.items()
            }
        return value

    def raw(self, body: bytes) -> bytes:
        """A stored callback body: as JSON when it is (re-serialised), else byte by byte."""
        try:
            document = json.loads(body)
        except ValueError:
            for identifier in self.identifiers:
                body = body.replace(identifier.encode(), self.placeholder.encode())
            return body
        return json.dumps(self.value(document), separators=(",", ":")).encode()


def contact_erase(*, contact_id: int) -> ErasureResult:
    """Erase the contact: their personal data removed, their history anonymised.

    Raises ``ContactNotFound`` when there is no such contact.
    """
    with transaction.atomic():
        contact = Contact.objects.select_for_update().filter(pk=contact_id).first()
        if contact is None:
            raise ContactNotFound(contact_id)
        placeholder = PLACEHOLDER_PREFIX + secrets.token_hex(8)
        phones = [contact.phone] if contact.phone else []
        user_ids = [u for u in (contact.user_id, contact.parent_user_id) if u]
        recipients = [r for r in (contact.phone, contact.user_id) if r]
        # Meta writes a number without its + (wa_id, from, recipient_id).
        redactor = Redactor([*phones, *(p.lstrip("+") for p in phones), *user_ids], placeholder)

        messages = list(
            Message.objects.filter(
                Q(contact_id=contact.pk) | Q(api_key__isnull=False, to__in=recipients)
            ).values_list("id", "wamid")
        )
        message_ids = [pk for pk, _ in messages]
        new_wamids = {wamid: f"{placeholder}.{pk}" for pk, wamid in messages if wamid}
        dead_letters = _dead_letters_redact(message_ids, redactor)
        anonymised = messages_anonymise(
            contact_id=contact.pk,
            recipients=recipients,
            placeholder=placeholder,
            reason=ERASED_REASON,
        )
        replies = _replies_anonymise(contact, phones, user_ids, new_wamids, redactor)
        clicks = Click.objects.filter(
            Q(contact_id=contact.pk) | Q(message_id__in=message_ids)
        ).update(contact=None, user_agent="")
        conversions = Conversion.objects.filter(
            Q(contact_id=contact.pk) | Q(phone__in=phones) | Q(user_id__in=user_ids)
        ).update(contact=None, phone="", user_id="")
        windows, _ = ServiceWindow.objects.filter(user__in=recipients).delete()
        PoolHome.objects.filter(contact_id=contact.pk).delete()
        MarketingHold.objects.filter(contact_id=contact.pk).delete()
        journey_rows = journeys_person_erase(contact_id=contact.pk)
        memberships, _ = ListMembership.objects.filter(contact_id=contact.pk).delete()
        events = _events_redact(contact.pk, redactor)
        webhook_events = _webhook_events_redact(redactor)
        other = (
            _unmatched_delete(list(new_wamids), redactor)
            + _async_errors_redact(redactor)
            + _json_rows_redact(ApiCreated, "body", redactor)
            + _json_rows_redact(ContactUpload, "result", redactor)
            + _json_rows_redact(Segment, "rules", redactor)
            + _admin_log_redact(redactor)
            + journey_rows
        )
        # Every reference to the row is gone (memberships and pool home deleted, the
        # messages, replies, clicks and conversions unlinked): a plain DELETE. The ORM's
        # delete would set the messages' contact to NULL itself, and delivery_message has
        # one writer.
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM campaigns_contact WHERE id = %s", [contact.pk])
        transaction.on_commit(lambda: _reach_rename(recipients, placeholder))
    result = ErasureResult(
        contact_id=contact_id,
        placeholder=placeholder,
        messages=anonymised,
        replies=replies,
        list_memberships=memberships,
        clicks=clicks,
        conversions=conversions,
        dead_letters=dead_letters,
        service_windows=windows,
        webhook_events=webhook_events,
        events=events,
        other_rows=other,
    )
    logger.info("contact %s erased as %s: %s", contact_id, placeholder, result.as_dict())
    return result


def _dead_letters_redact(message_ids: Sequence[int], redactor: Redactor) -> int:
    """Dead letters hold the request sent to Meta (the number, the params) and each
    attempt's error: all about the person."""
    letters = list(DeadLetter.objects.filter(message_id__in=message_ids))
    for letter in letters:
        letter.payload = redactor.value(letter.payload, personal=True)
        letter.attempts = redactor.value(letter.attempts, personal=True)
        letter.note = redactor.text(letter.note)
    DeadLetter.objects.bulk_update(letters, ["payload", "attempts", "note"], batch_size=500)
    actions = list(SupportAction.objects.filter(dead_letter__in=letters))
    for action in actions:
        action.note = redactor.text(action.note)
    SupportAction.objects.bulk_update(actions, ["note"], batch_size=500)
    return len(letters)


def _replies_anonymise(
    contact: Contact,
    phones: Sequence[str],
    user_ids: Sequence[str],
    new_wamids: dict[str, str],
    redactor: Redactor,
) -> int:
    """Their replies stay (a campaign's reply count, its button taps by text and by A/B
    arm), under the placeholder: what they wrote, their profile name and the payload go.
    A tap's text is the button's (the business's words), kept for the taps report; the
    message it answers is found again by its new wamid."""
    replies = list(
        InboundMessage.objects.filter(
            Q(contact_id=contact.pk) | Q(from_phone__in=phones) | Q(from_user_id__in=user_ids)
        )
    )
    placeholder = redactor.placeholder
    for reply in replies:
        reply.contact = None
        reply.from_phone = placeholder if reply.from_phone else ""
        reply.from_user_id = placeholder if reply.from_user_id else ""
        if reply.type not in TAP_TYPES:
            reply.text = ""
        reply.profile_name = ""
        reply.payload = redactor.value(reply.payload, personal=True)
        reply.wamid = f"{placeholder}.in.{reply.pk}"
        reply.context_wamid = new_wamids.get(reply.context_wamid, "")
    fields = [
        "contact",
        "from_phone",
        "from_user_id",
        "text",
        "profile_name",
        "payload",
        "wamid",
        "context_wamid",
    ]
    InboundMessage.objects.bulk_update(replies, fields, batch_size=500)
    return len(replies)


def _mentioning(field: str, redactor: Redactor) -> Q:
    return reduce(or_, (Q(**{f"{field}__contains": i}) for i in redactor.identifiers))


def _json_rows_redact(model: type[Model], field: str, redactor: Redactor) -> int:
    """Rows whose JSON ``field`` quotes an identifier, with it redacted. Read as text: a
    scan of the table, which an erasure (rare) can afford."""
    rows = list(
        model._default_manager.annotate(_text=Cast(field, TextField())).filter(
            _mentioning("_text", redactor)
        )
    )
    for row in rows:
        setattr(row, field, redactor.value(getattr(row, field)))
    model._default_manager.bulk_update(rows, [field], batch_size=500)
    return len(rows)


def _unmatched_delete(wamids: Sequence[str], redactor: Redactor) -> int:
    """Statuses for their messages that matched nothing: they never will now (the wamid is
    gone), and each holds the number."""
    query = Q(wamid__in=wamids) if wamids else Q(pk__in=[])
    by_payload = UnmatchedStatus.objects.annotate(_text=Cast("payload", TextField())).filter(
        _mentioning("_text", redactor)
    )
    deleted, _ = UnmatchedStatus.objects.filter(query | Q(pk__in=by_payload.values("pk"))).delete()
    return deleted


def _async_errors_redact(redactor: Redactor) -> int:
    errors = list(
        AsyncError.objects.annotate(_text=Cast("payload", TextField())).filter(
            _mentioning("_text", redactor)
            | _mentioning("message", redactor)
            | _mentioning("details", redactor)
            | _mentioning("title", redactor)
        )
    )
    for error in errors:
        error.payload = redactor.value(error.payload)
        error.message = redactor.text(error.message)
        error.details = redactor.text(error.details)
        error.title = redactor.text(error.title)
    AsyncError.objects.bulk_update(errors, ["payload", "message", "details", "title"])
    return len(errors)


def _admin_log_redact(redactor: Redactor) -> int:
    """The admin's history names a contact (and a message: "message 7 to +55…") by its
    number."""
    entries = list(
        LogEntry.objects.filter(
            _mentioning("object_repr", redactor) | _mentioning("change_message", redactor)
        )
    )
    for entry in entries:
        entry.object_repr = redactor.text(entry.object_repr)
        entry.change_message = redactor.text(entry.change_message)
    LogEntry.objects.bulk_update(entries, ["object_repr", "change_message"])
    return len(entries)


def _webhook_events_redact(redactor: Redactor) -> int:
    """Meta's raw callbacks that mention the person (a scan of the stored bodies, kept
    ``WEBHOOK_EVENT_RETENTION_HOURS``); the body's hash stays, so a redelivery of the
    original is still recognised and not applied again."""
    condition = " OR ".join(["position(%s::bytea IN body) > 0"] * len(redactor.identifiers))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, body FROM {WebhookEvent._meta.db_table} WHERE {condition}",  # noqa: S608 - the model's own table; values bound
            [identifier.encode() for identifier in redactor.identifiers],
        )
        found = cursor.fetchall()
    for pk, body in found:
        WebhookEvent.objects.filter(pk=pk).update(body=redactor.raw(bytes(body)))
    return len(found)


def _events_redact(contact_id: int, redactor: Redactor) -> int:
    """Outgoing events (delivery.events) not yet purged that name the person."""
    changed = 0
    with connection.cursor() as cursor:
        for table in _EVENT_TABLES:
            key = "seq" if table == "delivery_event" else "id"
            mentions = " OR ".join(["strpos(data::text, %s) > 0"] * len(redactor.identifiers))
            cursor.execute(
                f"SELECT {key}, data FROM {table}"  # noqa: S608 - this module's constants
                f" WHERE data->>'contact_id' = %s OR {mentions}",
                [str(contact_id), *redactor.identifiers],
            )
            for pk, data in cursor.fetchall():
                document = json.loads(data) if isinstance(data, str) else data
                redacted = redactor.value(document, personal=True)
                cursor.execute(
                    f"UPDATE {table} SET data = %s::jsonb WHERE {key} = %s",  # noqa: S608
                    [json.dumps(redacted, separators=(",", ":")), pk],
                )
                changed += 1
    return changed


def _reach_rename(recipients: Sequence[str], placeholder: str) -> None:
    """The messaging-limit budget (Redis, 24 h) holds the recipients reached: each of the
    person's entries takes the placeholder's name and keeps its time, so the budget still
    counts them and no longer names them. Lost if Redis is away: the entries expire
    within 24 h."""
    try:
        conn = get_redis()
        for waba_id in BusinessAccount.objects.values_list("waba_id", flat=True):
            key = reach_key(waba_id)
            for recipient in recipients:
                score = conn.zscore(key, recipient)
                if score is None:
                    continue
                pipe = conn.pipeline()
                pipe.zadd(key, {placeholder: score}, nx=True)
                pipe.zrem(key, recipient)
                pipe.execute()
    except redis.RedisError:
        logger.warning("erasure: the messaging-limit budget in Redis was not renamed")
