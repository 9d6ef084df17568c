"""Delivering events to a subscription: in order, in batches, at least once.

One subscription is delivered by one worker at a time: its row is locked (``FOR UPDATE
SKIP LOCKED``) for the whole batch, so several events workers share the subscriptions and
never send one's batches out of order. The cursor moves past a batch only when the receiver
answered 2xx and in the same transaction as that answer is recorded; a worker killed
mid-batch leaves the cursor where it was, and the batch is sent again (the same event ids:
the receiver drops what it already has).

A failure (a refused connection, a timeout, any status but 2xx) keeps the subscription on
the same batch and sets its next try after an exponential backoff with full jitter
(uniform between 0 and base·2^attempts, capped). Events the receiver has not taken within
``EVENTS_RETRY_FOR_S`` of happening are dead-lettered, so the ones after them flow again;
a subscription failing for ``EVENTS_PAUSE_AFTER_S`` is paused (the alert names it).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from delivery.events.destinations import checked_session
from delivery.events.signing import SIGNATURE_HEADER, signature
from delivery.models import Event, EventDeadLetter, EventSubscription

logger = logging.getLogger(__name__)

USER_AGENT = "whatsblast-events/1"
# A subscription with nothing new looks again this soon (or when the router wakes it).
IDLE_RECHECK_MS = 500
_session = checked_session()

# One event as a receiver gets it, built by PostgreSQL: the worker only frames the batch and
# signs it, so its CPU per event is a string join, not a JSON parse and dump (the body of a
# batch of 500 cost the worker 23 ms per 1,000 events in Python; PostgreSQL builds it in a
# fraction of that, on the rows it reads anyway).
EVENT_JSON_SQL = """('{"id":"' || e.event_id || '","type":' || to_json(e.event_type)
    || ',"sequence":' || e.seq || ',"occurred_at":' || to_json(e.occurred_at)
    || ',"message_id":' || COALESCE(e.message_id::text, 'null')
    || ',"data":' || e.data::text || '}')"""
# Events ``e`` as the comma-joined list a body holds, in line order.
EVENTS_JSON_SQL = f"string_agg({EVENT_JSON_SQL}, ',' ORDER BY e.seq)"

# The event types a subscription wants (none listed: every type).
_WANTED_SQL = "(cardinality(%(types)s::varchar[]) = 0 OR e.event_type = ANY(%(types)s))"

# The next batch: events after the cursor and up to the highest in line (every event up to
# it is committed: the router writes whole batches), of the types the subscription wants,
# in line order; with how many, the last one's seq and that highest.
_BATCH_SQL = f"""
WITH line AS (
    SELECT COALESCE(MAX(seq), 0) AS highest FROM delivery_event
), batch AS (
    SELECT e.*
    FROM delivery_event e, line
    WHERE e.seq > %(cursor)s AND e.seq <= line.highest AND {_WANTED_SQL}
    ORDER BY e.seq
    LIMIT %(limit)s
)
SELECT (SELECT highest FROM line), count(*), MAX(e.seq), MIN(e.occurred_at), {EVENTS_JSON_SQL}
FROM batch e
"""  # noqa: S608 - built from constants

# The occurred_at of each event of a failed batch, to set aside those past their retry time.
_BATCH_TIMES_SQL = f"""
SELECT e.seq, e.occurred_at FROM delivery_event e
WHERE e.seq > %(cursor)s AND e.seq <= %(last)s AND {_WANTED_SQL}
ORDER BY e.seq
"""  # noqa: S608 - built from constants

_EVENTS_OF_SQL = f"SELECT {EVENTS_JSON_SQL} FROM delivery_event e WHERE e.seq = ANY(%s)"  # noqa: S608 - built from constants


@dataclass(frozen=True)
class BatchOutcome:
    subscription_id: int
    events: int
    delivered: bool
    dead_lettered: int = 0
    paused: bool = False
    error: str = ""


def body_of(subscription_id: int, events_json: str) -> bytes:
    """The POST body: the subscription and its events (``EVENTS_JSON_SQL``)."""
    return f'{{"subscription_id":{int(subscription_id)},"events":[{events_json}]}}'.encode()


def events_json_of(seqs: list[int]) -> str:
    """The events ``seqs`` as a body holds them, in line order."""
    with connection.cursor() as cursor:
        cursor.execute(_EVENTS_OF_SQL, [seqs])
        (events_json,) = cursor.fetchone()
    return str(events_json or "")


@dataclass(frozen=True)
class Batch:
    events: int
    last_seq: int
    first_occurred_at: datetime


def post_signed(url: str, secret: str, body: bytes) -> str:
    """POST ``body`` signed; "" when the receiver answered 2xx, else what went wrong."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature(secret=secret, timestamp=int(time.time()), body=body),
    }
    try:
        response = _session.post(
            url,
            data=body,
            headers=headers,
            timeout=settings.EVENTS_TIMEOUT_S,
            allow_redirects=False,
        )
    except requests.RequestException as exc:
        return f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return ""
    return f"HTTP {response.status_code}: {response.text[:200]}"[:500]


