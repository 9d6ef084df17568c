"""Conversions a customer's systems report (the API, an admin upload), stored once and
attributed to the campaign message that led to them, in one statement per batch.

An item names the person by ``phone`` (E.164; written with separators is fine) or
``user_id`` (a WhatsApp business-scoped user id), and says ``event``, optionally ``value``
and ``currency`` (ISO 4217, three letters), ``occurred_at`` (ISO 8601 with an offset;
now when not given) and the caller's ``id``.

**Attribution** (``_INSERT_SQL``), per conversion of a known contact, looking back
``campaign.attribution_days`` from ``occurred_at``:

1. the contact's campaign message with the latest *touch* in the window, where a touch is
   its delivery (``delivered_at``, or ``read_at`` when the delivery receipt never came)
   or a person's click on its tracked link (``attributed_by`` "clicked" when it was
   clicked in the window, else "delivered");
2. else the contact's latest *holdout* row of a campaign launched within the window
   (``attributed_by`` "holdout": a control conversion, counted for the lift and never as
   the campaign's revenue);
3. else nothing: stored unattributed (and a number we do not know is stored too, without
   a contact: the report's "unmatched").

**Dedupe keys** (``Conversion.dedupe_key``, unique): a repeat is stored once.

- API, item with an ``id``: ``api:<key id>:id:<item id>``;
- API, no ``id``, an ``Idempotency-Key``: ``api:<key id>:idem:<Idempotency-Key>:<index>``;
- API, neither: ``api:<key id>:once:<random>:<index>`` (no retry can be recognised);
- upload: ``upload:<file sha256>:<line>``.

The ``id:``/``idem:``/``once:`` tags keep the forms apart: without them an item id
``"a:0"`` and the first item of a batch sent with ``Idempotency-Key: a`` would share a key.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import IO, Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from campaigns.audience.phones import E164_RE, PhoneNormaliser
from delivery.api import validation as v
from delivery.campaigns.skips import HOLDOUT
from delivery.models import ConversionSource, MessageStatus
from whatsblast.core.storable import UNSTORABLE, text_storable

# The same limits as the API's request schema (Conversion's columns; an item id fits the
# dedupe key's 300 characters with the key id and its tag).
MAX_EVENT = v.CONVERSION_EVENT_MAX
MAX_PHONE = v.CONVERSION_PHONE_MAX
MAX_USER_ID = v.CONVERSION_USER_ID_MAX
MAX_ITEM_ID = v.CONVERSION_ID_MAX
MAX_VALUE_TEXT = v.CONVERSION_VALUE_TEXT_MAX
MAX_OCCURRED_AT = v.CONVERSION_OCCURRED_AT_MAX
# Decimal(14, 4): below 10^10 in magnitude, four places.
VALUE_PLACES = Decimal("0.0001")
VALUE_LIMIT = Decimal(10) ** 10
# A clock a little ahead of ours is tolerated; a conversion dated later is a mistake.
FUTURE_TOLERANCE = timedelta(hours=1)

STORED, DUPLICATE, REJECTED = "stored", "duplicate", "rejected"
DELIVERED, CLICKED, HOLDOUT_ATTRIBUTION = "delivered", "clicked", "holdout"

_NORMALISE = PhoneNormaliser(None)


@dataclass(frozen=True)
class ConversionInput:
    """One conversion as it will be stored (before attribution)."""

    index: int  # its position in the request, or its line in the file
    dedupe_key: str
    phone: str | None  # E.164
    user_id: str | None
    event: str
    value: Decimal | None
    currency: str
    occurred_at: datetime


@dataclass(frozen=True)
class ItemOutcome:
    index: int
    status: str  # stored | duplicate | rejected
    conversion_id: int | None = None
    contact_matched: bool | None = None  # None unless stored
    campaign_id: int | None = None
    message_id: int | None = None
    attributed_by: str = ""  # delivered | clicked | holdout | ""
    errors: dict[str, str] = field(default_factory=dict)  # path -> what is wrong

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "status": self.status,
            "id": self.conversion_id,
            "contact_matched": self.contact_matched,
            "campaign_id": self.campaign_id,
            "message_id": self.message_id,
            "attributed_by": self.attributed_by or None,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class IngestResult:
    received: int
    stored: int
    duplicates: int
    rejected: int
    attributed: int  # stored and counted for a campaign message (delivered or clicked)
    holdout: int  # stored and counted as a holdout (control) conversion
    unmatched: int  # stored without a contact: nobody we know has that phone or user id
    items: list[ItemOutcome]

    def as_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "attributed": self.attributed,
            "holdout": self.holdout,
            "unmatched": self.unmatched,
            "results": [item.as_dict() for item in self.items],
        }


# ---------------------------------------------------------------------------------------
# Reading one item's values. The API's request parser has already checked the JSON types
# and lengths (delivery.api.validation); what is left here needs more than a schema: a
# number libphonenumber accepts, a decimal, a date with its offset. The upload reads the
# same fields as text.


def _text(value: Any, name: str, errors: dict[str, str], *, max_length: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        errors[name] = "Must be a string."
        return None
    text = value.strip()
    if not text:
        return None
    if len(text) > max_length:
        errors[name] = f"At most {max_length} characters."
        return None
    if not text_storable(text):
        errors[name] = UNSTORABLE
        return None
    return text


def phone_normalise(raw: str) -> str | None:
    """``raw`` as E.164, the form contacts are stored in, or None.

    A number libphonenumber calls valid is formatted by it ("+55 11 98765-4321" →
    "+5511987654321"); one in E.164 form that it does not call valid (a test number, a
    new range) is kept as written, as the admin's phone search does, so that a contact
    stored with it is still found.
    """
    e164, _ = _NORMALISE(raw)
    if e164 is not None:
        return e164
    compact = "".join(ch for ch in raw.strip() if ch not in " -()./\u00a0")
    return compact if E164_RE.match(compact) else None


def _value(raw: Any, errors: dict[str, str]) -> Decimal | None:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        errors["value"] = "Must be a number or a decimal string."
        return None
    if isinstance(raw, float) and not math.isfinite(raw):
        errors["value"] = "Must be a finite number."
        return None
    text = raw.strip() if isinstance(raw, str) else repr(raw)
    if len(text) > MAX_VALUE_TEXT:
        errors["value"] = f"At most {MAX_VALUE_TEXT} characters."
        return None
    try:
        # repr of a float is its shortest exact form: 19.99 stays 19.99.
        value = Decimal(text)
    except InvalidOperation:
        errors["value"] = 'Not a decimal number (e.g. 19.90 or "19.90").'
        return None
    if not value.is_finite():
        errors["value"] = "Must be a finite number."
        return None
    if value < 0:
        errors["value"] = "May not be negative."
        return None
    if value >= VALUE_LIMIT:
        errors["value"] = f"Must be below {VALUE_LIMIT:,}."
        return None
    return value.quantize(VALUE_PLACES, rounding=ROUND_HALF_EVEN)


def _currency(raw: Any, errors: dict[str, str]) -> str:
    text = _text(raw, "currency", errors, max_length=3)
    if text is None:
        return ""
    if len(text) != 3 or not (text.isascii() and text.isalpha()):
        errors["currency"] = "An ISO 4217 code: three letters, e.g. BRL, USD."
        return ""
    return text.upper()


def _occurred_at(raw: Any, errors: dict[str, str], *, now: datetime) -> datetime | None:
    text = _text(raw, "occurred_at", errors, max_length=MAX_OCCURRED_AT)
    if text is None:
        return None if "occurred_at" in errors else now
    try:
        when = datetime.fromisoformat(text)
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


@dataclass(frozen=True)
class _Fields:
    phone: str | None
    user_id: str | None
    event: str
    value: Decimal | None
    currency: str
    occurred_at: datetime


def fields_parse(raw: Mapping[str, Any], *, now: datetime) -> tuple[_Fields | None, dict[str, str]]:
    """One item's fields, or the errors by field name."""
    errors: dict[str, str] = {}
    phone_text = _text(raw.get("phone"), "phone", errors, max_length=MAX_PHONE)
    phone = None
    if phone_text is not None:
        phone = phone_normalise(phone_text)
        if phone is None:
            errors["phone"] = "Not a phone number in international form (e.g. +5511987654321)."
    user_id = _text(raw.get("user_id"), "user_id", errors, max_length=MAX_USER_ID)
    if phone_text is None and user_id is None and not {"phone", "user_id"} & set(errors):
        errors["phone"] = "Give the phone or the user_id of the person who converted."
    event = _text(raw.get("event"), "event", errors, max_length=MAX_EVENT)
    if event is None and "event" not in errors:
        errors["event"] = "This field is required (e.g. purchase)."
    value = _value(raw.get("value"), errors)
    currency = _currency(raw.get("currency"), errors)
    if value is not None and not currency and "currency" not in errors:
        errors["currency"] = "A value needs its currency."
    occurred_at = _occurred_at(raw.get("occurred_at"), errors, now=now)
    if errors or event is None or occurred_at is None:
        return None, errors
    return _Fields(phone, user_id, event, value, currency, occurred_at), {}


