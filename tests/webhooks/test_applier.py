"""The applier as a whole: batches, rejects, a poisoned event, SKIP LOCKED, the RQ job."""

from __future__ import annotations

import json
import socket
import threading
from io import StringIO
from typing import Any

import django_rq
import pytest
import redis
from django.core.management import call_command
from django.db import connection, connections
from django.test import Client
from rq.serializers import JSONSerializer

from tests.webhooks.support import (
    URL,
    apply,
    fixture_bytes,
    fixture_json,
    make_message,
    meta_bytes,
    retarget,
    sign,
    store,
    wait_until,
)
from webhooks import applier, services
from webhooks.applier import events_apply_batch, events_drain
from webhooks.models import WebhookEvent, WebhookEventStatus
from webhooks.selectors import webhook_stats
from webhooks.services import DEBOUNCE_KEY, event_store
from whatsblast.rq import SimpleWorker  # the worker class production runs

WAMID = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA="


def status_for(name: str, wamid: str) -> dict[str, Any]:
    return retarget(fixture_json(name), wamids={WAMID: wamid}, callbacks={"wb:9001": None})


@pytest.mark.django_db
def test_a_stored_body_that_is_not_a_callback_is_rejected_by_the_applier() -> None:
    # The view rejects these itself; the applier must cope with one that got in anyway.
    event_id = event_store(body=b'{"object": "page"}')
    report = apply()
    event = WebhookEvent.objects.get(pk=event_id)
    assert report.rejected == 1
    assert event.status == WebhookEventStatus.REJECTED
    assert "page" in event.error


@pytest.mark.django_db
def test_events_are_applied_in_batches_until_none_is_pending() -> None:
    messages = [make_message(status="sent", wamid=f"wamid.M{n}") for n in range(5)]
    for message in messages:
        store(status_for("status_read", message.wamid))
    report = events_drain(budget_seconds=30, batch_events=2)
    assert report.events == 5
    assert report.messages_updated == 5
    assert not WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).exists()
    assert {m.status for m in type(messages[0]).objects.all()} == {"read"}


