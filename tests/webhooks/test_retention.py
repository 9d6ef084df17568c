"""Callbacks past their retention are deleted; pending ones and recent ones never are."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from webhooks.models import WebhookEvent, WebhookEventStatus
from webhooks.retention import events_purge, events_purge_schedule
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db

DONE = (WebhookEventStatus.PROCESSED, WebhookEventStatus.REJECTED, WebhookEventStatus.FAILED)


def event(status: str, *, age: timedelta) -> int:
    body = f"{status}-{age}-{WebhookEvent.objects.count()}".encode()
    row = WebhookEvent.objects.create(
        body=body, body_sha256=hashlib.sha256(body).hexdigest(), status=status
    )
    WebhookEvent.objects.filter(pk=row.pk).update(received_at=timezone.now() - age)
    return row.pk


def remaining() -> set[int]:
    return set(WebhookEvent.objects.values_list("pk", flat=True))


def test_events_past_retention_go_and_pending_or_recent_ones_stay(settings: Any) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 24
    old = [event(status, age=timedelta(hours=25)) for status in DONE]
    old_pending = event(WebhookEventStatus.PENDING, age=timedelta(hours=30))
    recent = [event(status, age=timedelta(hours=23)) for status in DONE]
    report = events_purge()
    assert report.deleted == len(old)
    assert remaining() == {old_pending, *recent}


def test_a_retention_of_zero_keeps_every_event(settings: Any) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 0
    kept = {event(WebhookEventStatus.PROCESSED, age=timedelta(days=400)) for _ in range(3)}
    assert events_purge().deleted == 0
    assert events_purge_schedule() is None
    assert remaining() == kept


def test_old_events_behind_a_stuck_pending_one_at_the_head_are_still_purged(
    settings: Any,
) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 1
    stuck = event(WebhookEventStatus.PENDING, age=timedelta(hours=5))
    for _ in range(30):
        event(WebhookEventStatus.PROCESSED, age=timedelta(hours=4))
    young = event(WebhookEventStatus.PROCESSED, age=timedelta(minutes=5))
    report = events_purge(batch=8)
    assert report.deleted == 30
    assert report.batches >= 4  # a batch at a time: 30 rows in batches of 8
    assert remaining() == {stuck, young}


def test_each_batch_reads_the_head_of_the_key_not_the_whole_table(settings: Any) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 1
    for _ in range(5):
        event(WebhookEventStatus.PROCESSED, age=timedelta(minutes=1))
    with connection.cursor() as cursor:
        # What PostgreSQL would do on a big table (here it is tiny, so force the index).
        cursor.execute("SET LOCAL enable_seqscan = off")
        with CaptureQueriesContext(connection) as queries:
            assert events_purge().deleted == 0
        cursor.execute("EXPLAIN " + queries[0]["sql"])
        plan = [row[0] for row in cursor.fetchall()]
    # The batch is the key's first rows, read as they come: no filter under the LIMIT (a
    # filter there would have to read on through the whole key when no row is old).
    limit = next(i for i, line in enumerate(plan) if "->  Limit" in line)
    assert "Scan using webhooks_webhookevent_pkey" in plan[limit + 1], plan
    # The scan's own lines (an Index Cond, a Filter) follow it up to the next node, if any.
    scan_details = []
    for line in plan[limit + 2 :]:
        if "->" in line:
            break
        scan_details.append(line)
    assert not any("Filter" in line for line in scan_details), plan
    assert remaining() and len(remaining()) == 5


def test_the_tick_purges_at_most_once_a_minute(settings: Any) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 1
    event(WebhookEventStatus.PROCESSED, age=timedelta(hours=2))
    first = maintenance_tick()["webhook_events_purged"]
    assert first == {"deleted": 1, "batches": 1, "caught_up": True}
    event(WebhookEventStatus.PROCESSED, age=timedelta(hours=2))
    assert maintenance_tick()["webhook_events_purged"] is None  # within the minute
    assert WebhookEvent.objects.count() == 1


def test_a_purge_cut_short_by_its_budget_leaves_the_next_tick_due(settings: Any) -> None:
    settings.WEBHOOK_EVENT_RETENTION_HOURS = 1
    for _ in range(19):
        event(WebhookEventStatus.PROCESSED, age=timedelta(hours=2))

    # No time at all: one batch, then the budget is spent with old rows left.
    first = events_purge_schedule(budget_seconds=0.0, batch=8)
    assert first is not None and (first.deleted, first.caught_up) == (8, False)
    # Not a minute later: the backlog is worked off by the ticks that follow.
    second = events_purge_schedule(budget_seconds=0.0, batch=8)
    assert second is not None and second.deleted == 8
    third = events_purge_schedule(budget_seconds=0.0, batch=8)
    assert third is not None and (third.deleted, third.caught_up) == (3, True)
    # Caught up: the next purge waits its minute again.
    event(WebhookEventStatus.PROCESSED, age=timedelta(hours=2))
    assert events_purge_schedule(budget_seconds=0.0, batch=8) is None
    assert WebhookEvent.objects.count() == 1


@pytest.mark.django_db
def test_the_callback_table_is_vacuumed_at_a_twentieth_of_its_rows() -> None:
    """The table's own autovacuum settings, as the migration leaves them in PostgreSQL."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE oid = 'webhooks_webhookevent'::regclass"
        )
        (options,) = cursor.fetchone()
    assert dict(option.split("=") for option in options) == {
        "autovacuum_vacuum_scale_factor": "0.05",
        "autovacuum_vacuum_threshold": "5000",
        "autovacuum_vacuum_insert_scale_factor": "0.05",
        "autovacuum_analyze_scale_factor": "0.05",
    }