# ---------------------------------------------------------------------------------------
# Storing and attributing a batch: one statement.

# The attribution window of a campaign c, ending at the conversion's time: a message can
# only have led to a conversion that came after it, and only for so long.
_WINDOW = "BETWEEN f.occurred_at - c.attribution_days * interval '1 day' AND f.occurred_at"

# Contacts are found and the conversion attributed in the INSERT itself: one round trip
# per batch, and no window between reading the messages and writing the rows.
#
# - found: the contact by phone (unique index), else by user id (unique index).
# - touch (tier 0): each of the contact's campaign messages delivered or clicked in the
#   window. Delivered, because a message the person received is what can have moved
#   them, from the moment it arrived (a pending or failed message cannot); read_at stands
#   in when Meta's delivery receipt was lost (read implies delivered). Clicked, by a
#   person (a link-preview fetcher is a machine, is_preview), because a tap is the
#   strongest evidence there is, and counts even when no receipt came. The latest touch
#   wins (last touch): a conversion is counted once, for one message, so campaigns'
#   revenues add up to the total rather than each claiming it.
# - holdout (tier 1): only when no message touched the person: the contact was in a
#   campaign's holdout (deliberately not sent) launched within the window. The row makes
#   the conversion a control conversion of that campaign. A message that did reach them
#   comes first: a conversion after a delivered message is that message's.
# - ON CONFLICT (dedupe_key) DO NOTHING: a retry, a replayed request or a re-uploaded
#   file stores nothing twice, even when two run at once (the second waits on the first's
#   unique-index entry, then skips). Two items of one batch with the same key: the first
#   is stored.
_INSERT_SQL = f"""
WITH input AS (
    SELECT *
      FROM unnest(%(ord)s::int[], %(dedupe_key)s::text[], %(phone)s::text[],
                  %(user_id)s::text[], %(event)s::text[], %(value)s::numeric[],
                  %(currency)s::text[], %(occurred_at)s::timestamptz[])
           AS x(ord, dedupe_key, phone, user_id, event, value, currency, occurred_at)
),
found AS (
    SELECT x.*, COALESCE(by_phone.id, by_user.id) AS contact_id
      FROM input AS x
      LEFT JOIN campaigns_contact AS by_phone ON by_phone.phone = x.phone
      LEFT JOIN campaigns_contact AS by_user ON by_user.user_id = x.user_id
)
INSERT INTO delivery_conversion
    (contact_id, phone, user_id, event, value, currency, occurred_at, source, dedupe_key,
     message_id, campaign_id, attributed_by, created_at)
SELECT f.contact_id, COALESCE(f.phone, ''), COALESCE(f.user_id, ''), f.event, f.value,
       f.currency, f.occurred_at, %(source)s, f.dedupe_key,
       a.message_id, a.campaign_id, COALESCE(a.attributed_by, ''), %(now)s
  FROM found AS f
  LEFT JOIN LATERAL (
      SELECT t.message_id, t.campaign_id, t.attributed_by
        FROM (
            SELECT m.id AS message_id, m.campaign_id, 0 AS tier,
                   CASE WHEN k.clicked_at IS NOT NULL THEN '{CLICKED}'
                        ELSE '{DELIVERED}' END AS attributed_by,
                   GREATEST(k.clicked_at,
                            CASE WHEN COALESCE(m.delivered_at, m.read_at) {_WINDOW}
                                 THEN COALESCE(m.delivered_at, m.read_at) END) AS touched_at
              FROM delivery_message AS m
              JOIN campaigns_campaign AS c ON c.id = m.campaign_id
              LEFT JOIN LATERAL (
                  SELECT max(k.clicked_at) AS clicked_at
                    FROM delivery_click AS k
                   WHERE k.message_id = m.id AND NOT k.is_preview
                     AND k.clicked_at {_WINDOW}
              ) AS k ON true
             WHERE m.contact_id = f.contact_id
            UNION ALL
            SELECT m.id, m.campaign_id, 1, '{HOLDOUT_ATTRIBUTION}', m.created_at
              FROM delivery_message AS m
              JOIN campaigns_campaign AS c ON c.id = m.campaign_id
             WHERE m.contact_id = f.contact_id
               AND m.status = '{MessageStatus.SKIPPED}' AND m.skip_reason = %(holdout)s
               AND m.created_at {_WINDOW}
        ) AS t
       WHERE t.touched_at IS NOT NULL
       ORDER BY t.tier, t.touched_at DESC, t.message_id DESC
       LIMIT 1
  ) AS a ON true
 ORDER BY f.ord
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id, dedupe_key, contact_id, message_id, campaign_id, attributed_by
"""  # noqa: S608 - constants only; every value is bound


