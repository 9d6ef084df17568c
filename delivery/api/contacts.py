"""``POST /api/v1/contacts``: a batch of contacts read from its JSON, and written in one upsert.

Two kinds of refusal, as for conversions:

* the body's shape (what the OpenAPI document's ``ContactsRequest`` says: types, required
  fields, lengths, counts, unknown fields) is checked first, and a body that breaks it is
  refused whole (400, every field named ``contacts[3].attributes.city``);
* what a schema cannot say (a phone libphonenumber accepts, a user id's form, the same
  person twice in the batch) is decided item by item: such an item is rejected with its
  reason, by index, and the others are written.

The write is one ``INSERT … ON CONFLICT`` statement for the whole batch (``_UPSERT_SQL``),
after one statement that finds or creates the lists the batch names.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from campaigns.audience.phones import PhoneNormaliser
from campaigns.audience.writer import import_lock_share
from campaigns.models import Contact, Segment
from delivery.api.errors import ApiProblem, invalid_fields
from delivery.cloud.client import is_user_id
from delivery.segments.admin_support import contacts_in_segment
from delivery.segments.rules import RuleError
from whatsblast.core.storable import UNSTORABLE, text_storable, text_stripped

MAX_CONTACTS = 10_000
MAX_PHONE = 32
MAX_USER_ID = 140  # Contact.user_id
MAX_NAME = 200  # Contact.name
MAX_ATTRIBUTES = 100
MAX_ATTRIBUTE_NAME = 100
MAX_ATTRIBUTE_TEXT = 1000
MAX_LISTS = 50
MAX_LIST_NAME = 200  # ContactList.name
MAX_DESCRIPTION = 2000
# Errors listed in one 400 at most: ten thousand bad items need not make a megabyte answer.
MAX_FIELD_ERRORS = 100
ITEM_FIELDS = frozenset({"phone", "user_id", "name", "attributes", "lists", "opted_in"})
# Attribute names a mapping or a segment would read as the contact's own field instead.
RESERVED_ATTRIBUTES = ("phone", "user_id", "name", "country", "created", "opted_in")
# What the contact's opt-out records when a batch item says "opted_in": false.
API_OPT_OUT_REASON = "opted out through the API"


class FieldErrors:
    """Refusals by field path; the first per path is kept."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}

    def add(self, path: str, message: str) -> None:
        self.fields.setdefault(path, message)

    @property
    def full(self) -> bool:
        return len(self.fields) >= MAX_FIELD_ERRORS

    def text(
        self, value: Any, path: str, *, max_length: int, min_length: int = 1, strip: bool = True
    ) -> str | None:
        """``value`` when it is a storable string of at most ``max_length`` characters and,
        with ``strip``, not blank (``min_length`` 1); stripped with ``strip``. The lengths
        are the value's as sent, as the OpenAPI document's maxLength counts them."""
        if not isinstance(value, str):
            self.add(path, "Must be a string.")
            return None
        if len(value) > max_length:
            self.add(path, f"At most {max_length} characters.")
            return None
        if not text_storable(value):
            self.add(path, UNSTORABLE)
            return None
        text = text_stripped(value) if strip else value
        if len(text) < min_length:
            self.add(path, "May not be blank." if strip else "May not be empty.")
            return None
        return text

    def unknown(self, data: dict[str, Any], allowed: frozenset[str], prefix: str = "") -> None:
        for key in sorted(set(data) - allowed, key=repr)[:20]:
            self.add(f"{prefix}{safe_path(key)}", "Unknown field.")

    def raise_any(self) -> None:
        if self.fields:
            raise invalid_fields(self.fields)


def safe_path(key: Any) -> str:
    """A key as it may appear in a field path (an unprintable one is not echoed)."""
    text = str(key)
    return text if len(text) <= 64 and text_storable(text) else "(unnamed)"


@dataclass(frozen=True)
class ContactItem:
    """One item of the batch, its shape checked (the values not yet: ``contacts_upsert``)."""

    index: int
    phone: str | None  # as given
    user_id: str | None
    name: str  # "" keeps the contact's name
    attributes: dict[str, Any]  # a null value removes the attribute
    lists: tuple[str, ...]
    opted_in: bool | None  # None: not said

    @property
    def path(self) -> str:
        return f"contacts[{self.index}]"


