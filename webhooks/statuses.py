"""Status callbacks onto messages: reduce a batch to one row per message, write it once.

Meta sends several statuses per message, out of order and duplicated. A batch is reduced in
Python to the highest-ranked status per message (plus every timestamp, the failure and the
billing fields seen), then written with one ``UPDATE … FROM unnest(…)`` whose guard
``rank(new) > rank(current)`` makes late, duplicated and re-applied callbacks harmless.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.db import connection

from delivery.models import OPEN_STATUSES, STATUS_RANK
from webhooks.payloads import StatusUpdate

# Rank of a message's current state. Open states (pending, sending, unknown) rank below
# `sent`: any callback is evidence the send went out, which settles an ambiguous send.
# States absent here (dead, skipped, cancelled) are final and never moved by a callback.
CURRENT_RANK: dict[str, int] = {**{s: 0 for s in OPEN_STATUSES}, **STATUS_RANK}
# Statuses a callback can move a message to; `played` (voice) and anything unknown are
# counted in the event's summary but change nothing.
APPLIED_STATUSES = frozenset(s for s, rank in STATUS_RANK.items() if rank > 0)


@dataclass(frozen=True)
class MessageUpdate:
    """Everything a batch learned about one message."""

    message_id: int
    status: str | None  # the highest-ranked status received; None if none applies
    wamid: str | None  # to record when the row has none (matched by callback data)
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    failed_at: datetime | None
    error_code: int | None
    error_title: str | None
    error_details: str | None
    conversation_id: str | None
    pricing_category: str | None
    billable: bool | None


@dataclass(frozen=True)
class Resolution:
    matched: list[tuple[int, StatusUpdate]]
    unmatched: list[int]  # indexes into the statuses given


def statuses_resolve(statuses: Sequence[StatusUpdate]) -> Resolution:
    """Find each status's message and lock those rows, in id order.

    Our id from ``biz_opaque_callback_data`` wins; the wamid is the fallback, because the
    callback may arrive before the sending worker has stored it. Locking in id order here
    means two appliers (or an applier and the sender's bulk write) touching the same
    messages queue behind each other instead of deadlocking inside the UPDATE.
    """
    if not statuses:
        return Resolution([], [])
    ids = sorted({s.message_id for s in statuses if s.message_id is not None})
    wamids = sorted({s.wamid for s in statuses})
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT id, wamid FROM delivery_message
            WHERE id = ANY(%s::bigint[]) OR wamid = ANY(%s::text[])
            ORDER BY id
            FOR UPDATE
            """,
            [ids, wamids],
        )
        rows = cursor.fetchall()
    known_ids = {row[0] for row in rows}
    by_wamid = {row[1]: row[0] for row in rows if row[1] is not None}
    matched: list[tuple[int, StatusUpdate]] = []
    unmatched: list[int] = []
    for index, status in enumerate(statuses):
        if status.message_id is not None and status.message_id in known_ids:
            matched.append((status.message_id, status))
        elif status.wamid in by_wamid:
            matched.append((by_wamid[status.wamid], status))
        else:
            unmatched.append(index)
    # A wamid already on some row is never written onto another (the column is unique).
    matched = [
        (mid, s if by_wamid.get(s.wamid, mid) == mid else replace(s, wamid=""))
        for mid, s in matched
    ]
    return Resolution(matched, unmatched)


def statuses_reduce(matched: Iterable[tuple[int, StatusUpdate]]) -> list[MessageUpdate]:
    """One update per message: the highest rank wins, every timestamp seen is kept.

    A `read` implies `delivered` and any of sent/delivered/read implies `sent`, so the
    earlier timestamps are filled from the later ones when their own callback is missing.
    """
    grouped: dict[int, list[StatusUpdate]] = defaultdict(list)
    for message_id, status in matched:
        grouped[message_id].append(status)
    updates = [_reduce_one(message_id, grouped[message_id]) for message_id in sorted(grouped)]
    return _wamids_unique(updates)


def _wamids_unique(updates: list[MessageUpdate]) -> list[MessageUpdate]:
    """Offer no wamid that two messages of the batch claim (the column is unique).

    Only contradictory callback data can cause it; the statuses still apply, the wamid
    stays unrecorded rather than failing the whole batch on the unique index.
    """
    claims = Counter(u.wamid for u in updates if u.wamid)
    return [replace(u, wamid=None) if u.wamid and claims[u.wamid] > 1 else u for u in updates]


def _reduce_one(message_id: int, statuses: list[StatusUpdate]) -> MessageUpdate:
    def first(kind: str) -> datetime | None:
        times = [s.timestamp for s in statuses if s.status == kind and s.timestamp]
        return min(times) if times else None

    applied = [s for s in statuses if s.status in APPLIED_STATUSES]
    best = max(applied, key=lambda s: STATUS_RANK[s.status]) if applied else None
    read_at = first("read")
    delivered_at = first("delivered") or read_at
    sent_at = first("sent") or delivered_at
    failures = [s for s in statuses if s.status == "failed"]
    # The failed callback that says why (has an error code), the latest if several.
    failure = (
        max(failures, key=lambda s: (s.error_code is not None, _by_time(s))) if failures else None
    )
    wamids = [s.wamid for s in sorted(statuses, key=_by_time) if s.wamid]
    return MessageUpdate(
        message_id=message_id,
        status=best.status if best else None,
        wamid=wamids[0] if wamids else None,
        sent_at=sent_at,
        delivered_at=delivered_at,
        read_at=read_at,
        failed_at=failure.timestamp if failure else None,
        error_code=failure.error_code if failure else None,
        error_title=failure.error_title if failure else None,
        error_details=failure.error_details if failure else None,
        conversation_id=next((s.conversation_id for s in statuses if s.conversation_id), None),
        pricing_category=next((s.pricing_category for s in statuses if s.pricing_category), None),
        billable=next((s.billable for s in statuses if s.billable is not None), None),
    )