def backoff_s(attempts: int) -> float:
    """Full jitter: uniform in [0, min(max, base·2^(attempts-1))]."""
    ceiling = min(
        settings.EVENTS_BACKOFF_MAX_S,
        settings.EVENTS_BACKOFF_BASE_S * (2 ** min(max(attempts - 1, 0), 40)),
    )
    return random.uniform(0, ceiling)  # noqa: S311 (spreading retries, not a secret)


# The subscription due first that no other worker is delivering, locked for the batch.
# The worker's statements are written out: at a steady flow a pass is a handful of them,
# and through the ORM building them cost the worker more than the events did.
_CLAIM_SQL = """
SELECT id, url, secret, cursor, event_types, attempts, failing_since
FROM delivery_eventsubscription
WHERE active AND next_attempt_at <= clock_timestamp()
ORDER BY next_attempt_at
LIMIT 1
FOR UPDATE SKIP LOCKED
"""

# Nothing new for it: its cursor passes what it does not want; it looks again shortly.
_IDLE_SQL = """
UPDATE delivery_eventsubscription
SET cursor = GREATEST(cursor, %(passed)s),
    next_attempt_at = clock_timestamp() + %(recheck_ms)s * interval '1 millisecond'
WHERE id = %(id)s
"""

# The receiver took the batch: the cursor passes it, the failure count clears.
_DELIVERED_SQL = """
UPDATE delivery_eventsubscription
SET cursor = %(cursor)s, failing_since = NULL, attempts = 0, last_error = '',
    next_attempt_at = clock_timestamp() + %(wait_ms)s * interval '1 millisecond',
    last_delivered_at = clock_timestamp(), delivered_total = delivered_total + %(events)s
WHERE id = %(id)s
"""


@dataclass(frozen=True)
class Due:
    """A subscription claimed for one batch."""

    id: int
    url: str
    secret: str
    cursor: int
    event_types: list[str]
    attempts: int
    failing_since: datetime | None


