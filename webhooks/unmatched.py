"""Statuses that matched no message yet: kept, retried for a while, then reported."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from webhooks.models import UnmatchedStatus
from webhooks.payloads import StatusUpdate, json_clean, status_parse

logger = logging.getLogger(__name__)

# Retries per applier batch: the rows are re-parsed and matched with the batch's own
# statuses, so this bounds the extra work one batch takes on.
RETRY_BATCH = 1000
# Between two tries of one row: 2, 4, 8 … seconds, capped, so a backlog of strangers'
# statuses costs a few queries an hour each rather than one per applier run.
RETRY_MAX_DELAY_S = 300


@dataclass(frozen=True)
class Retry:
    row_id: int
    status: StatusUpdate


def unmatched_due_lock(*, now: datetime, limit: int = RETRY_BATCH) -> list[Retry]:
    """Lock the unmatched statuses due for another try (skipping rows another run holds)."""
    rows = (
        UnmatchedStatus.objects.filter(reported_at__isnull=True, next_try_at__lte=now)
        .order_by("next_try_at")
        .select_for_update(skip_locked=True)
        .only("id", "payload", "phone_number_id")[:limit]
    )
    retries = []
    for row in rows:
        status = status_parse(row.payload, phone_number_id=row.phone_number_id)
        if status is not None:
            retries.append(Retry(row.id, status))
    return retries


def unmatched_store(*, statuses: Sequence[tuple[StatusUpdate, int | None]], now: datetime) -> int:
    """Keep new unmatched statuses (with the event that brought them); returns how many."""
    rows: dict[tuple[str, str], tuple[StatusUpdate, int | None]] = {}
    for status, event_id in statuses:
        rows.setdefault((status.wamid, status.status), (status, event_id))
    if not rows:
        return 0
    columns: list[list[object]] = [[], [], [], [], [], []]
    for status, event_id in rows.values():
        values = (
            status.wamid,
            status.status,
            status.callback_data,
            status.phone_number_id,
            json.dumps(json_clean(status.raw)),
            event_id,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    with connection.cursor() as cursor:
        # Meta redelivers: a (wamid, status) already waiting is not stored twice.
        cursor.execute(
            """
            INSERT INTO webhooks_unmatchedstatus (wamid, status, callback_data, phone_number_id,
                payload, event_id, first_seen_at, attempts, next_try_at)
            SELECT u.wamid, u.status, u.callback_data, u.phone_number_id, u.payload,
                u.event_id, %s, 0, %s
            FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[],
                %s::bigint[]) AS u(wamid, status, callback_data, phone_number_id, payload,
                event_id)
            ON CONFLICT (wamid, status) DO NOTHING
            """,
            [now, now + timedelta(seconds=1), *columns],
        )
        return int(cursor.rowcount)


def unmatched_settle(
    *, matched_ids: Sequence[int], missed_ids: Sequence[int], now: datetime
) -> int:
    """Forget the retried rows that matched; back off or report the rest.

    Returns how many rows were reported in this call: past the retry window a status is
    marked reported and logged, and stays in the table for support.
    """
    if matched_ids:
        UnmatchedStatus.objects.filter(id__in=matched_ids).delete()
    if not missed_ids:
        return 0
    deadline = now - timedelta(seconds=settings.WEBHOOK_UNMATCHED_RETRY_SECONDS)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE webhooks_unmatchedstatus SET
                attempts = attempts + 1,
                next_try_at = %s + make_interval(secs => LEAST(power(2, attempts + 1), %s)),
                reported_at = CASE WHEN first_seen_at <= %s THEN %s END
            WHERE id = ANY(%s::bigint[])
            RETURNING reported_at IS NOT NULL
            """,
            [now, RETRY_MAX_DELAY_S, deadline, now, list(missed_ids)],
        )
        reported = sum(1 for (is_reported,) in cursor.fetchall() if is_reported)
    if reported:
        logger.warning(
            "%s status callbacks matched no message within %s s; reported",
            reported,
            settings.WEBHOOK_UNMATCHED_RETRY_SECONDS,
        )
    return reported
