"""Delivering to a receiver: signed batches in order, retries with backoff, dead letters,
a pause after failing too long, replays."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from delivery.events.deliverer import backoff_s, subscription_deliver_next
from delivery.events.router import events_route
from delivery.events.signing import signature, signature_verify
from delivery.events.subscriptions import (
    dead_letters_replay,
    subscription_create,
    subscription_resume,
)
from delivery.events.worker import events_pass
from delivery.models import Event, EventDeadLetter, EventOutbox, EventSubscription
from tests.events.receiver import Receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def emit(n: int, *, message_id: int | None = None, at_offset_s: float = 0) -> None:
    at = timezone.now() + timedelta(seconds=at_offset_s)
    EventOutbox.objects.bulk_create(
        [
            EventOutbox(
                event_type="message.sent", message_id=message_id, data={"i": i}, occurred_at=at
            )
            for i in range(n)
        ]
    )


def test_batches_are_signed_in_order_and_the_cursor_follows(receiver: Receiver) -> None:
    subscription, secret = subscription_create(name="shop", url=receiver.url)
    emit(1200)
    with override_settings(EVENTS_BATCH_SIZE=500):
        totals = events_pass()
    assert totals.routed == 1200 and totals.delivered == 1200
    assert [len(post.events) for post in receiver.received] == [500, 500, 200]
    events = receiver.events()
    assert [e["data"]["i"] for e in events] == list(range(1200))
    assert len({e["id"] for e in events}) == 1200
    assert receiver.all_signed(secret)
    subscription.refresh_from_db()
    assert subscription.cursor == events[-1]["sequence"] and subscription.delivered_total == 1200


def test_each_event_arrives_whole_in_the_documented_shape(receiver: Receiver) -> None:
    """The body is built by PostgreSQL: every field, escaping and times as documented."""
    subscription_create(name="shop", url=receiver.url)
    at = timezone.now().replace(microsecond=0)
    text = 'a "quoted" reply\\ with\nnew lines, tabs\t and ✓ 🎉'
    EventOutbox.objects.create(
        event_type="reply.received", message_id=None, data={"text": text, "n": 1.5}
    )
    EventOutbox.objects.create(
        event_type="message.read", message_id=42, data={"status": "read"}, occurred_at=at
    )
    events_pass()
    (post,) = receiver.received
    body = json.loads(post.body)
    rows = list(Event.objects.order_by("seq"))
    assert body == {
        "subscription_id": body["subscription_id"],
        "events": [
            {
                "id": str(row.event_id),
                "type": row.event_type,
                "sequence": row.seq,
                "occurred_at": body["events"][i]["occurred_at"],
                "message_id": row.message_id,
                "data": row.data,
            }
            for i, row in enumerate(rows)
        ],
    }
    assert body["events"][0]["data"]["text"] == text
    assert body["events"][0]["message_id"] is None
    times = [datetime.fromisoformat(e["occurred_at"]) for e in body["events"]]
    assert times == [row.occurred_at for row in rows] and times[1] == at


def test_only_the_types_asked_for(receiver: Receiver) -> None:
    subscription_create(name="replies", url=receiver.url, event_types=["reply.received"])
    emit(3)
    EventOutbox.objects.create(event_type="reply.received", data={"text": "hi"})
    events_pass()
    assert [e["type"] for e in receiver.events()] == ["reply.received"]
    # Past what it does not want too, so a quiet type does not rescan the same range.
    emit(5)
    events_pass()
    subscription = EventSubscription.objects.get()
    assert subscription.cursor == Event.objects.order_by("-seq").first().seq  # type: ignore[union-attr]


def test_a_subscription_made_later_starts_from_then(receiver: Receiver) -> None:
    subscription_create(name="first", url="http://127.0.0.1:1/hooks")
    emit(5)
    events_route()
    subscription_create(name="late", url=receiver.url)
    emit(2)
    events_pass()
    assert len(receiver.events()) == 2


def test_a_failing_receiver_is_retried_with_backoff_then_gets_everything(
    receiver: Receiver,
) -> None:
    subscription, secret = subscription_create(name="shop", url=receiver.url)
    receiver.mode = "error"
    emit(10)
    events_pass()
    subscription.refresh_from_db()
    assert subscription.attempts == 1 and subscription.failing_since is not None
    assert "HTTP 500" in subscription.last_error
    assert subscription.next_attempt_at > timezone.now() - timedelta(seconds=1)
    receiver.mode = "ok"
    EventSubscription.objects.filter(pk=subscription.pk).update(next_attempt_at=timezone.now())
    events_pass()
    assert [e["data"]["i"] for e in receiver.events()] == list(range(10))
    subscription.refresh_from_db()
    assert subscription.attempts == 0 and subscription.failing_since is None


def test_a_refused_connection_is_a_failure_like_a_500() -> None:
    subscription, _ = subscription_create(name="shop", url="http://127.0.0.1:9/hooks")
    emit(1)
    events_pass()
    subscription.refresh_from_db()
    assert subscription.attempts == 1 and "ConnectionError" in subscription.last_error


@override_settings(EVENTS_BACKOFF_BASE_S=1.0, EVENTS_BACKOFF_MAX_S=600.0)
def test_backoff_is_full_jitter_under_a_doubling_ceiling() -> None:
    for attempts, ceiling in [(1, 1), (2, 2), (5, 16), (11, 600), (60, 600)]:
        draws = [backoff_s(attempts) for _ in range(300)]
        assert all(0 <= d <= ceiling for d in draws)
        # Spread over the whole range, not bunched at the ceiling.
        assert min(draws) < ceiling * 0.2 and max(draws) > ceiling * 0.8


@override_settings(EVENTS_RETRY_FOR_S=3600, EVENTS_PAUSE_AFTER_S=0)
def test_events_not_taken_within_the_retry_time_are_dead_lettered_and_the_rest_flow(
    receiver: Receiver,
) -> None:
    subscription, _ = subscription_create(name="shop", url=receiver.url)
    emit(3, at_offset_s=-7200)  # two hours ago: past the retry time
    emit(2)
    receiver.mode = "error"
    outcome_pass = events_pass(max_batches=1)
    assert outcome_pass.dead_lettered == 3
    assert EventDeadLetter.objects.filter(subscription=subscription).count() == 3
    receiver.mode = "ok"
    EventSubscription.objects.filter(pk=subscription.pk).update(next_attempt_at=timezone.now())
    events_pass()
    # The two recent ones arrive; the three old ones wait in the dead letters.
    assert [e["data"]["i"] for e in receiver.events()] == [0, 1]
    replay = dead_letters_replay(subscription=subscription)
    assert (replay.events, replay.error) == (3, "")
    assert [e["data"]["i"] for e in receiver.received[-1].events] == [0, 1, 2]
    assert not EventDeadLetter.objects.filter(replayed_at__isnull=True).exists()


@override_settings(EVENTS_PAUSE_AFTER_S=3600)
def test_a_subscription_failing_for_an_hour_is_paused_then_resumed_by_hand(
    receiver: Receiver,
) -> None:
    subscription, _ = subscription_create(name="shop", url=receiver.url)
    receiver.mode = "error"
    emit(1)
    EventSubscription.objects.filter(pk=subscription.pk).update(
        failing_since=timezone.now() - timedelta(minutes=61), attempts=12
    )
    events_pass()
    subscription.refresh_from_db()
    assert not subscription.active
    assert subscription.paused_reason.startswith("Paused after failing for 1 h 1 min: HTTP 500")
    receiver.mode = "ok"
    events_pass()
    assert receiver.events() == []  # paused: nothing tried
    subscription_resume(subscription=subscription)
    events_pass()
    assert len(receiver.events()) == 1


def test_the_signature_a_receiver_checks() -> None:
    body = json.dumps({"events": []}).encode()
    header = signature(secret="whsec_x", timestamp=1_700_000_000, body=body)
    assert signature_verify(secret="whsec_x", header=header, body=body, now=1_700_000_100)
    assert not signature_verify(secret="whsec_y", header=header, body=body, now=1_700_000_100)
    assert not signature_verify(
        secret="whsec_x", header=header, body=body + b" ", now=1_700_000_100
    )
    # A replay ten minutes later is refused.
    assert not signature_verify(secret="whsec_x", header=header, body=body, now=1_700_000_600)
    assert not signature_verify(secret="whsec_x", header="garbage", body=body)


@pytest.mark.django_db(transaction=True)
def test_while_one_worker_posts_a_batch_another_skips_that_subscription() -> None:
    """The subscription's row is locked for the whole batch: a second worker does not send
    the same (or the next) batch beside it, so order holds with any number of workers."""
    import threading
    import time

    from django.db import connection

    release = threading.Event()
    receiver = Receiver(hold=release).start()
    try:
        subscription_create(name="shop", url=receiver.url)
        emit(3)
        events_route()
        first: list[Any] = []

        def deliver() -> None:
            first.append(subscription_deliver_next())
            connection.close()

        worker = threading.Thread(target=deliver)
        worker.start()
        assert receiver.entered.wait(10)
        started = time.monotonic()
        assert subscription_deliver_next() is None  # skipped, not waited for
        assert time.monotonic() - started < 2
        release.set()
        worker.join(10)
        assert first[0].delivered and first[0].events == 3
    finally:
        release.set()
        receiver.stop()


@pytest.mark.django_db(transaction=True)
def test_a_pass_outside_any_transaction_routes_wakes_and_delivers(receiver: Receiver) -> None:
    """As the worker runs it: autocommit, no test transaction around it."""
    subscription, _ = subscription_create(name="shop", url=receiver.url)
    EventSubscription.objects.filter(pk=subscription.pk).update(
        next_attempt_at=timezone.now() + timedelta(seconds=30)
    )
    emit(4)
    totals = events_pass()
    assert totals.routed == 4 and totals.delivered == 4  # woken at once, not in 30 s