@pytest.mark.django_db
def test_a_poisoned_event_is_failed_alone_and_the_others_still_apply() -> None:
    # The database refuses one event's rows (a trigger stands in for any unforeseen refusal):
    # the batch rolls back, its events are applied one by one, only the bad one fails.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            CREATE FUNCTION refuse_666() RETURNS trigger AS $$
            BEGIN
                IF NEW.code = 666 THEN RAISE EXCEPTION 'refused'; END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_666 BEFORE INSERT ON webhooks_asyncerror
                FOR EACH ROW EXECUTE FUNCTION refuse_666();
            """
        )
    first = make_message(status="sent", wamid="wamid.FIRST")
    last = make_message(status="sent", wamid="wamid.LAST")
    store(status_for("status_read", "wamid.FIRST"))
    poison = fixture_json("async_errors")
    poison["entry"][0]["changes"][0]["value"]["errors"][0]["code"] = 666
    poison_id = store(poison)
    store(status_for("status_delivered", "wamid.LAST"))
    report = apply()
    first.refresh_from_db()
    last.refresh_from_db()
    assert (first.status, last.status) == ("read", "delivered")
    failed = WebhookEvent.objects.get(pk=poison_id)
    assert failed.status == WebhookEventStatus.FAILED
    assert "refused" in failed.error
    assert report.failed == 1
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PROCESSED).count() == 2


@pytest.mark.django_db
def test_the_drain_clears_the_debounce_key_first(redis_conn: redis.Redis) -> None:
    redis_conn.set(DEBOUNCE_KEY, b"1")
    apply()
    assert not redis_conn.exists(DEBOUNCE_KEY)


@pytest.mark.django_db
def test_a_drain_out_of_budget_hands_over_to_a_new_job(
    django_capture_on_commit_callbacks: Any,
) -> None:
    store(fixture_json("status_read"))
    with django_capture_on_commit_callbacks(execute=True):
        report = events_drain(budget_seconds=0)
    assert report.events == 0
    jobs = django_rq.get_queue("maintenance").get_jobs()
    assert [job.func_name for job in jobs] == ["whatsblast.jobs.webhook_apply_job"]


@pytest.mark.django_db
def test_a_post_is_stored_and_answered_even_when_redis_is_down(
    client: Client, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = redis.Redis(port=port, socket_connect_timeout=0.2)
    monkeypatch.setattr(services, "get_redis", lambda: dead)
    body = fixture_bytes("status_sent")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            URL,
            data=body,
            content_type="application/json",
            headers={"X-Hub-Signature-256": sign(body)},
        )
    assert response.status_code == 200
    assert WebhookEvent.objects.get().status == WebhookEventStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_a_second_applier_skips_events_another_one_holds() -> None:
    held = make_message(status="sent", wamid="wamid.HELD")
    free = make_message(status="sent", wamid="wamid.FREE")
    held_event = store(status_for("status_read", "wamid.HELD"))
    store(status_for("status_read", "wamid.FREE"))
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(
                    "SELECT id FROM webhooks_webhookevent WHERE id = %s FOR UPDATE", [held_event]
                )
                locked.set()
                release.wait(10)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        report = events_apply_batch()
        assert report.events == 1
        held.refresh_from_db()
        free.refresh_from_db()
        assert (held.status, free.status) == ("sent", "read")
    finally:
        release.set()
        holder.join(10)
    assert events_apply_batch().events == 1
    held.refresh_from_db()
    assert held.status == "read"


@pytest.mark.django_db(transaction=True)
def test_a_post_is_applied_by_the_rq_job_on_a_burst_worker(client: Client) -> None:
    message = make_message(status="sending", wamid=None)
    payload = retarget(
        fixture_json("status_delivered"), callbacks={"wb:9001": message.callback_data}
    )
    body = meta_bytes(payload)
    response = client.post(
        URL,
        data=body,
        content_type="application/json",
        headers={"X-Hub-Signature-256": sign(body)},
    )
    assert response.status_code == 200
    queue = django_rq.get_queue("maintenance")
    # The committer schedules the applier just after it has answered the POST.
    wait_until(lambda: queue.count == 1)
    worker = django_rq.get_worker(
        "maintenance", worker_class=SimpleWorker, serializer=JSONSerializer
    )
    worker.work(burst=True)
    message.refresh_from_db()
    assert (message.status, message.wamid) == ("delivered", WAMID)
    assert WebhookEvent.objects.get().status == WebhookEventStatus.PROCESSED
    assert queue.count == 0


@pytest.mark.django_db
def test_the_management_command_applies_and_reports_as_json() -> None:
    message = make_message(status="sent", wamid=WAMID)
    store(fixture_json("status_read"))
    store(retarget(fixture_json("status_read"), wamids={WAMID: "wamid.NOBODY"}))
    stats_out = StringIO()
    call_command("webhooks", "stats", stdout=stats_out)
    assert json.loads(stats_out.getvalue())["events_pending"] == 2
    out = StringIO()
    call_command("webhooks", "apply", stdout=out)
    result = json.loads(out.getvalue())
    assert (result["events"], result["messages_updated"], result["unmatched_new"]) == (2, 1, 1)
    message.refresh_from_db()
    assert message.status == "read"
    stats = webhook_stats()
    assert (stats["events_pending"], stats["unmatched_waiting"]) == (0, 1)


@pytest.mark.django_db
def test_a_batch_reads_bodies_up_to_its_byte_budget_and_at_least_one(settings: Any) -> None:
    for n in range(3):
        store(status_for("status_read", f"wamid.BUDGET-{n}"))
    settings.WEBHOOK_APPLY_BATCH_BYTES = 1
    assert events_apply_batch().events == 1
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 2
    sizes = [len(bytes(b)) for b in WebhookEvent.objects.values_list("body", flat=True)]
    settings.WEBHOOK_APPLY_BATCH_BYTES = max(sizes) * 2 - 1  # one more fits, two do not
    assert events_apply_batch().events == 1
    settings.WEBHOOK_APPLY_BATCH_BYTES = 10**9
    assert events_apply_batch().events == 1
    assert not WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("urgent_queue", ["transactional", "campaigns"])
def test_the_applier_job_steps_aside_between_batches_for_urgent_jobs(
    urgent_queue: str,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker in a long drain would hold an OTP (or a number's slot handed over by a
    stopping worker) until the drain ends: with such a job waiting, the applier stops after
    the batch in hand and queues its continuation behind it."""
    from whatsblast.jobs import webhook_apply_job

    settings.WEBHOOK_APPLY_BATCH_EVENTS = 2
    monkeypatch.setattr(applier, "STEP_ASIDE_AFTER_S", 0.0)  # production: after 1 s
    messages = [make_message(status="sent", wamid=f"wamid.U{n}") for n in range(6)]
    for message in messages:
        store(status_for("status_read", message.wamid))
    with django_capture_on_commit_callbacks(execute=True):  # RQ enqueues after commit
        django_rq.get_queue(urgent_queue).enqueue("whatsblast.jobs.webhook_apply_job")
    assert django_rq.get_queue(urgent_queue).count == 1

    with django_capture_on_commit_callbacks(execute=True):
        first = webhook_apply_job()
    assert first["events"] == 2  # one batch, then it stepped aside
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 4
    continuation = django_rq.get_queue("maintenance").get_jobs()
    assert [job.func_name for job in continuation] == ["whatsblast.jobs.webhook_apply_job"]

    # Nothing urgent waits any more: the next run drains everything.
    django_rq.get_queue(urgent_queue).empty()
    assert webhook_apply_job()["events"] == 4
    assert not WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).exists()


@pytest.mark.django_db
def test_the_applier_job_works_its_first_second_before_stepping_aside(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Under a steady stream of urgent jobs the drain still makes progress: it drains for
    STEP_ASIDE_AFTER_S before it looks at the other queues."""
    from whatsblast.jobs import webhook_apply_job

    settings.WEBHOOK_APPLY_BATCH_EVENTS = 2
    messages = [make_message(status="sent", wamid=f"wamid.V{n}") for n in range(6)]
    for message in messages:
        store(status_for("status_read", message.wamid))
    with django_capture_on_commit_callbacks(execute=True):
        django_rq.get_queue("transactional").enqueue("whatsblast.jobs.webhook_apply_job")
    assert webhook_apply_job()["events"] == 6  # three batches, well within its first second
