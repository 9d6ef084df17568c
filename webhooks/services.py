"""Taking Meta's callbacks in: store the raw body durably, then wake the applier."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

import redis
from django.conf import settings
from django.db import connection, transaction

from webhooks.models import WebhookEvent, WebhookEventStatus
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

DEBOUNCE_KEY = "webhooks:apply:debounce"

# Stores a body unless an identical one is already stored: Meta redelivers the same bytes
# when it missed our 200, and the unique body hash makes that a no-op without a read first.
_INSERT_SQL = """
INSERT INTO webhooks_webhookevent
    (received_at, body, body_sha256, status, error, processed_at, summary)
VALUES (now(), %s, %s, %s, %s, CASE WHEN %s THEN now() END, '{}'::jsonb)
ON CONFLICT (body_sha256) DO NOTHING
RETURNING id
"""


def event_store(*, body: bytes, rejected_reason: str | None = None) -> int | None:
    """Store one signed callback body; returns its id, or ``None`` for a redelivery.

    A body that is signed but not a callback is stored as rejected with the reason (Meta
    gets its 200 and stops retrying; support can read what came). A new pending body
    schedules the applier once the row is committed.
    """
    digest = hashlib.sha256(body).hexdigest()
    rejected = rejected_reason is not None
    status = WebhookEventStatus.REJECTED if rejected else WebhookEventStatus.PENDING
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_SQL, [body, digest, status, rejected_reason or "", rejected])
        row = cursor.fetchone()
    if row is None:
        return None
    if rejected:
        logger.warning("webhook event %s rejected: %s", row[0], rejected_reason)
    else:
        transaction.on_commit(applier_schedule)
    return int(row[0])


def applier_schedule() -> bool:
    """Enqueue the applier job unless one was enqueued within the debounce interval.

    One ``SET NX`` per call: under a burst of POSTs, one job per interval is queued and
    the rest find the key. The job clears the key before its first read (see
    ``applier_debounce_clear``), so an event stored while a job runs is never stranded.
    Redis being down costs only latency: the periodic sweep applies the stored events.
    """
    try:
        fresh = get_redis().set(DEBOUNCE_KEY, b"1", nx=True, px=settings.WEBHOOK_APPLY_DEBOUNCE_MS)
        if not fresh:
            return False
        queues.enqueue(queues.WEBHOOK_APPLY)
    except redis.RedisError as exc:
        logger.warning("webhook applier not scheduled (%s); the sweep will apply", exc)
        return False
    return True


def applier_debounce_clear() -> None:
    """Called by the applier before it reads: later events schedule a fresh job."""
    try:
        get_redis().delete(DEBOUNCE_KEY)
    except redis.RedisError as exc:
        logger.warning("webhook applier debounce key not cleared: %s", exc)


def events_requeue(*, event_ids: Sequence[int]) -> int:
    """Put failed or processed events back in line (support's retry); returns how many.

    Statuses re-apply harmlessly (they only move forward, blanks only fill) and inbound
    messages are keyed by wamid; template and account events take effect again as sent.
    """
    count = WebhookEvent.objects.filter(
        id__in=event_ids,
        status__in=(WebhookEventStatus.FAILED, WebhookEventStatus.PROCESSED),
    ).update(status=WebhookEventStatus.PENDING, error="", processed_at=None)
    if count:
        transaction.on_commit(applier_schedule)
    return count