@dataclass(frozen=True)
class _Stored:
    conversion_id: int
    contact_id: int | None
    message_id: int | None
    campaign_id: int | None
    attributed_by: str


def conversions_store(inputs: Sequence[ConversionInput], *, source: str) -> dict[str, _Stored]:
    """Store and attribute ``inputs`` in one statement; {dedupe key: the row stored} for
    those that were new (a key missing from the answer was a duplicate)."""
    if not inputs:
        return {}
    params: dict[str, Any] = {
        "ord": list(range(len(inputs))),
        "dedupe_key": [i.dedupe_key for i in inputs],
        "phone": [i.phone for i in inputs],
        "user_id": [i.user_id for i in inputs],
        "event": [i.event for i in inputs],
        "value": [i.value for i in inputs],
        "currency": [i.currency for i in inputs],
        "occurred_at": [i.occurred_at for i in inputs],
        "source": source,
        "now": timezone.now(),
        "holdout": HOLDOUT,
    }
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_SQL, params)
        rows = cursor.fetchall()
    return {
        key: _Stored(int(pk), contact_id, message_id, campaign_id, attributed_by)
        for pk, key, contact_id, message_id, campaign_id, attributed_by in rows
    }


_STORED_SQL = """
SELECT id, dedupe_key, contact_id, message_id, campaign_id, attributed_by
  FROM delivery_conversion
 WHERE dedupe_key = ANY(%s::text[])
"""


