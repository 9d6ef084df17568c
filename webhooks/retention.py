"""How long Meta's callbacks are kept once they have been dealt with.

Every POST is stored (``WebhookEvent``): one row per callback, a million or more on a busy
day, and nothing else ever removes one. Left alone the table only grows, and each vacuum
pass over it takes longer than the last while the same disks serve the sends. Past
``WEBHOOK_EVENT_RETENTION_HOURS`` (default 14 days: past Meta's own redelivery window of
7 days, long enough for support to look back at a campaign) an event that was applied,
rejected or failed is deleted. A pending one is never: it has not been applied yet.

The purge walks the table from its oldest row, in primary-key order, one batch at a time,
within a time budget per tick. Ids are handed out in arrival order, so the oldest rows are
at the head of the key: each batch is an index range read at the head, never a scan for
old rows through the whole table (the statement's comment says more). A gate in Redis lets
one tick in a minute purge, from any number of tickers; a purge cut short by its budget
leaves the next tick due, so a backlog is worked off tick after tick.

What the applier made of each event (message statuses, inbound messages, template and
quality changes) lives in its own tables and is not touched; only the raw POST goes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from webhooks.models import WebhookEvent, WebhookEventStatus
from whatsblast.core.redis import get_redis

PURGE_BATCH = 5_000
PURGE_EVERY_S = 60
_PURGE_DUE_KEY = "wb:webhooks:purge_due"

# The head of the table in key order, then of those the ones past retention and done with.
# The inner SELECT is a plain index range read of the oldest PURGE_BATCH keys: it costs
# the same whether or not any of them is old. Asking for the old rows directly (WHERE
# received_at < cutoff ORDER BY id LIMIT n) would, on a day with none to delete, read the
# whole key looking for them. A pending row at the head is left where it is; the rows
# after it are still purged, until more than a batch of pending rows would hold the head
# (the applier's lag alert fires long before).
_PURGE_SQL = f"""
WITH head AS (
    SELECT id FROM {WebhookEvent._meta.db_table} ORDER BY id LIMIT %(batch)s
)
DELETE FROM {WebhookEvent._meta.db_table} AS e
USING head
WHERE e.id = head.id
  AND e.received_at < %(cutoff)s
  AND e.status <> %(pending)s
"""  # noqa: S608  (the table name is the model's own, the values are parameters)


@dataclass(frozen=True)
class PurgeReport:
    deleted: int
    batches: int
    # False: the time budget ran out with old rows still at the head of the key.
    caught_up: bool = True

    def as_dict(self) -> dict[str, int | bool]:
        return {"deleted": self.deleted, "batches": self.batches, "caught_up": self.caught_up}


def retention() -> timedelta | None:
    """How long a dealt-with event is kept; None keeps every one (the setting at 0)."""
    hours = float(settings.WEBHOOK_EVENT_RETENTION_HOURS)
    return timedelta(hours=hours) if hours > 0 else None


def events_purge(*, budget_seconds: float = 1.0, batch: int = PURGE_BATCH) -> PurgeReport:
    """Delete the events past retention, a batch at a time, until none is left or time is up.

    Each batch is its own short transaction: the rows it locks are old ones nobody else
    touches, and a vacuum can reclaim them while the next batch runs.
    """
    kept_for = retention()
    if kept_for is None:
        return PurgeReport(0, 0)
    deadline = time.monotonic() + budget_seconds
    deleted = batches = 0
    while True:
        cutoff = timezone.now() - kept_for
        with connection.cursor() as cursor:
            cursor.execute(
                _PURGE_SQL,
                {"batch": batch, "cutoff": cutoff, "pending": WebhookEventStatus.PENDING},
            )
            removed = cursor.rowcount
        batches += 1
        deleted += removed
        if removed < batch // 2:
            # Less than half a batch: the head holds rows still kept, so the old ones are gone.
            return PurgeReport(deleted, batches)
        if time.monotonic() >= deadline:
            return PurgeReport(deleted, batches, caught_up=False)


def events_purge_schedule(
    *, budget_seconds: float = 1.0, batch: int = PURGE_BATCH
) -> PurgeReport | None:
    """Purge from this tick if no tick has within PURGE_EVERY_S; None when it was not due.

    A purge that ran out of time before the old rows did leaves the next tick due at once:
    the deletes then keep pace with any callback rate. Held to one budget a minute, they
    did not: the soak's ~400 callbacks a second on a loaded machine outran the 10,000-15,000
    rows a one-second purge deleted, and the table held 295,000 rows where its seven
    minutes' retention makes 170,000.
    """
    if retention() is None:
        return None
    gate = get_redis()
    if not gate.set(_PURGE_DUE_KEY, 1, nx=True, ex=PURGE_EVERY_S):
        return None
    report = events_purge(budget_seconds=budget_seconds, batch=batch)
    if not report.caught_up:
        gate.delete(_PURGE_DUE_KEY)
    return report