def contacts_request_parse(data: dict[str, Any]) -> list[ContactItem]:
    """The items of ``{"contacts": [...]}``; a 400 naming every field at fault otherwise."""
    errors = FieldErrors()
    errors.unknown(data, frozenset({"contacts"}))
    items = data.get("contacts")
    parsed: list[ContactItem] = []
    if not isinstance(items, list):
        errors.add("contacts", "Required: a list of contacts.")
    elif not 1 <= len(items) <= MAX_CONTACTS:
        errors.add("contacts", f"Give 1 to {MAX_CONTACTS} contacts.")
    else:
        for index, item in enumerate(items):
            one = _item(item, index, errors)
            if one is not None:
                parsed.append(one)
            if errors.full:
                break
    errors.raise_any()
    return parsed


def _item(item: Any, index: int, errors: FieldErrors) -> ContactItem | None:
    path = f"contacts[{index}]"
    if not isinstance(item, dict):
        errors.add(path, "Must be an object.")
        return None
    before = len(errors.fields)
    errors.unknown(item, ITEM_FIELDS, f"{path}.")
    phone = user_id = None
    # Blank or malformed numbers and user ids are the item's rejection, not the body's.
    if ("phone" in item) == ("user_id" in item):
        errors.add(f"{path}.phone", "Give either the phone or the user_id.")
    elif "phone" in item:
        phone = errors.text(item["phone"], f"{path}.phone", max_length=MAX_PHONE, strip=False)
    else:
        user_id = errors.text(
            item["user_id"], f"{path}.user_id", max_length=MAX_USER_ID, strip=False
        )
    name = ""
    if "name" in item:
        name = errors.text(item["name"], f"{path}.name", max_length=MAX_NAME, min_length=0) or ""
    attributes = _attributes(item.get("attributes", {}), f"{path}.attributes", errors)
    lists = _lists(item.get("lists", []), f"{path}.lists", errors)
    opted_in = item.get("opted_in")
    if "opted_in" in item and not isinstance(opted_in, bool):
        errors.add(f"{path}.opted_in", "Must be true or false.")
    if len(errors.fields) > before:
        return None
    return ContactItem(index, phone, user_id, name, attributes, lists, opted_in)


def _attributes(value: Any, path: str, errors: FieldErrors) -> dict[str, Any]:
    if not isinstance(value, dict):
        errors.add(path, "Must be an object of name -> text, number, true/false or null.")
        return {}
    if len(value) > MAX_ATTRIBUTES:
        errors.add(path, f"At most {MAX_ATTRIBUTES} attributes.")
        return {}
    attributes: dict[str, Any] = {}
    for key, item in value.items():
        at = f"{path}.{safe_path(key)}"
        if errors.text(key, at, max_length=MAX_ATTRIBUTE_NAME, strip=False) is None:
            continue
        if key in RESERVED_ATTRIBUTES:
            errors.add(at, f"Not an attribute name: {', '.join(RESERVED_ATTRIBUTES)} are fields.")
            continue
        if isinstance(item, str):
            text = errors.text(item, at, max_length=MAX_ATTRIBUTE_TEXT, min_length=0, strip=False)
            if text is not None:
                attributes[key] = text
        elif isinstance(item, float) and not math.isfinite(item):
            # 1e999 reads as infinity, which JSON (and jsonb) cannot hold.
            errors.add(at, "A number too large to store.")
        elif item is None or isinstance(item, bool | int | float):
            attributes[key] = item
        else:
            errors.add(at, "Must be text, a number, true/false or null.")
    return attributes


def _lists(value: Any, path: str, errors: FieldErrors) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_LISTS:
        errors.add(path, f"Must be a list of at most {MAX_LISTS} list names.")
        return ()
    names: list[str] = []
    for i, item in enumerate(value):
        name = errors.text(item, f"{path}[{i}]", max_length=MAX_LIST_NAME)
        if name is not None:
            names.append(name)
    return tuple(dict.fromkeys(names))


# --- the write -------------------------------------------------------------------------------


@dataclass
class UpsertResult:
    """What a batch did: every item is created, updated (it existed) or rejected."""

    created: int = 0
    updated: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    # The contacts the batch says opted out ("opted_in": false): the caller stops them
    # (delivery.consent, which also skips their pending campaign messages).
    opted_out_ids: list[int] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return len({path.split(".", 1)[0] for path in self.errors})

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "rejected": self.rejected,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class _Row:
    item: ContactItem
    phone: str | None  # E.164
    user_id: str | None

    @property
    def key(self) -> str:
        return self.phone or self.user_id or ""