def conversions_stored(keys: set[str]) -> dict[str, _Stored]:
    """The rows already stored under ``keys`` (the unique dedupe_key index), by key."""
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_STORED_SQL, [sorted(keys)])
        return {
            key: _Stored(int(pk), contact_id, message_id, campaign_id, attributed_by)
            for pk, key, contact_id, message_id, campaign_id, attributed_by in cursor.fetchall()
        }


def _ingest(
    inputs: list[ConversionInput], rejected: list[ItemOutcome], *, source: str, received: int
) -> IngestResult:
    stored_rows: dict[str, _Stored] = {}
    batch = settings.CONVERSIONS_MAX_BATCH
    for start in range(0, len(inputs), batch):
        stored_rows.update(conversions_store(inputs[start : start + batch], source=source))
    # A repeat answers with the row stored first (its id and attribution), so a retried
    # request reads as the first did, item for item, only marked duplicate.
    earlier = conversions_stored({i.dedupe_key for i in inputs if i.dedupe_key not in stored_rows})
    outcomes = list(rejected)
    claimed: set[str] = set()
    for item in inputs:
        row = stored_rows.get(item.dedupe_key)
        status = STORED
        if row is None or item.dedupe_key in claimed:
            status = DUPLICATE
            row = row or earlier.get(item.dedupe_key)
        claimed.add(item.dedupe_key)
        outcomes.append(
            ItemOutcome(index=item.index, status=status)
            if row is None
            else ItemOutcome(
                index=item.index,
                status=status,
                conversion_id=row.conversion_id,
                contact_matched=row.contact_id is not None,
                campaign_id=row.campaign_id,
                message_id=row.message_id,
                attributed_by=row.attributed_by,
            )
        )
    outcomes.sort(key=lambda o: o.index)
    stored = [o for o in outcomes if o.status == STORED]
    return IngestResult(
        received=received,
        stored=len(stored),
        duplicates=sum(o.status == DUPLICATE for o in outcomes),
        rejected=len(rejected),
        attributed=sum(o.attributed_by in (DELIVERED, CLICKED) for o in stored),
        holdout=sum(o.attributed_by == HOLDOUT_ATTRIBUTION for o in stored),
        unmatched=sum(not o.contact_matched for o in stored),
        items=outcomes,
    )