def subscription_deliver_next(*, now: datetime | None = None) -> BatchOutcome | None:
    """Send the next batch of one due subscription; ``None`` when none is due and unlocked."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL)
        row = cursor.fetchone()
        if row is None:
            return None
        sub_id, url, secret, sub_cursor, event_types, attempts, failing_since = row
        due = Due(sub_id, url, secret, sub_cursor, list(event_types or []), attempts, failing_since)
        cursor.execute(
            _BATCH_SQL,
            {"cursor": due.cursor, "types": due.event_types, "limit": settings.EVENTS_BATCH_SIZE},
        )
        highest, count, last_seq, first_occurred_at, events_json = cursor.fetchone()
        # What a short batch did not find up to the highest seq, the subscription does not
        # want: its cursor may pass it, and a subscription to rare types does not scan the
        # same range again and again (nor hold back pruning).
        short = count < settings.EVENTS_BATCH_SIZE
        passed = highest if short else last_seq
        if not count:
            # Nothing new: look again shortly, or when the router moves events (wake_idle).
            cursor.execute(
                _IDLE_SQL, {"passed": passed, "recheck_ms": IDLE_RECHECK_MS, "id": due.id}
            )
            return BatchOutcome(due.id, 0, True)
        batch = Batch(count, last_seq, first_occurred_at)
        error = post_signed(due.url, due.secret, body_of(due.id, events_json))
        if error:
            return _failed(due, batch, error, now or timezone.now())
        # A short batch took everything there was: due again when the router wakes it (or
        # shortly), not at once only to find nothing. A full one: the next may be waiting.
        cursor.execute(
            _DELIVERED_SQL,
            {
                "cursor": max(last_seq, passed),
                "wait_ms": IDLE_RECHECK_MS if short else 0,
                "events": count,
                "id": due.id,
            },
        )
        return BatchOutcome(due.id, count, True)


def _failed(due: Due, batch: Batch, error: str, now: datetime) -> BatchOutcome:
    attempts = due.attempts + 1
    failing_since = due.failing_since or now
    update: dict[str, Any] = {
        "attempts": attempts,
        "failing_since": failing_since,
        "last_error": error,
        "next_attempt_at": now + timedelta(seconds=backoff_s(attempts)),
    }
    # Events past their retry time are set aside, in order, up to the first that is not.
    expired = now - timedelta(seconds=settings.EVENTS_RETRY_FOR_S)
    stale: list[int] = []
    if batch.first_occurred_at < expired:
        with connection.cursor() as cursor:
            cursor.execute(
                _BATCH_TIMES_SQL,
                {"cursor": due.cursor, "last": batch.last_seq, "types": due.event_types},
            )
            for seq, occurred_at in cursor.fetchall():
                if occurred_at >= expired:
                    break
                stale.append(seq)
    if stale:
        EventDeadLetter.objects.bulk_create(
            [
                EventDeadLetter(
                    subscription_id=due.id,
                    event=Event(seq=seq),
                    attempts=attempts,
                    last_error=error,
                )
                for seq in stale
            ],
            ignore_conflicts=True,
        )
        update.update(cursor=stale[-1], attempts=0, next_attempt_at=now)
    paused = (
        settings.EVENTS_PAUSE_AFTER_S > 0
        and (now - failing_since).total_seconds() >= settings.EVENTS_PAUSE_AFTER_S
    )
    if paused:
        update.update(
            active=False,
            paused_reason=(f"Paused after failing for {_duration(now - failing_since)}: {error}")[
                :500
            ],
        )
        logger.error("event subscription %s paused: %s", due.id, error)
    else:
        logger.warning("event subscription %s: delivery failed (%s)", due.id, error)
    EventSubscription.objects.filter(pk=due.id).update(**update)
    return BatchOutcome(due.id, batch.events, False, len(stale), paused, error)


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


# Subscriptions waiting only for events (not backing off after a failure) become due now;
# one being delivered (its row locked for the POST) is skipped, not waited for.
_WAKE_SQL = """
UPDATE delivery_eventsubscription SET next_attempt_at = clock_timestamp()
WHERE id IN (
    SELECT id FROM delivery_eventsubscription
    WHERE active AND attempts = 0 AND next_attempt_at > clock_timestamp()
    FOR UPDATE SKIP LOCKED
)
"""


def subscriptions_wake_idle() -> int:
    """New events are in line: subscriptions that are waiting only for events are due now. One
    being delivered looks for more as soon as its batch is done."""
    with connection.cursor() as cursor:
        cursor.execute(_WAKE_SQL)
        return int(cursor.rowcount)