# The lists a batch names, found or created. ON CONFLICT DO NOTHING returns only the rows
# this statement inserted; the others are read in the same statement, from its snapshot.
# A list another transaction creates at the same moment is in neither (its row was not yet
# committed when the snapshot was taken): ``_list_ids`` reads those again afterwards.
_LISTS_SQL = """
WITH wanted AS (
    SELECT DISTINCT name FROM unnest(%(names)s::text[]) AS w(name)
),
created AS (
    INSERT INTO campaigns_contactlist (name, description, suppression, created_at)
    SELECT name, '', false, now() FROM wanted ORDER BY name
    ON CONFLICT (name) DO NOTHING
    RETURNING id, name
)
SELECT id, name FROM created
UNION ALL
SELECT l.id, l.name FROM campaigns_contactlist AS l JOIN wanted AS w ON w.name = l.name
"""

# The whole batch in one statement, two INSERT … ON CONFLICT (a statement's INSERT takes one
# conflict target: contacts named by phone meet the phone's unique index, those named by
# user id the user id's), then their list memberships.
#
# The batch travels as one JSON array read by jsonb_to_recordset: one parameter whatever
# the batch's size (ten thousand items are 1-3 MB), parsed by PostgreSQL in C.
#
# Why ON CONFLICT rather than reading first and then inserting or updating: the unique
# index decides, atomically, whether each contact exists, so a concurrent import or API
# call inserting the same number cannot make this one fail or write the person twice, and
# the whole batch costs one round trip instead of one per contact.
#
# The batch holds each phone and each user id once (``contacts_upsert`` rejects repeats),
# so no ON CONFLICT meets the same row twice, which PostgreSQL refuses.
#
# An existing contact keeps its name unless the item brings a non-blank one, as an import
# does; gains the item's attributes key by key (jsonb ||), a null value removing the key
# (jsonb_strip_nulls); and records consent (opted_in_at) when the item says "opted_in":
# true and the contact has neither consented nor opted out: an opt-out stands until the
# person's own opt-in (POST /contacts/{id}/opt-in), whatever a later sync says. updated_at
# moves only when one of these changed.
#
# The conflict branch always updates (no WHERE), so that RETURNING gives the id of every
# contact, new or existing, and the memberships are inserted straight from those ids
# (campaigns.audience.writer explains why joining back by phone was worse). xmax = 0 holds
# only for a row version this statement inserted: it tells a created contact from an
# updated one.
#
# ORDER BY the key: the inserts walk the unique index in order, and two writers touching
# the same contacts take their row locks in the same order, so they wait for each other
# instead of deadlocking.
# One INSERT … ON CONFLICT per key (``phone``, ``user_id``): the same statement but for the
# column it fills and the unique index it meets.
_UPSERT_BY_KEY_SQL = """
    INSERT INTO campaigns_contact AS c
        (phone, user_id, name, attributes, opted_in_at, opted_out_reason,
         created_at, updated_at)
    SELECT {phone}, {user_id}, s.name, s.attributes,
           CASE WHEN s.opted_in THEN now() END, '', now(), now()
    FROM src AS s
    WHERE s.{key} IS NOT NULL
    ORDER BY s.{key}
    ON CONFLICT ({key}) DO UPDATE SET
        name = CASE WHEN EXCLUDED.name <> '' THEN EXCLUDED.name ELSE c.name END,
        attributes = jsonb_strip_nulls(c.attributes || EXCLUDED.attributes),
        opted_in_at = CASE
            WHEN c.opted_in_at IS NULL AND c.opted_out_at IS NULL THEN EXCLUDED.opted_in_at
            ELSE c.opted_in_at
        END,
        updated_at = CASE
            WHEN (EXCLUDED.name <> '' AND EXCLUDED.name <> c.name)
              OR jsonb_strip_nulls(c.attributes || EXCLUDED.attributes) <> c.attributes
              OR (EXCLUDED.opted_in_at IS NOT NULL AND c.opted_in_at IS NULL
                  AND c.opted_out_at IS NULL)
            THEN EXCLUDED.updated_at
            ELSE c.updated_at
        END
    RETURNING c.id, c.{key} AS key, (c.xmax = 0) AS inserted"""


def _upsert_by(key: str) -> str:
    return _UPSERT_BY_KEY_SQL.format(
        key=key,
        phone="s.phone" if key == "phone" else "NULL",
        user_id="s.user_id" if key == "user_id" else "NULL",
    )


