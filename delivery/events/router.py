"""Giving committed events their place in line: from the outbox to ``delivery_event``.

Outbox ids come from a sequence, taken when a row is inserted, not when it commits: a
transaction that began earlier can commit an event with a lower id after a higher one is
visible. A subscriber reading the outbox by id would step over it and never see it. So one
router at a time (a transaction-level advisory lock: any number of events workers may try)
moves what is committed, in id order, into ``delivery_event`` with ``seq`` continuing from
the highest given; later rows always get higher ``seq``, and a cursor over ``seq`` misses
nothing.

Per message, order holds too: a message's row is locked by each statement that changes it,
so its next change (and that change's event) is written only after the previous one
committed, with a higher outbox id, and is routed in the same or a later pass.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

# pg_try_advisory_xact_lock key: "wbevents" in ASCII.
ROUTER_LOCK = 0x7762_6576_656E_7473
ROUTE_BATCH = 5000

# The outbox rows in id order, deleted as they are copied; seq continues from the highest
# (read under the lock, so no other router can give the same numbers).
_ROUTE_SQL = """
WITH moved AS (
    DELETE FROM delivery_eventoutbox
    WHERE id IN (SELECT id FROM delivery_eventoutbox ORDER BY id LIMIT %(limit)s)
    RETURNING id, event_id, event_type, message_id, occurred_at, data
), base AS (
    SELECT COALESCE(MAX(seq), 0) AS seq FROM delivery_event
)
INSERT INTO delivery_event (seq, event_id, event_type, message_id, occurred_at, data, routed_at)
SELECT base.seq + row_number() OVER (ORDER BY moved.id), moved.event_id, moved.event_type,
       moved.message_id, moved.occurred_at, moved.data, now()
FROM moved, base
"""

# Events every subscription has passed, older than the retention (dead letters keep theirs).
_PRUNE_SQL = """
DELETE FROM delivery_event e
WHERE e.seq <= (SELECT COALESCE(MIN(cursor), 9223372036854775807) FROM delivery_eventsubscription)
  AND e.routed_at < %(before)s
  AND NOT EXISTS (SELECT 1 FROM delivery_eventdeadletter d WHERE d.event_id = e.seq)
"""


def events_route(*, limit: int = ROUTE_BATCH) -> int:
    """Move up to ``limit`` committed outbox rows into line; how many (0 if another router
    holds the lock)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ROUTER_LOCK])
        (locked,) = cursor.fetchone()
        if not locked:
            return 0
        cursor.execute(_ROUTE_SQL, {"limit": limit})
        return int(cursor.rowcount)


def events_prune() -> int:
    before = timezone.now() - timedelta(days=settings.EVENTS_RETAIN_DAYS)
    with connection.cursor() as cursor:
        cursor.execute(_PRUNE_SQL, {"before": before})
        return int(cursor.rowcount)