# ---------------------------------------------------------------------------------------
# The API.


def item_path(index: int, name: str) -> str:
    return f"conversions[{index}].{name}"


def api_dedupe_key(
    *, api_key_id: int, item_id: str | None, idempotency_key: str | None, index: int, once: str
) -> str:
    if item_id is not None:
        return f"api:{api_key_id}:id:{item_id}"
    if idempotency_key is not None:
        return f"api:{api_key_id}:idem:{idempotency_key}:{index}"
    return f"api:{api_key_id}:once:{once}:{index}"


def conversions_record(
    *,
    api_key_id: int,
    items: Sequence[Mapping[str, Any]],
    idempotency_key: str | None,
    now: datetime | None = None,
) -> IngestResult:
    """Store a batch posted to the API: the items that read stored (or found duplicate),
    the others rejected with their errors by path (``conversions[3].currency``).

    ``items`` are the request's objects, their JSON types already checked by
    ``delivery.api.validation.conversions_request_parse``.
    """
    now = now or timezone.now()
    once = uuid.uuid4().hex
    inputs: list[ConversionInput] = []
    rejected: list[ItemOutcome] = []
    for index, raw in enumerate(items):
        fields, errors = fields_parse(raw, now=now)
        item_id = _item_id(raw.get("id"), errors)
        if fields is None or errors:
            rejected.append(
                ItemOutcome(
                    index=index,
                    status=REJECTED,
                    errors={item_path(index, k): v for k, v in errors.items()},
                )
            )
            continue
        key = api_dedupe_key(
            api_key_id=api_key_id,
            item_id=item_id,
            idempotency_key=idempotency_key,
            index=index,
            once=once,
        )
        inputs.append(_input(index, key, fields))
    return _ingest(inputs, rejected, source=ConversionSource.API, received=len(items))


