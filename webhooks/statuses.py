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

from delivery.messages import APPLIED_STATUSES, MessageUpdate, statuses_lock
from delivery.models import STATUS_RANK
from webhooks.payloads import StatusUpdate


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
    rows = statuses_lock(ids=ids, wamids=wamids)
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
    if len(statuses) == 1:
        return _reduce_single(message_id, statuses[0])

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
        pricing_model=next((s.pricing_model for s in statuses if s.pricing_model), None),
        pricing_type=next((s.pricing_type for s in statuses if s.pricing_type), None),
    )


def _reduce_single(message_id: int, status: StatusUpdate) -> MessageUpdate:
    """``_reduce_one`` of a single status (the common case at one status per POST)."""
    kind, at = status.status, status.timestamp
    read_at = at if kind == "read" else None
    delivered_at = at if kind == "delivered" else read_at
    sent_at = at if kind == "sent" else delivered_at
    failed = kind == "failed"
    return MessageUpdate(
        message_id=message_id,
        status=kind if kind in APPLIED_STATUSES else None,
        wamid=status.wamid or None,
        sent_at=sent_at,
        delivered_at=delivered_at,
        read_at=read_at,
        failed_at=at if failed else None,
        error_code=status.error_code if failed else None,
        error_title=status.error_title if failed else None,
        error_details=status.error_details if failed else None,
        conversation_id=status.conversation_id or None,
        pricing_category=status.pricing_category or None,
        billable=status.billable,
        pricing_model=status.pricing_model or None,
        pricing_type=status.pricing_type or None,
    )


def _by_time(status: StatusUpdate) -> float:
    return status.timestamp.timestamp() if status.timestamp else 0.0
