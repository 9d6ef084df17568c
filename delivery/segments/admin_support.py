"""What the admin's segment builder and contact list ask of the contacts, kept out of views.

* ``segment_preview``: the live count and sample while a segment is edited, under a
  statement timeout (the builder asks after every change, a slow rule must not hold a
  connection for minutes);
* ``attribute_keys``: the uploaded attribute names the builder offers, read from the newest
  contacts only (an upload gives all its contacts the same keys: a sample finds them);
* ``builder_choices``: the lists and campaigns a rule may name;
* ``contacts_in_segment``: a contact queryset narrowed to a segment's contacts, through the
  segment's own SQL (``delivery.segments.sql``), every value bound;
* ``contacts_csv``: contacts as CSV lines, streamed from a server-side cursor, each text
  cell made safe for spreadsheets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import CharField, F, Func, QuerySet
from django.db.models.expressions import RawSQL

from campaigns.audience.rejects import spreadsheet_safe
from campaigns.models import Campaign, Contact, ContactList
from delivery.segments.services import SegmentMatch, segment_compile, segment_match
from whatsblast.core.csv_lines import csv_line_writer

# The contacts the builder's live sample shows.
SAMPLE_SIZE = 10
# Newest contacts whose attribute keys the builder offers, and at most this many keys.
ATTRIBUTE_KEY_SAMPLE = 2_000
MAX_ATTRIBUTE_KEYS = 300
# Lists and campaigns offered in the builder's selects (newest campaigns first); a rule
# naming another one still shows, and the JSON view takes any.
MAX_CHOICES = 500
# A live count that takes longer than this is stopped (SQLSTATE 57014, query_canceled).
COUNT_TIMEOUT_MS = 10_000
_QUERY_CANCELED = "57014"
# Rows fetched per round trip of the export's server-side cursor.
CHUNK_ROWS = 5_000

CONTACT_COLUMNS = ("phone", "user_id", "name", "opted_in_at", "opted_out_at")


class SegmentTooSlow(Exception):
    """Counting the rules took longer than the live count allows."""


def segment_preview(
    rules: object, *, sample: int = SAMPLE_SIZE, timeout_ms: int | None = None
) -> SegmentMatch:
    """How many contacts ``rules`` match and the first ``sample``; ``RuleError`` for a bad
    rule (or JSON), ``SegmentTooSlow`` past ``timeout_ms`` (``COUNT_TIMEOUT_MS``)."""
    timeout_ms = COUNT_TIMEOUT_MS if timeout_ms is None else timeout_ms
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('statement_timeout')")
            (previous,) = cursor.fetchone()
            # Local to this transaction (or savepoint): never left on the connection.
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(timeout_ms)])
            match = segment_match(rules, sample=sample)
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == _QUERY_CANCELED:
            raise SegmentTooSlow(
                f"Counting took longer than {timeout_ms // 1000} seconds: narrow the rules "
                "(a list or a campaign first) and try again."
            ) from exc
        raise
    return match


_KEYS_SQL = """
SELECT DISTINCT k.key
  FROM (SELECT attributes FROM campaigns_contact
         WHERE jsonb_typeof(attributes) = 'object'
         ORDER BY id DESC LIMIT %s) AS c
 CROSS JOIN LATERAL jsonb_object_keys(c.attributes) AS k(key)
 ORDER BY k.key
 LIMIT %s
"""


def attribute_keys(*, sample: int = ATTRIBUTE_KEY_SAMPLE) -> list[str]:
    """The attribute names of the newest ``sample`` contacts, sorted: one index scan."""
    with connection.cursor() as cursor:
        cursor.execute(_KEYS_SQL, [sample, MAX_ATTRIBUTE_KEYS])
        return [str(key) for (key,) in cursor.fetchall()]


def builder_choices() -> dict[str, Any]:
    """The lists (by name, as rules name them) and the newest campaigns (by id)."""
    lists = list(ContactList.objects.order_by("name").values_list("name", flat=True)[:MAX_CHOICES])
    campaigns = [
        {"id": pk, "name": name, "status": status}
        for pk, name, status in Campaign.objects.order_by("-id").values_list(
            "id", "name", "status"
        )[:MAX_CHOICES]
    ]
    return {"lists": lists, "campaigns": campaigns}


# segment_sql's placeholders: %(s0)s, %(s1)s, ... (a doubled %% is a literal per cent).
_NAMED = re.compile(r"(?<!%)%\((\w+)\)s")


def positional_sql(condition: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
    """``condition``'s named placeholders as ``%s``, with the values in their order: the
    form Django's ``RawSQL`` (and any query it joins) takes."""
    values: list[Any] = []

    def placeholder(found: re.Match[str]) -> str:
        values.append(params[found.group(1)])
        return "%s"

    return _NAMED.sub(placeholder, condition), values


def contacts_in_segment(queryset: QuerySet[Contact], rules: object) -> QuerySet[Contact]:
    """``queryset`` narrowed to the contacts ``rules`` match now (``RuleError`` if they
    cannot be used, such as a list deleted since the segment was saved)."""
    compiled = segment_compile(rules)
    condition, params = positional_sql(compiled.condition, compiled.params)
    # segment_sql builds the text from its own constants and binds every value.
    ids = RawSQL(f"SELECT c.id FROM campaigns_contact AS c WHERE {condition}", params)  # noqa: S608, S611
    return queryset.filter(pk__in=ids)


def _attribute_keys_of(queryset: QuerySet[Contact]) -> list[str]:
    """Every attribute name among the contacts of ``queryset``, sorted."""
    keys = (
        Contact.objects.filter(pk__in=queryset.order_by().values("pk"))
        .annotate(kind=Func(F("attributes"), function="jsonb_typeof", output_field=CharField()))
        .filter(kind="object")
        .annotate(key=Func(F("attributes"), function="jsonb_object_keys", output_field=CharField()))
        .order_by()
        .values_list("key", flat=True)
        .distinct()
    )
    return sorted(str(key) for key in keys)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return spreadsheet_safe(value)
    return spreadsheet_safe(json.dumps(value, ensure_ascii=False))


def contacts_csv_rows(queryset: QuerySet[Contact]) -> Iterator[list[str]]:
    """The header (the contact's columns, then one per attribute name), then one row per
    contact of ``queryset`` in its order, fetched in chunks."""
    keys = _attribute_keys_of(queryset)
    # An attribute named like a contact column keeps both apart.
    headers = [f"attributes.{k}" if k in CONTACT_COLUMNS else k for k in keys]
    yield [*CONTACT_COLUMNS, *(spreadsheet_safe(h) for h in headers)]
    # The ids as a semi-join: the list's own queryset may be DISTINCT (a filter on lists).
    contacts = Contact.objects.filter(pk__in=queryset.order_by().values("pk"))
    if queryset.query.order_by:
        contacts = contacts.order_by(*queryset.query.order_by)
    rows = contacts.values_list(*CONTACT_COLUMNS, "attributes").iterator(chunk_size=CHUNK_ROWS)
    for *columns, attributes in rows:
        values = attributes if isinstance(attributes, dict) else {}
        yield [_cell(v) for v in columns] + [_cell(values.get(k)) for k in keys]


def contacts_csv(queryset: QuerySet[Contact]) -> Iterator[str]:
    """CSV lines of ``contacts_csv_rows``, one string per line, for a streamed response."""
    writer = csv_line_writer()
    for row in contacts_csv_rows(queryset):
        yield writer.writerow(row)