_UPSERT_SQL = f"""
WITH src AS (
    SELECT s.phone, s.user_id, s.name, s.attributes, s.opted_in, s.lists
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS s(
        phone text, user_id text, name text, attributes jsonb, opted_in boolean,
        lists bigint[])
),
by_phone AS ({_upsert_by("phone")}
),
by_user_id AS ({_upsert_by("user_id")}
),
upserted AS (
    SELECT id, key, inserted FROM by_phone
    UNION ALL
    SELECT id, key, inserted FROM by_user_id
),
memberships AS (
    INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
    SELECT DISTINCT l.id, u.id, now()
    FROM upserted AS u
    JOIN src AS s ON COALESCE(s.phone, s.user_id) = u.key
    CROSS JOIN LATERAL unnest(s.lists) AS l(id)
    ON CONFLICT (contact_list_id, contact_id) DO NOTHING
)
SELECT id, key, inserted FROM upserted
"""  # noqa: S608 - built from constants: the key is "phone" or "user_id"

# A new contact's proposed row is the inserted row, nulls and all (the conflict branch
# strips them from what it merges): the few new contacts whose item held a null attribute
# lose those keys here, in the same transaction.
_STRIP_NEW_SQL = """
UPDATE campaigns_contact SET attributes = jsonb_strip_nulls(attributes)
WHERE id = ANY(%(ids)s::bigint[])
"""

# Contacts both a phone item and a user-id item of the batch would reach: written twice by
# one statement, which PostgreSQL does not allow.
_BOTH_SQL = """
SELECT phone, user_id FROM campaigns_contact
WHERE phone = ANY(%(phones)s::text[]) AND user_id = ANY(%(user_ids)s::text[])
"""


# How long a batch waits for a file import to finish before it is refused, and the
# Retry-After it is refused with (an import of a million rows takes about a minute).
IMPORT_WAIT_S = 2.0
IMPORT_RETRY_AFTER_S = 5


def contacts_upsert(items: Sequence[ContactItem]) -> UpsertResult:
    """Write the batch: each item's contact created or updated, and added to its lists
    (created if missing); an item that cannot be read is rejected by index. Runs in the
    caller's transaction.

    Not beside a file import: its batches lock contacts in file order over one long
    transaction, so a batch here locking the same contacts in key order could deadlock with
    it and PostgreSQL might abort the import. The batch waits ``IMPORT_WAIT_S`` for an
    import to end, then is refused (409 with Retry-After) with nothing written."""
    result = UpsertResult()
    rows = _rows(items, result.errors)
    if not rows:
        return result
    if not import_lock_share(wait_s=IMPORT_WAIT_S):
        raise ApiProblem(
            409,
            "contacts_import_running",
            "A contact file is being imported; send the batch again shortly.",
            headers={"Retry-After": str(IMPORT_RETRY_AFTER_S)},
        )
    list_ids = _list_ids(sorted({name for row in rows for name in row.item.lists}))
    payload = [
        {
            "phone": row.phone,
            "user_id": row.user_id,
            "name": row.item.name,
            "attributes": row.item.attributes,
            "opted_in": row.item.opted_in,
            "lists": [list_ids[name] for name in row.item.lists],
        }
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT_SQL, {"rows": json.dumps(payload, separators=(",", ":"))})
        written = {key: (int(pk), bool(inserted)) for pk, key, inserted in cursor.fetchall()}
        strip = [
            written[row.key][0]
            for row in rows
            if written[row.key][1] and None in row.item.attributes.values()
        ]
        if strip:
            cursor.execute(_STRIP_NEW_SQL, {"ids": strip})
    for row in rows:
        pk, inserted = written[row.key]
        if inserted:
            result.created += 1
        else:
            result.updated += 1
        if row.item.opted_in is False:
            result.opted_out_ids.append(pk)
    return result


def _rows(items: Sequence[ContactItem], errors: dict[str, str]) -> list[_Row]:
    """The items that can be written: a valid phone or user id, each person once."""
    normalise = PhoneNormaliser(None)
    rows: list[_Row] = []
    first: dict[str, int] = {}
    for item in items:
        phone = user_id = None
        if item.phone is not None:
            if not item.phone.strip().startswith("+"):
                errors[f"{item.path}.phone"] = (
                    "Give the number in international form, with + and its country code "
                    "(+5511987654321)."
                )
                continue
            phone, reason = normalise(item.phone)
            if phone is None:
                errors[f"{item.path}.phone"] = f"Not a phone number: {reason}."
                continue
        elif item.user_id is not None:
            if not is_user_id(item.user_id):
                errors[f"{item.path}.user_id"] = (
                    "Not a WhatsApp user id (a country, a dot and letters and digits: "
                    "US.13491208655302741918)."
                )
                continue
            user_id = item.user_id
        row = _Row(item, phone, user_id)
        if row.key in first:
            field_name = "phone" if phone else "user_id"
            errors[f"{item.path}.{field_name}"] = (
                f"The same contact as contacts[{first[row.key]}]: give each contact once."
            )
            continue
        first[row.key] = item.index
        rows.append(row)
    phones = [row.phone for row in rows if row.phone]
    user_ids = [row.user_id for row in rows if row.user_id]
    if not phones or not user_ids:
        return rows
    with connection.cursor() as cursor:
        cursor.execute(_BOTH_SQL, {"phones": phones, "user_ids": user_ids})
        both = cursor.fetchall()
    phone_of = {user_id: phone for phone, user_id in both}
    kept = []
    for row in rows:
        if row.user_id in phone_of:
            errors[f"{row.item.path}.user_id"] = (
                f"The same contact as contacts[{first[phone_of[row.user_id]]}] (its phone): "
                "give each contact once."
            )
        else:
            kept.append(row)
    return kept


