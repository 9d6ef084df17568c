"""Group commit of webhook POSTs (webhooks/ingest.py) and the lean WSGI path in front of it.

Run against the real database in autocommit (``transaction=True``), the way a web process
runs: each request thread hands its body to the committer and waits for the commit. A
second connection holding a lock on the events table stands in for a slow or stalled
database.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from tests.webhooks.support import (
    URL,
    fixture_json,
    inserts_held_by_lock,
    meta_bytes,
    sign,
    wait_until,
)
from webhooks import ingest
from webhooks.ingest import GroupCommitter, NotStored, Overloaded, committer_stop
from webhooks.models import WebhookEvent, WebhookEventStatus
from whatsblast.wsgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def body_for(n: int) -> bytes:
    """A real status callback (one status per POST, as Meta sends), made unique by ``n``."""
    payload = fixture_json("status_delivered")
    payload["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = f"wamid.ingest-{n}"
    return meta_bytes(payload)


@pytest.fixture
def new_committer() -> Iterator[Any]:
    """GroupCommitters for one test, stopped (threads ended, connections closed) after it."""
    made: list[GroupCommitter] = []

    def make(**options: Any) -> GroupCommitter:
        made.append(GroupCommitter(**options))
        return made[-1]

    yield make
    for committer in made:
        committer.stop()


def wsgi_post(body: bytes, signature: str | None) -> tuple[int, dict[str, str], bytes]:
    """One POST through ``whatsblast.wsgi.application``, as gunicorn calls it."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": URL,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
    }
    if signature is not None:
        environ["HTTP_X_HUB_SIGNATURE_256"] = signature
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        started["status"] = int(status.split()[0])
        started["headers"] = dict(headers)

    result = application(environ, start_response)
    try:
        content = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    return started["status"], started["headers"], content


def test_concurrent_posts_are_stored_by_fewer_statements_than_posts(
    table_lock, new_committer
) -> None:
    committer = new_committer(max_pending=100, wait_s=10, committers=1)
    with ThreadPoolExecutor(max_workers=40) as pool:
        futures = [
            pool.submit(committer.store, body=body_for(n), rejected_reason=None) for n in range(40)
        ]
        # Every POST is waiting for the commit: none can be answered while the lock holds.
        time.sleep(0.3)
        assert not any(f.done() for f in futures)
        table_lock.set()
        ids = [f.result(timeout=10) for f in futures]
    assert len(set(ids)) == 40 and None not in ids
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 40
    # The first body went alone; the 39 that queued behind it shared one or two statements.
    assert committer.batches_committed <= 3


def test_the_same_body_twice_in_one_batch_is_stored_once(table_lock, new_committer) -> None:
    committer = new_committer(max_pending=10, wait_s=10, committers=1)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(committer.store, body=body_for(7), rejected_reason=None) for _ in range(3)
        ]
        time.sleep(0.2)
        table_lock.set()
        ids = [f.result(timeout=10) for f in futures]
    committer.stop()
    assert WebhookEvent.objects.count() == 1
    assert ids.count(None) == 2  # the first of equal bodies is stored, the others are duplicates
    assert WebhookEvent.objects.get().id in ids


def test_past_the_admission_limit_a_post_is_refused_at_once(table_lock, new_committer) -> None:
    committer = new_committer(max_pending=2, wait_s=10, committers=1)
    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(committer.store, body=body_for(1), rejected_reason=None)
        # The first body is in the committer's hands, its INSERT held by the lock.
        wait_until(lambda: inserts_held_by_lock() == 1 and not committer.waiting_count())
        waiting = [
            pool.submit(committer.store, body=body_for(n), rejected_reason=None) for n in (2, 3)
        ]
        wait_until(lambda: committer.waiting_count() == 2)
        started = time.monotonic()
        with pytest.raises(Overloaded):
            committer.store(body=body_for(4), rejected_reason=None)
        assert time.monotonic() - started < 0.5  # shed at once, not after a timeout
        table_lock.set()
        assert first.result(10) is not None
        assert all(f.result(10) is not None for f in waiting)
    assert WebhookEvent.objects.count() == 3  # the refused body was never stored


def test_a_post_not_committed_in_time_is_not_acked_and_its_retry_is_a_duplicate(
    table_lock, new_committer
) -> None:
    committer = new_committer(max_pending=10, wait_s=0.3, committers=1)
    body = body_for(9)
    with pytest.raises(NotStored):
        committer.store(body=body, rejected_reason=None)
    table_lock.set()
    # The statement went through once the lock was gone; Meta's retry finds the body there.
    wait_until(lambda: WebhookEvent.objects.count() == 1)
    assert committer.store(body=body, rejected_reason=None) is None
    assert WebhookEvent.objects.count() == 1


def test_the_view_answers_503_with_retry_after_when_the_store_times_out(
    table_lock, settings
) -> None:
    settings.WEBHOOK_STORE_TIMEOUT_S = 0.3
    settings.WEBHOOK_RETRY_AFTER_S = 2
    committer_stop()  # the process's committer is built again from these settings
    body = body_for(11)
    status, headers, _ = wsgi_post(body, sign(body))
    assert status == 503
    assert headers["Retry-After"] == "2"
    table_lock.set()
    wait_until(lambda: WebhookEvent.objects.count() == 1)
    status, _, _ = wsgi_post(body, sign(body))
    assert status == 200
    assert WebhookEvent.objects.count() == 1


def test_a_database_error_answers_503_and_the_next_batch_is_stored(
    monkeypatch, new_committer
) -> None:
    committer = new_committer(max_pending=10, wait_s=5, committers=1)
    real_insert = ingest._batch_insert
    calls = {"n": 0}

    def failing_once(batch: Any) -> dict[str, int]:
        calls["n"] += 1
        if calls["n"] == 1:
            with connection.cursor() as cursor:  # a real error from the real server
                cursor.execute("SELECT 1/0")
        return real_insert(batch)

    monkeypatch.setattr(ingest, "_batch_insert", failing_once)
    with pytest.raises(NotStored):
        committer.store(body=body_for(20), rejected_reason=None)
    assert WebhookEvent.objects.count() == 0
    assert committer.store(body=body_for(20), rejected_reason=None) is not None
    committer.stop()
    assert WebhookEvent.objects.count() == 1


def test_the_lean_path_stores_a_signed_post_and_refuses_an_unsigned_one() -> None:
    body = body_for(30)
    status, headers, content = wsgi_post(body, sign(body))
    assert (status, content) == (200, b"ok")
    # No middleware ran: the clickjacking header every Django page gets is absent.
    assert "X-Frame-Options" not in headers
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 1

    other = body_for(31)
    assert wsgi_post(other, None)[0] == 403
    assert wsgi_post(other, sign(other, secret="not-the-secret"))[0] == 403
    assert WebhookEvent.objects.count() == 1


def test_everything_but_the_webhook_post_goes_through_django_with_its_middleware() -> None:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = int(status.split()[0]), dict(headers)

    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": URL,
        "QUERY_STRING": "hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
    }
    b"".join(application(environ, start_response))
    assert seen["status"] == 403
    assert seen["headers"]["X-Frame-Options"] == "DENY"
