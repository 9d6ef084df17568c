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

import json
import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from delivery.events.signing import SIGNATURE_HEADER, signature
from delivery.models import Event, EventDeadLetter, EventSubscription

logger = logging.getLogger(__name__)

USER_AGENT = "whatsblast-events/1"
# A subscription with nothing new looks again this soon (or when the router wakes it).
IDLE_RECHECK_MS = 500
_session = requests.Session()

# The next batch: events after the cursor, of the types it wants, in line order.
_BATCH_SQL = """
SELECT seq, event_id, event_type, message_id, occurred_at, data
FROM delivery_event
WHERE seq > %(cursor)s AND seq <= %(highest)s
  AND (cardinality(%(types)s::varchar[]) = 0 OR event_type = ANY(%(types)s))
ORDER BY seq
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class BatchOutcome:
    subscription_id: int
    events: int
    delivered: bool
    dead_lettered: int = 0
    paused: bool = False
    error: str = ""


def body_of(subscription_id: int, rows: list[tuple[Any, ...]]) -> bytes:
    events = [
        {
            "id": str(event_id),
            "type": event_type,
            "sequence": seq,
            "occurred_at": occurred_at.isoformat(),
            "message_id": message_id,
            "data": data if isinstance(data, dict) else json.loads(data),
        }
        for seq, event_id, event_type, message_id, occurred_at, data in rows
    ]
    return json.dumps(
        {"subscription_id": subscription_id, "events": events}, separators=(",", ":")
    ).encode()


def post_signed(subscription: EventSubscription, body: bytes) -> str:
    """POST ``body`` signed; "" when the receiver answered 2xx, else what went wrong."""
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature(
            secret=subscription.secret.reveal(), timestamp=int(time.time()), body=body
        ),
    }
    try:
        response = _session.post(
            subscription.url,
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


def subscription_deliver_next(*, now: datetime | None = None) -> BatchOutcome | None:
    """Send the next batch of one due subscription; ``None`` when none is due and unlocked."""
    with transaction.atomic():
        subscription = (
            EventSubscription.objects.select_for_update(skip_locked=True)
            .filter(active=True, next_attempt_at__lte=timezone.now())
            .order_by("next_attempt_at")
            .first()
        )
        if subscription is None:
            return None
        with connection.cursor() as cursor:
            # Every event up to the highest seq is committed (the router writes whole
            # batches), so what the batch did not find below it, the subscription does not
            # want: its cursor may pass it, and a subscription to rare types does not scan
            # the same range again and again (nor hold back pruning).
            cursor.execute("SELECT COALESCE(MAX(seq), 0) FROM delivery_event")
            (highest,) = cursor.fetchone()
            cursor.execute(
                _BATCH_SQL,
                {
                    "cursor": subscription.cursor,
                    "highest": highest,
                    "types": list(subscription.event_types),
                    "limit": settings.EVENTS_BATCH_SIZE,
                },
            )
            rows = cursor.fetchall()
        passed = highest if len(rows) < settings.EVENTS_BATCH_SIZE else rows[-1][0]
        if not rows:
            # Nothing new: look again shortly, or when the router moves events (wake_idle).
            EventSubscription.objects.filter(pk=subscription.pk).update(
                cursor=max(subscription.cursor, passed),
                next_attempt_at=timezone.now() + timedelta(milliseconds=IDLE_RECHECK_MS),
            )
            return BatchOutcome(subscription.pk, 0, True)
        error = post_signed(subscription, body_of(subscription.pk, rows))
        if not error:
            return _delivered(subscription, rows, passed)
        return _failed(subscription, rows, error, now or timezone.now())


def _delivered(
    subscription: EventSubscription, rows: list[tuple[Any, ...]], passed: int
) -> BatchOutcome:
    now = timezone.now()
    # A short batch took everything there was: due again when the router wakes it (or
    # shortly), not at once only to find nothing. A full one: the next may be waiting.
    short = len(rows) < settings.EVENTS_BATCH_SIZE
    EventSubscription.objects.filter(pk=subscription.pk).update(
        cursor=max(rows[-1][0], passed),
        failing_since=None,
        attempts=0,
        next_attempt_at=now + timedelta(milliseconds=IDLE_RECHECK_MS if short else 0),
        last_error="",
        last_delivered_at=now,
        delivered_total=F("delivered_total") + len(rows),
    )
    return BatchOutcome(subscription.pk, len(rows), True)


def _failed(
    subscription: EventSubscription, rows: list[tuple[Any, ...]], error: str, now: datetime
) -> BatchOutcome:
    attempts = subscription.attempts + 1
    failing_since = subscription.failing_since or now
    update: dict[str, Any] = {
        "attempts": attempts,
        "failing_since": failing_since,
        "last_error": error,
        "next_attempt_at": now + timedelta(seconds=backoff_s(attempts)),
    }
    # Events past their retry time are set aside, in order, up to the first that is not.
    expired = now - timedelta(seconds=settings.EVENTS_RETRY_FOR_S)
    stale: list[tuple[Any, ...]] = []
    for row in rows:
        if row[4] >= expired:
            break
        stale.append(row)
    if stale:
        EventDeadLetter.objects.bulk_create(
            [
                EventDeadLetter(
                    subscription=subscription,
                    event=Event(seq=row[0]),
                    attempts=attempts,
                    last_error=error,
                )
                for row in stale
            ],
            ignore_conflicts=True,
        )
        update.update(cursor=stale[-1][0], attempts=0, next_attempt_at=now)
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
        logger.error("event subscription %s paused: %s", subscription.pk, error)
    else:
        logger.warning("event subscription %s: delivery failed (%s)", subscription.pk, error)
    EventSubscription.objects.filter(pk=subscription.pk).update(**update)
    return BatchOutcome(subscription.pk, len(rows), False, len(stale), paused, error)


def _duration(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def subscriptions_wake_idle() -> int:
    """New events are in line: subscriptions that are waiting only for events (not backing
    off after a failure) are due now. One being delivered (its row locked for the POST) is
    skipped, not waited for: it looks for more as soon as its batch is done."""
    now = timezone.now()
    with transaction.atomic():
        idle = (
            EventSubscription.objects.select_for_update(skip_locked=True)
            .filter(active=True, attempts=0, next_attempt_at__gt=now)
            .values("pk")
        )
        return EventSubscription.objects.filter(pk__in=idle).update(next_attempt_at=now)
