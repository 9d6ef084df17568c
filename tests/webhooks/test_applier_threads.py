"""A drain on several threads: each batch its own transaction on its own connection.

The point is overlap (one batch's Python runs while another waits for PostgreSQL); what
these tests hold is that the overlap is real, loses or doubles nothing and leaves no
connection behind.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from delivery.models import Message
from tests.webhooks.support import fixture_json, make_message, retarget, store
from webhooks import applier
from webhooks.applier import ApplyReport, events_drain
from webhooks.models import WebhookEvent, WebhookEventStatus

WAMID = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA="


def read_status(wamid: str) -> dict[str, Any]:
    return retarget(fixture_json("status_read"), wamids={WAMID: wamid}, callbacks={"wb:9001": None})


def backend_alive(pid: int) -> bool:
    """Whether the server still has a connection with this backend pid."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = %s)", [pid])
        return bool(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_two_threads_apply_batches_at_once_on_two_connections_and_each_event_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    messages = [make_message(status="sent", wamid=f"wamid.T{n}") for n in range(12)]
    for message in messages:
        store(read_status(message.wamid))

    # Each thread's first batch starts only when the other's has too: two transactions
    # hold their events at the same moment, so SKIP LOCKED must keep them apart.
    both_in = threading.Barrier(2, timeout=10)
    seen: list[tuple[str, int, int]] = []  # (thread, backend pid, events)
    real_batch = applier.events_apply_batch

    def batch_watched(**kwargs: Any) -> ApplyReport:
        name = threading.current_thread().name
        if all(thread != name for thread, _, _ in seen):
            both_in.wait()
        report = real_batch(**kwargs)
        seen.append((name, connection.connection.info.backend_pid, report.events))
        return report

    monkeypatch.setattr(applier, "events_apply_batch", batch_watched)
    report = events_drain(budget_seconds=30, batch_events=2, threads=2)

    assert report.events == 12
    assert report.messages_updated == 12
    assert sum(events for _, _, events in seen) == 12
    assert {thread for thread, _, _ in seen} == {"MainThread", "applier-1"}
    assert len({pid for _, pid, _ in seen}) == 2
    assert not WebhookEvent.objects.exclude(status=WebhookEventStatus.PROCESSED).exists()
    assert set(Message.objects.values_list("status", flat=True)) == {"read"}
    # The helper closed its connection when it finished.
    [helper_pid] = {pid for thread, pid, _ in seen if thread == "applier-1"}
    assert not backend_alive(helper_pid)
    assert backend_alive(connection.connection.info.backend_pid)


@pytest.mark.django_db(transaction=True)
def test_one_thread_stepping_aside_stops_the_others_and_queues_the_rest(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    monkeypatch.setattr(applier, "STEP_ASIDE_AFTER_S", 0.0)
    scheduled: list[bool] = []
    monkeypatch.setattr(applier, "applier_schedule", lambda: scheduled.append(True))
    messages = [make_message(status="sent", wamid=f"wamid.S{n}") for n in range(20)]
    for message in messages:
        store(read_status(message.wamid))

    report = events_drain(budget_seconds=30, batch_events=1, threads=2, step_aside=lambda: True)

    # Each thread finishes the batch in hand and takes no other.
    assert 1 <= report.events <= 2
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 20 - (
        report.events
    )
    assert scheduled == [True]


class Died(BaseException):
    """What nothing in the drain's loop catches (its batches catch Exception)."""


@pytest.mark.django_db(transaction=True)
def test_a_helper_thread_that_dies_mid_batch_loses_nothing_and_the_drain_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [make_message(status="sent", wamid=f"wamid.F{n}") for n in range(6)]
    for message in messages:
        store(read_status(message.wamid))
    real_batch = applier.events_apply_batch
    locked = threading.Event()
    helper_pids: list[int] = []

    def helper_dies(**kwargs: Any) -> ApplyReport:
        if threading.current_thread().name == "applier-1" and not locked.is_set():
            connection.ensure_connection()
            helper_pids.append(connection.connection.info.backend_pid)
            # Dies inside its transaction, holding two events: the rollback frees them.
            try:
                with applier.transaction.atomic():
                    held = applier._events_lock(limit=2, event_ids=None)
                    assert len(held) == 2
                    raise Died
            finally:
                locked.set()  # rolled back by now
        locked.wait(10)
        return real_batch(**kwargs)

    monkeypatch.setattr(applier, "events_apply_batch", helper_dies)
    report = events_drain(budget_seconds=30, batch_events=1, threads=2)

    assert locked.is_set()
    assert "applier thread stopped" in caplog.text
    # The main thread applied every event, the two the helper dropped included.
    assert report.events == 6
    assert not WebhookEvent.objects.exclude(status=WebhookEventStatus.PROCESSED).exists()
    assert set(Message.objects.values_list("status", flat=True)) == {"read"}
    assert helper_pids and not backend_alive(helper_pids[0])


@pytest.mark.django_db(transaction=True)
def test_a_drain_ended_from_outside_stops_its_helpers_after_their_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RQ ends a job past its timeout by raising in its main thread: the helpers must not
    drain on for the rest of the budget behind it."""
    messages = [make_message(status="sent", wamid=f"wamid.E{n}") for n in range(10)]
    for message in messages:
        store(read_status(message.wamid))
    real_batch = applier.events_apply_batch
    helper_batches: list[int] = []
    helper_started = threading.Event()

    def main_is_stopped(**kwargs: Any) -> ApplyReport:
        if threading.current_thread().name == "MainThread":
            helper_started.wait(10)
            raise Died
        helper_started.set()
        report = real_batch(**kwargs)
        helper_batches.append(report.events)
        return report

    monkeypatch.setattr(applier, "events_apply_batch", main_is_stopped)
    with pytest.raises(Died):
        events_drain(budget_seconds=30, batch_events=1, threads=2)
    # The helper finished the batch it had started (one or two more at most, while the
    # main thread was on its way out) and stopped, far short of the ten.
    assert 1 <= len(helper_batches) <= 3
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() >= 7