def _by_time(status: StatusUpdate) -> float:
    return status.timestamp.timestamp() if status.timestamp else 0.0


def _rank_sql(column: str) -> str:
    cases = " ".join(f"WHEN '{status}' THEN {rank}" for status, rank in CURRENT_RANK.items())
    return f"(CASE {column} {cases} END)"


_RANK_NEW = _rank_sql("u.status")
_RANK_OLD = _rank_sql("m.status")
_ADVANCES = f"{_RANK_NEW} > {_RANK_OLD}"
_FAILS = f"({_ADVANCES} AND u.status = 'failed')"

# One statement per batch, whatever its size: a row per message is ~7x slower (a round trip
# and a commit each) and would let a late callback race an earlier one.
# - The status moves only forward: rank(new) > rank(current). Rank is NULL for final states
#   (dead, skipped, cancelled), and NULL > x is never true, so they are not touched.
# - Timestamps, the wamid and the billing fields only fill blanks, so a late `delivered`
#   still records its time and pricing under a `read` without moving the status back.
#   (A wamid is offered only when no row holds it yet: statuses_resolve/_wamids_unique.)
# - The failure is written only when `failed` is the status being applied, and appended to
#   the row's error history, so a failed callback arriving after `delivered` changes nothing.
# - The WHERE clause lets through only rows that gain something: re-applying the same batch
#   updates no row, which keeps it idempotent and cheap.
# The rank CASE and the status names are built from constants, never from input.
MESSAGE_UPDATE_SQL = f"""
UPDATE delivery_message AS m SET
    status = CASE WHEN {_ADVANCES} THEN u.status ELSE m.status END,
    wamid = COALESCE(m.wamid, u.wamid),
    sent_at = COALESCE(m.sent_at, u.sent_at),
    delivered_at = COALESCE(m.delivered_at, u.delivered_at),
    read_at = COALESCE(m.read_at, u.read_at),
    failed_at = CASE WHEN {_FAILS} THEN u.failed_at ELSE m.failed_at END,
    last_error_code = CASE WHEN {_FAILS} THEN u.error_code ELSE m.last_error_code END,
    last_error_title = CASE
        WHEN {_FAILS} THEN COALESCE(u.error_title, '') ELSE m.last_error_title END,
    last_error_details = CASE
        WHEN {_FAILS} THEN COALESCE(u.error_details, '') ELSE m.last_error_details END,
    error_history = CASE WHEN {_FAILS} THEN m.error_history || jsonb_build_array(
        jsonb_build_object(
            'at', u.failed_at, 'attempt', m.attempt, 'code', u.error_code,
            'title', u.error_title, 'details', u.error_details, 'outcome', 'failed_callback'))
        ELSE m.error_history END,
    conversation_id = COALESCE(NULLIF(m.conversation_id, ''), u.conversation_id, ''),
    pricing_category = COALESCE(NULLIF(m.pricing_category, ''), u.pricing_category, ''),
    billable = COALESCE(m.billable, u.billable)
FROM unnest(
    %s::bigint[], %s::text[], %s::text[],
    %s::timestamptz[], %s::timestamptz[], %s::timestamptz[], %s::timestamptz[],
    %s::integer[], %s::text[], %s::text[], %s::text[], %s::text[], %s::boolean[]
) AS u(id, status, wamid, sent_at, delivered_at, read_at, failed_at,
       error_code, error_title, error_details, conversation_id, pricing_category, billable)
WHERE m.id = u.id
  AND {_RANK_OLD} IS NOT NULL
  AND (
      {_ADVANCES}
      OR (m.wamid IS NULL AND u.wamid IS NOT NULL)
      OR (m.sent_at IS NULL AND u.sent_at IS NOT NULL)
      OR (m.delivered_at IS NULL AND u.delivered_at IS NOT NULL)
      OR (m.read_at IS NULL AND u.read_at IS NOT NULL)
      OR (m.conversation_id = '' AND u.conversation_id IS NOT NULL)
      OR (m.pricing_category = '' AND u.pricing_category IS NOT NULL)
      OR (m.billable IS NULL AND u.billable IS NOT NULL)
  )
"""  # noqa: S608


def message_updates_write(updates: Sequence[MessageUpdate]) -> int:
    """Apply the reduced updates in one statement; returns how many rows changed."""
    if not updates:
        return 0
    columns: list[list[object]] = [[] for _ in range(13)]
    for u in updates:
        values = (
            u.message_id,
            u.status,
            u.wamid,
            u.sent_at,
            u.delivered_at,
            u.read_at,
            u.failed_at,
            u.error_code,
            u.error_title,
            u.error_details,
            u.conversation_id,
            u.pricing_category,
            u.billable,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    with connection.cursor() as cursor:
        cursor.execute(MESSAGE_UPDATE_SQL, columns)
        return int(cursor.rowcount)
