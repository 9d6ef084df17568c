"""Events in: what contacts did, reported by other systems (``POST /api/v1/events``).

A batch of up to ``EVENTS_MAX_BATCH`` items, each naming the person by phone (E.164) or
WhatsApp user id, an event name, its properties (an object: a cart's items, its URL, an
order id) and when it happened. What a schema can say is checked by ``events_request_parse``
(a 400 naming every field at fault); what needs more (a phone number libphonenumber
accepts, a date with its offset) rejects that item alone, named in the answer.

Stored in a few statements a batch: the people not known yet become contacts (an event is
often the first the business tells of a customer), the events go into
``journeys_contactevent`` once each (an item's ``id``, else the request's Idempotency-Key
and its position, is its dedupe key: a retried batch stores nothing twice), and the router
(journeys.routing) applies them to journeys, in the order stored, right after.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from delivery.api.errors import invalid_fields
from delivery.cloud.client import is_user_id
from delivery.engagement.conversions import phone_normalise
from whatsblast.core.storable import text_storable

# Names other systems may use: the "whatsapp." family is what whatsblast itself records
# (a reply: whatsapp.reply).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"
_NAME = re.compile(NAME_PATTERN)
RESERVED_PREFIX = "whatsapp."
ITEM_FIELDS = frozenset({"id", "phone", "user_id", "name", "properties", "occurred_at"})
MAX_PHONE = 32
MAX_USER_ID = 140
MAX_ITEM_ID = 200
MAX_OCCURRED_AT = 40
MAX_PROPERTIES = 50
MAX_PROPERTIES_BYTES = 8192
FUTURE_TOLERANCE = timedelta(minutes=5)

STORED, DUPLICATE, REJECTED = "stored", "duplicate", "rejected"


@dataclass(frozen=True)
class ItemOutcome:
    index: int
    status: str
    event_id: int | None = None
    contact_id: int | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "status": self.status,
            "id": self.event_id,
            "contact_id": self.contact_id,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class EventsResult:
    received: int
    stored: int
    duplicates: int
    rejected: int
    contacts_created: int
    items: list[ItemOutcome]

    def as_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "contacts_created": self.contacts_created,
            "results": [i.as_dict() for i in self.items],
        }


# --- the request's shape ----------------------------------------------------------------------


def events_request_parse(data: dict[str, Any], *, max_items: int) -> list[dict[str, Any]]:
    """The items of ``{"events": [...]}`` with the documented JSON types and lengths; a
    400 naming every field at fault otherwise."""
    errors: dict[str, str] = {}
    for key in sorted(set(data) - {"events"}, key=repr)[:20]:
        errors[_safe(key)] = "Unknown field."
    items = data.get("events")
    if not isinstance(items, list):
        errors["events"] = "Required: a list of events."
    elif not 1 <= len(items) <= max_items:
        errors["events"] = f"Give 1 to {max_items} events."
    else:
        for index, item in enumerate(items):
            _shape(item, f"events[{index}]", errors)
            if len(errors) >= 50:
                break
    if errors:
        raise invalid_fields(errors)
    assert isinstance(items, list)
    return items


def _safe(key: object) -> str:
    text = str(key)
    return text if text.isprintable() and len(text) <= 100 else repr(text)[:100]


def _shape(item: Any, path: str, errors: dict[str, str]) -> None:
    if not isinstance(item, dict):
        errors[path] = "Must be an object."
        return
    for key in sorted(set(item) - ITEM_FIELDS, key=repr)[:20]:
        errors[f"{path}.{_safe(key)}"] = "Unknown field."
    if "phone" not in item and "user_id" not in item:
        errors[f"{path}.phone"] = "Give the phone or the user_id of the person."
    if "name" not in item:
        errors[f"{path}.name"] = "This field is required."
    for name, max_length in (
        ("phone", MAX_PHONE),
        ("user_id", MAX_USER_ID),
        ("occurred_at", MAX_OCCURRED_AT),
    ):
        if name in item:
            _string(item[name], f"{path}.{name}", 1, max_length, errors)
    if "name" in item:
        name = item["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            errors[f"{path}.name"] = (
                "An event name: a letter or digit, then letters, digits and _ . : - "
                "(up to 100 characters)."
            )
    if "properties" in item:
        props = item["properties"]
        if not isinstance(props, dict):
            errors[f"{path}.properties"] = "Must be an object."
        elif len(props) > MAX_PROPERTIES:
            errors[f"{path}.properties"] = f"At most {MAX_PROPERTIES} properties."
        elif len(json.dumps(props, ensure_ascii=False)) > MAX_PROPERTIES_BYTES:
            errors[f"{path}.properties"] = f"At most {MAX_PROPERTIES_BYTES} characters as JSON."
    if "id" in item:
        item_id = item["id"]
        if isinstance(item_id, str):
            _string(item_id, f"{path}.id", 1, MAX_ITEM_ID, errors)
        elif isinstance(item_id, float) and item_id.is_integer():
            item["id"] = int(item_id)  # 7.0 is the integer 7 to JSON Schema
        elif isinstance(item_id, bool) or not isinstance(item_id, int):
            errors[f"{path}.id"] = "Must be a string or an integer."


def _string(value: Any, path: str, lo: int, hi: int, errors: dict[str, str]) -> None:
    if not isinstance(value, str):
        errors[path] = "Must be a string."
    elif not lo <= len(value) <= hi:
        errors[path] = f"{lo} to {hi} characters."


# --- storing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    index: int
    dedupe_key: str
    phone: str | None
    user_id: str | None
    name: str
    properties: dict[str, Any]
    occurred_at: datetime


def events_record(
    *,
    api_key_id: int | None,
    items: Sequence[Mapping[str, Any]],
    idempotency_key: str | None,
    now: datetime | None = None,
) -> EventsResult:
    """Store a batch (see the module's docstring); each item's outcome, in order."""
    now = now or timezone.now()
    once = uuid.uuid4().hex
    parsed: list[_Item] = []
    outcomes: dict[int, ItemOutcome] = {}
    for index, raw in enumerate(items):
        item, errors = _item(index, raw, now=now)
        if item is None:
            outcomes[index] = ItemOutcome(
                index, REJECTED, errors={f"events[{index}].{k}": v for k, v in errors.items()}
            )
            continue
        key = _dedupe_key(api_key_id, raw.get("id"), idempotency_key, index, once)
        parsed.append(
            _Item(
                index, key, item.phone, item.user_id, item.name, item.properties, item.occurred_at
            )
        )
    with transaction.atomic():
        contacts, created = _contacts_resolve(parsed)
        stored = _store(parsed, contacts, api_key_id, now)
        earlier = _stored_before({i.dedupe_key for i in parsed} - set(stored))
    seen: set[str] = set()
    for item in parsed:
        row = stored.get(item.dedupe_key)
        status = STORED
        if row is None or item.dedupe_key in seen:
            status, row = DUPLICATE, row or earlier.get(item.dedupe_key)
        seen.add(item.dedupe_key)
        outcomes[item.index] = ItemOutcome(
            item.index, status, row[0] if row else None, row[1] if row else None
        )
    ordered = [outcomes[i] for i in sorted(outcomes)]
    return EventsResult(
        received=len(items),
        stored=sum(1 for o in ordered if o.status == STORED),
        duplicates=sum(1 for o in ordered if o.status == DUPLICATE),
        rejected=sum(1 for o in ordered if o.status == REJECTED),
        contacts_created=created,
        items=ordered,
    )


def _dedupe_key(
    api_key_id: int | None, item_id: Any, idempotency_key: str | None, index: int, once: str
) -> str:
    owner = f"api:{api_key_id}" if api_key_id is not None else "local"
    if item_id is not None:
        return f"{owner}:id:{item_id}"
    if idempotency_key is not None:
        return f"{owner}:idem:{idempotency_key}:{index}"
    return f"{owner}:once:{once}:{index}"


def _item(
    index: int, raw: Mapping[str, Any], *, now: datetime
) -> tuple[_Item | None, dict[str, str]]:  # noqa: E501
    errors: dict[str, str] = {}
    phone_text = _clean(raw.get("phone"), "phone", errors)
    phone = None
    if phone_text:
        phone = phone_normalise(phone_text)
        if phone is None:
            errors["phone"] = "Not a phone number in international form (e.g. +5511987654321)."
    user_id = _clean(raw.get("user_id"), "user_id", errors)
    if user_id and not is_user_id(user_id):
        errors["user_id"] = "Not a WhatsApp user id (e.g. US.13491208655302741918)."
    if not phone_text and not user_id and not {"phone", "user_id"} & set(errors):
        errors["phone"] = "Give the phone or the user_id of the person."
    name = str(raw.get("name") or "")
    if name.startswith(RESERVED_PREFIX):
        errors["name"] = f"Names starting {RESERVED_PREFIX!r} are whatsblast's own."
    properties = raw.get("properties") or {}
    if not _storable(properties):
        errors["properties"] = "Holds text PostgreSQL cannot store (a NUL character)."
    occurred_at = _occurred_at(raw.get("occurred_at"), errors, now=now)
    if errors or occurred_at is None:
        return None, errors
    return _Item(index, "", phone, user_id or None, name, dict(properties), occurred_at), {}


def _clean(value: Any, name: str, errors: dict[str, str]) -> str:
    if value is None:
        return ""
    text = str(value).strip()
    if not text_storable(text):
        errors[name] = "Holds characters that cannot be stored."
        return ""
    return text


def _storable(value: Any) -> bool:
    if isinstance(value, str):
        return text_storable(value)
    if isinstance(value, dict):
        return all(_storable(k) and _storable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_storable(v) for v in value)
    return True


def _occurred_at(raw: Any, errors: dict[str, str], *, now: datetime) -> datetime | None:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return now
    try:
        when = datetime.fromisoformat(str(raw).strip())
    except ValueError:
        errors["occurred_at"] = "Not an ISO 8601 date and time (e.g. 2026-05-01T14:30:00-03:00)."
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        errors["occurred_at"] = "Give the offset (e.g. -03:00 or Z): the time is ambiguous."
        return None
    try:
        when = when.astimezone(UTC)
    except OverflowError:
        errors["occurred_at"] = "Out of range."
        return None
    if when > now + FUTURE_TOLERANCE:
        errors["occurred_at"] = "In the future."
        return None
    return when


# The batch's people: found by phone, else by user id; the unknown ones created (by phone
# when given, else by user id). ON CONFLICT: a contact a concurrent batch or import just
# created is found instead.
_CONTACTS_CREATE_SQL = """
INSERT INTO campaigns_contact (phone, user_id, name, attributes, created_at, updated_at)
SELECT u.phone, u.user_id, '', '{}'::jsonb, now(), now()
  FROM unnest(%s::text[], %s::text[]) AS u(phone, user_id)
ON CONFLICT DO NOTHING
RETURNING id
"""


def _contacts_resolve(
    items: Sequence[_Item],
) -> tuple[dict[tuple[str | None, str | None], int], int]:  # noqa: E501
    phones = sorted({i.phone for i in items if i.phone})
    user_ids = sorted({i.user_id for i in items if i.user_id})
    found_phone, found_user = _contacts_find(phones, user_ids)
    missing: dict[tuple[str | None, str | None], None] = {}
    for item in items:
        if item.phone and item.phone not in found_phone:
            missing[(item.phone, None)] = None
        elif not item.phone and item.user_id and item.user_id not in found_user:
            missing[(None, item.user_id)] = None
    created = 0
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                _CONTACTS_CREATE_SQL,
                [[p for p, _ in missing], [u for _, u in missing]],
            )
            created = len(cursor.fetchall())
        found_phone, found_user = _contacts_find(phones, user_ids)
    result: dict[tuple[str | None, str | None], int] = {}
    for item in items:
        contact = (found_phone.get(item.phone) if item.phone else None) or (
            found_user.get(item.user_id) if item.user_id else None
        )
        if contact is not None:
            result[(item.phone, item.user_id)] = contact
    return result, created


def _contacts_find(phones: list[str], user_ids: list[str]) -> tuple[dict[str, int], dict[str, int]]:  # noqa: E501
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, phone, user_id FROM campaigns_contact"
            " WHERE phone = ANY(%s::text[]) OR user_id = ANY(%s::text[])",
            [phones, user_ids],
        )
        by_phone: dict[str, int] = {}
        by_user: dict[str, int] = {}
        for contact_id, phone, user_id in cursor.fetchall():
            if phone:
                by_phone[phone] = int(contact_id)
            if user_id:
                by_user[user_id] = int(contact_id)
    return by_phone, by_user


_STORE_SQL = """
INSERT INTO journeys_contactevent
       (contact_id, name, properties, occurred_at, received_at, api_key_id, dedupe_key)
SELECT (r->>0)::bigint, r->>1, r->2, (r->>3)::timestamptz, %s, %s, r->>4
  FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(r, n)
 ORDER BY n
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id, contact_id, dedupe_key
"""


def _store(
    items: Sequence[_Item],
    contacts: dict[tuple[str | None, str | None], int],
    api_key_id: int | None,
    now: datetime,
) -> dict[str, tuple[int, int]]:
    rows = []
    for item in items:
        contact = contacts.get((item.phone, item.user_id))
        if contact is None:  # pragma: no cover - every item's contact was found or made
            continue
        rows.append(
            [contact, item.name, item.properties, item.occurred_at.isoformat(), item.dedupe_key]
        )  # noqa: E501
    if not rows:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_STORE_SQL, [now, api_key_id, json.dumps(rows, ensure_ascii=False)])
        return {key: (int(i), int(c)) for i, c, key in cursor.fetchall()}


def _stored_before(keys: set[str]) -> dict[str, tuple[int, int]]:
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT dedupe_key, id, contact_id FROM journeys_contactevent"
            " WHERE dedupe_key = ANY(%s::text[])",
            [sorted(keys)],
        )
        return {key: (int(i), int(c)) for key, i, c in cursor.fetchall()}


def contact_events_record(
    events: Sequence[tuple[int, str, dict[str, Any], datetime]],
) -> int:
    """Events whatsblast records itself (a reply: ``whatsapp.reply``), as (contact, name,
    properties, occurred_at); routed like the API's. How many were stored."""
    if not events:
        return 0
    rows = [[c, name, props, at.isoformat(), None] for c, name, props, at in events]
    with connection.cursor() as cursor:
        cursor.execute(_STORE_SQL, [timezone.now(), None, json.dumps(rows, ensure_ascii=False)])
        return len(cursor.fetchall())


def events_max_batch() -> int:
    return int(settings.EVENTS_IN_MAX_BATCH)