def _list_ids(names: list[str]) -> dict[str, int]:
    if not names:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_LISTS_SQL, {"names": names})
        found = {name: int(pk) for pk, name in cursor.fetchall()}
        missing = [name for name in names if name not in found]
        if missing:  # created by another transaction while this statement ran
            cursor.execute(
                "SELECT id, name FROM campaigns_contactlist WHERE name = ANY(%s::text[])",
                [missing],
            )
            found.update({name: int(pk) for pk, name in cursor.fetchall()})
    return found


# --- reading ---------------------------------------------------------------------------------


def contacts_filtered(query: Mapping[str, str]) -> QuerySet[Contact]:
    """The contacts ``?phone=``, ``?user_id=``, ``?list=`` and ``?segment=`` (names) select,
    all of them at once. A filter naming nothing (a list or segment no one has, a phone
    that is not one) selects nothing; a 400 for one that cannot be read (too long), a 422
    for a segment whose rules no longer hold (a list they name was deleted since)."""
    errors = FieldErrors()
    contacts = Contact.objects.prefetch_related("lists")
    phone = _query_text(query, "phone", MAX_PHONE, errors)
    user_id = _query_text(query, "user_id", MAX_USER_ID, errors)
    list_name = _query_text(query, "list", MAX_LIST_NAME, errors)
    segment_name = _query_text(query, "segment", MAX_LIST_NAME, errors)
    errors.raise_any()
    if phone is not None:
        e164, _ = PhoneNormaliser(None)(phone) if phone.strip().startswith("+") else (None, "")
        contacts = contacts.filter(phone=e164 or phone)
    if user_id is not None:
        contacts = contacts.filter(user_id=user_id)
    if list_name is not None:
        contacts = contacts.filter(listmembership__contact_list__name=list_name)
    if segment_name is not None:
        segment = Segment.objects.filter(name=segment_name).first()
        if segment is None:
            return contacts.none()
        try:
            contacts = contacts_in_segment(contacts, segment.rules)
        except RuleError as exc:
            raise segment_unusable(segment, exc) from None
    return contacts


def segment_unusable(segment: Segment, exc: RuleError) -> ApiProblem:
    return ApiProblem(
        422,
        "segment_unusable",
        f"The segment {segment.name!r} cannot be used now: {exc}.",
        fields=exc.problems,
    )


def _query_text(
    query: Mapping[str, str], name: str, max_length: int, errors: FieldErrors
) -> str | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    return errors.text(value, name, max_length=max_length, strip=False)


def contact_render(contact: Contact) -> dict[str, Any]:
    """A contact as the API shows it (its lists by name: prefetch them)."""
    return {
        "id": contact.pk,
        "phone": contact.phone,
        "user_id": contact.user_id,
        "username": contact.username,
        "name": contact.name,
        "attributes": contact.attributes if isinstance(contact.attributes, dict) else {},
        "lists": sorted(contact_list.name for contact_list in contact.lists.all()),
        "opted_in_at": _iso(contact.opted_in_at),
        "opted_out": contact.opted_out_at is not None,
        "opted_out_at": _iso(contact.opted_out_at),
        "opted_out_reason": contact.opted_out_reason,
        "created_at": _iso(contact.created_at),
        "updated_at": _iso(contact.updated_at),
    }


def contact_get(contact_id: int) -> Contact:
    """The contact, its lists prefetched; 404 when there is none."""
    contact = Contact.objects.prefetch_related("lists").filter(pk=contact_id).first()
    if contact is None:
        raise ApiProblem(404, "not_found", "No such contact.")
    return contact


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