def _item_id(raw: Any, errors: dict[str, str]) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    return _text(raw, "id", errors, max_length=MAX_ITEM_ID)


def _input(index: int, key: str, fields: _Fields) -> ConversionInput:
    return ConversionInput(
        index=index,
        dedupe_key=key,
        phone=fields.phone,
        user_id=fields.user_id,
        event=fields.event,
        value=fields.value,
        currency=fields.currency,
        occurred_at=fields.occurred_at,
    )


# ---------------------------------------------------------------------------------------
# An admin upload: a CSV file.

UPLOAD_COLUMNS = ("id", "phone", "user_id", "event", "value", "currency", "occurred_at")
REQUIRED_COLUMNS = ("event", "occurred_at")


class UploadError(ValueError):
    """The file cannot be read at all (not UTF-8, no header, a required column missing)."""


@dataclass(frozen=True)
class UploadResult:
    sha256: str
    result: IngestResult
    # Bad rows: (line number, {column: what is wrong}).
    bad_rows: list[tuple[int, dict[str, str]]]


def conversions_from_csv(file: IO[bytes], *, now: datetime | None = None) -> UploadResult:
    """Store the conversions of an uploaded CSV file; bad rows are reported by their line
    number, the good ones stored.

    Columns (header names in any case, in any order, others ignored): ``phone`` or
    ``user_id``, ``event``, ``value``, ``currency``, ``occurred_at``. ``occurred_at`` is
    required: a file is history, and "now" would date every row at the upload. An ``id``
    column (the order or event id in the customer's systems) makes a row the same
    conversion in any file that names that id (``upload:id:<id>``); without one a row's
    dedupe key is the file's SHA-256 and the row's line, so uploading the same file again
    stores nothing twice.
    """
    now = now or timezone.now()
    data = file.read()
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadError(f"The file is not UTF-8 (byte {exc.start}).") from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text))
    header = next(reader, None)
    if header is None:
        raise UploadError("The file is empty.")
    columns = _columns(header)
    inputs: list[ConversionInput] = []
    rejected: list[ItemOutcome] = []
    bad_rows: list[tuple[int, dict[str, str]]] = []
    rows = 0
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        rows += 1
        raw = {name: row[i] if i < len(row) else "" for name, i in columns.items()}
        fields, errors = fields_parse(raw, now=now)
        if raw.get("occurred_at", "").strip() == "" and "occurred_at" not in errors:
            errors["occurred_at"] = "This column is required in a file."
        if fields is None or errors:
            bad_rows.append((line, errors))
            rejected.append(ItemOutcome(index=line, status=REJECTED, errors=errors))
            continue
        item_id = _item_id(raw.get("id") or None, errors)
        if errors:
            bad_rows.append((line, errors))
            rejected.append(ItemOutcome(index=line, status=REJECTED, errors=errors))
            continue
        key = f"upload:id:{item_id}" if item_id else f"upload:{sha256}:{line}"
        inputs.append(_input(line, key, fields))
    result = _ingest(inputs, rejected, source=ConversionSource.UPLOAD, received=rows)
    return UploadResult(sha256=sha256, result=result, bad_rows=bad_rows)


def _delimiter(text: str) -> str:
    """The header line's most frequent of comma, semicolon and tab (a spreadsheet in a
    comma-decimal locale saves with semicolons)."""
    first = text.split("\n", 1)[0]
    delimiter = max(",;\t", key=first.count)
    return delimiter if first.count(delimiter) else ","


def _columns(header: Iterable[str]) -> dict[str, int]:
    columns: dict[str, int] = {}
    for i, name in enumerate(header):
        key = name.strip().lower()
        if key in UPLOAD_COLUMNS and key not in columns:
            columns[key] = i
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if "phone" not in columns and "user_id" not in columns:
        missing.insert(0, "phone or user_id")
    if missing:
        raise UploadError(f"Missing column(s): {', '.join(missing)}.")
    return columns
