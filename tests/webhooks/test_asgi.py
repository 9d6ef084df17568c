"""The ASGI web process (whatsblast/asgi.py): webhook POSTs on the event loop, the rest Django.

Each test drives ``whatsblast.asgi.application`` as gunicorn's asgi worker does (an HTTP
scope, ``receive``, ``send``) on a real event loop, against the real database in autocommit:
the POSTs are stored by the process's real committer threads. A second connection holding a
lock on the events table stands in for a slow or stalled database.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
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
from webhooks.ingest import GroupCommitter, committer, committer_stop
from webhooks.models import WebhookEvent, WebhookEventStatus
from whatsblast.asgi import BodyDrain, WebProcess, application
from whatsblast.core.loop_lag import LoopLag

pytestmark = pytest.mark.django_db(transaction=True)


def body_for(n: int) -> bytes:
    payload = fixture_json("status_delivered")
    payload["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = f"wamid.asgi-{n}"
    return meta_bytes(payload)


class Answer:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        start = messages[0]
        assert start["type"] == "http.response.start"
        self.status: int = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        self.body = b"".join(m.get("body", b"") for m in messages[1:])


async def request(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    chunks: list[bytes] | None = None,
    query: str = "",
    app: Any = application,
) -> Answer:
    """One request through the ASGI application, as gunicorn's asgi worker makes it."""
    raw_headers = [(b"host", b"testserver")]
    if body and not chunks:
        raw_headers.append((b"content-length", str(len(body)).encode()))
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    pieces = list(chunks) if chunks else [body]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pieces:
            piece = pieces.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(pieces)}
        await asyncio.sleep(3600)  # a client that has sent everything waits for the answer
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return Answer(sent)


def post(body: bytes, signature: str | None, **options: Any) -> Answer:
    headers = {"content-type": "application/json"}
    if signature is not None:
        headers["x-hub-signature-256"] = signature
    return asyncio.run(request("POST", URL, body=body, headers=headers, **options))


@pytest.fixture(autouse=True)
def fresh_committer() -> Iterator[None]:
    """Each test's committer is built from its settings, and stopped after it."""
    committer_stop()
    yield
    committer_stop()


def test_a_signed_post_is_stored_before_its_200_and_unsigned_ones_are_refused() -> None:
    body = body_for(1)
    answer = post(body, sign(body))
    assert (answer.status, answer.body) == (200, b"ok")
    # Answered only once committed: the row is there the moment the answer is.
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 1
    # No middleware ran: the clickjacking header every Django page gets is absent.
    assert "x-frame-options" not in answer.headers

    other = body_for(2)
    assert post(other, None).status == 403
    assert post(other, sign(other, secret="not-the-secret")).status == 403
    assert post(other + b" ", sign(other)).status == 403  # signed bytes, not the JSON
    assert WebhookEvent.objects.count() == 1


def test_concurrent_posts_on_one_loop_share_statements_and_each_waits_for_its_commit(
    table_lock,
) -> None:
    async def flood() -> list[Answer]:
        tasks = [asyncio.create_task(post_async(body_for(n))) for n in range(40)]
        await asyncio.sleep(0.3)
        # The table is locked: nothing can be committed, so nothing may be answered yet.
        assert not any(t.done() for t in tasks)
        table_lock.set()
        return await asyncio.gather(*tasks)

    async def post_async(body: bytes) -> Answer:
        headers = {"x-hub-signature-256": sign(body)}
        return await request("POST", URL, body=body, headers=headers)

    answers = asyncio.run(flood())
    assert [a.status for a in answers] == [200] * 40
    assert WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).count() == 40
    # The first body went alone (the lock held it); the 39 behind it shared a statement or two.
    assert committer().batches_committed <= 3


def test_a_thread_and_a_loop_waiting_in_one_batch_are_both_released(table_lock) -> None:
    one = GroupCommitter(max_pending=10, wait_s=10, committers=1)
    try:
        from_thread: list[int | None] = []
        waiter = threading.Thread(
            target=lambda: from_thread.append(one.store(body=body_for(3), rejected_reason=None))
        )
        waiter.start()

        async def from_loop() -> int | None:
            pending = asyncio.create_task(one.store_async(body=body_for(4), rejected_reason=None))
            await asyncio.sleep(0.2)
            table_lock.set()
            return await pending

        loop_id = asyncio.run(from_loop())
        waiter.join(10)
    finally:
        one.stop()
    assert from_thread and from_thread[0] is not None and loop_id is not None
    assert from_thread[0] != loop_id
    assert WebhookEvent.objects.count() == 2


def test_a_post_not_committed_in_time_gets_503_and_its_retry_is_stored_once(
    table_lock, settings
) -> None:
    settings.WEBHOOK_STORE_TIMEOUT_S = 0.3
    settings.WEBHOOK_RETRY_AFTER_S = 2
    body = body_for(5)
    started = time.monotonic()
    answer = post(body, sign(body))
    assert answer.status == 503 and answer.headers["retry-after"] == "2"
    assert time.monotonic() - started < 2.0
    table_lock.set()
    # The statement went through once the lock was gone; Meta's retry finds the body there.
    wait_until(lambda: WebhookEvent.objects.count() == 1)
    assert post(body, sign(body)).status == 200
    assert WebhookEvent.objects.count() == 1


def test_past_the_admission_limit_posts_are_shed_at_once_and_the_admitted_are_stored(
    table_lock, settings
) -> None:
    settings.WEBHOOK_MAX_PENDING = 3
    settings.WEBHOOK_RETRY_AFTER_S = 1
    settings.WEBHOOK_COMMITTERS = 1

    def first_held() -> bool:  # in a thread: Django's database calls stay off the loop
        try:
            return inserts_held_by_lock() == 1
        finally:
            connection.close()

    async def flood() -> list[tuple[int, float]]:
        async def one(n: int) -> tuple[int, float]:
            body = body_for(100 + n)
            started = time.monotonic()
            answer = await request(
                "POST", URL, body=body, headers={"x-hub-signature-256": sign(body)}
            )
            return answer.status, time.monotonic() - started

        # The first POST's batch is in the committer's hands (held by the lock) before the
        # rest arrive: then exactly three more fit in the queue behind it.
        tasks = [asyncio.create_task(one(0))]
        while not (await asyncio.to_thread(first_held) and committer().waiting_count() == 0):
            await asyncio.sleep(0.01)
        tasks += [asyncio.create_task(one(n)) for n in range(1, 20)]
        await asyncio.sleep(0.5)
        answered_early = [t.result() for t in tasks if t.done()]
        waiting = [t for t in tasks if not t.done()]
        table_lock.set()
        return answered_early + list(await asyncio.gather(*waiting))

    results = asyncio.run(flood())
    statuses = [status for status, _ in results]
    assert len(results) == 20
    assert set(statuses) == {200, 503}
    # One batch in the committer's hands and three waiting: the other sixteen are refused.
    assert statuses.count(200) == 4
    assert all(took < 0.5 for status, took in results if status == 503)
    assert WebhookEvent.objects.count() == 4


def test_a_loop_running_late_sheds_posts_before_reading_them(settings) -> None:
    settings.WEBHOOK_QUEUE_LIMIT_S = 0.2
    late = LoopLag()
    late.lag_s = 0.5

    async def shed() -> Answer:
        app = WebProcess()
        app.lag = late
        body = body_for(6)
        answer = await request(
            "POST", URL, body=body, headers={"x-hub-signature-256": sign(body)}, app=app
        )
        app.lag.stop()
        return answer

    answer = asyncio.run(shed())
    assert answer.status == 503 and answer.headers["retry-after"] == "1"
    assert WebhookEvent.objects.count() == 0


def test_the_loop_lag_probe_sees_a_blocked_loop() -> None:
    async def block() -> tuple[float, float]:
        lag = LoopLag(interval_s=0.01)
        lag.start()
        await asyncio.sleep(0.05)
        before = lag.lag_s
        time.sleep(0.3)  # what a turn of an overloaded loop looks like to everyone else
        await asyncio.sleep(0.005)  # the overdue probe runs first, well before its next turn
        lag.stop()
        return before, lag.lag_s

    before, after = asyncio.run(block())
    assert before < 0.1
    assert after >= 0.25


def test_bodies_too_large_bad_lengths_and_a_missing_secret_are_refused(settings) -> None:
    settings.WEBHOOK_MAX_BODY_BYTES = 2048
    big = b"x" * 3000
    headers = {"x-hub-signature-256": sign(big), "content-length": "3000"}
    assert asyncio.run(request("POST", URL, body=big, headers=headers)).status == 413
    # No length declared, the body streamed in pieces past the cap.
    pieces = [b"x" * 1000] * 3
    chunked = {"x-hub-signature-256": sign(b"".join(pieces))}
    assert asyncio.run(request("POST", URL, chunks=pieces, headers=chunked)).status == 413
    bad = {"x-hub-signature-256": sign(b"{}"), "content-length": "many"}
    assert asyncio.run(request("POST", URL, body=b"{}", headers=bad)).status == 400

    settings.WHATSAPP_APP_SECRET = ""
    body = body_for(7)
    assert post(body, sign(body)).status == 403
    assert WebhookEvent.objects.count() == 0


def test_a_signed_body_that_is_not_a_callback_is_acked_and_stored_as_rejected() -> None:
    body = b'{"object": "page", "entry": []}'
    answer = post(body, sign(body))
    assert answer.status == 200  # Meta must stop retrying it
    event = WebhookEvent.objects.get()
    assert event.status == WebhookEventStatus.REJECTED
    assert event.error


def test_everything_but_the_webhook_post_goes_through_django_with_its_middleware() -> None:
    query = "hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1"
    refused = asyncio.run(request("GET", URL, query=query))
    assert refused.status == 403
    assert refused.headers["x-frame-options"] == "DENY"
    health = asyncio.run(request("GET", "/healthz"))
    assert health.status == 200 and b"ok" in health.body
    # A POST to any other path is Django's too: the API refuses it without a key.
    api = asyncio.run(request("POST", "/api/v1/messages", body=b"{}"))
    assert api.status == 401


def test_lifespan_starts_the_probe_and_shutdown_stops_the_committer() -> None:
    body = body_for(8)
    assert post(body, sign(body)).status == 200
    threads = list(committer()._threads)
    assert threads and all(t.is_alive() for t in threads)

    async def lifespan() -> list[str]:
        app = WebProcess()
        messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        sent: list[str] = []

        async def receive() -> dict[str, Any]:
            await asyncio.sleep(0.05)
            return messages.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message["type"])

        await app({"type": "lifespan"}, receive, send)
        return sent

    assert asyncio.run(lifespan()) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert not any(t.is_alive() for t in threads)


# --- the body left unread (whatsblast.asgi.BodyDrain) -------------------------------------


class Exchange:
    """A request's body in pieces and what the application's side did with it, in order."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.events: list[str] = []
        self.headers: dict[bytes, bytes] = {}

    async def receive(self) -> dict[str, Any]:
        if not self.pieces:
            await asyncio.sleep(3600)  # nothing more comes: a drain must not ask again
        self.events.append("receive")
        piece = self.pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(self.pieces)}

    async def send(self, message: dict[str, Any]) -> None:
        self.events.append(message["type"])
        if message["type"] == "http.response.start":
            self.headers = dict(message["headers"])


def scope_with(headers: list[tuple[bytes, bytes]], path: str = "/no/such/page/") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


async def answer_unread(receive: Any, send: Any) -> None:
    """An application that answers without reading the body (a 404, a 401)."""
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"no"})


async def answer_read(receive: Any, send: Any) -> None:
    """An application that reads the whole body before answering."""
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def through_drain(app: Any, exchange: Exchange, headers: list[tuple[bytes, bytes]]) -> None:
    async def go() -> None:
        receive, send = BodyDrain.around(scope_with(headers), exchange.receive, exchange.send)
        await app(receive, send)

    asyncio.run(go())


def test_a_body_left_unread_is_read_to_its_end_before_the_answer_starts() -> None:
    exchange = Exchange([b"x" * 1000] * 4)
    through_drain(answer_unread, exchange, [(b"content-length", b"4000")])
    assert exchange.events == ["receive"] * 4 + ["http.response.start", "http.response.body"]
    assert b"connection" not in exchange.headers  # the connection serves the next request


def test_a_body_read_by_the_application_is_not_read_again() -> None:
    exchange = Exchange([b"x" * 1000] * 2)
    through_drain(answer_read, exchange, [(b"transfer-encoding", b"chunked")])
    assert exchange.events == ["receive", "receive", "http.response.start", "http.response.body"]
    assert b"connection" not in exchange.headers


def test_a_request_without_a_body_is_passed_through_untouched() -> None:
    exchange = Exchange([])
    receive, send = BodyDrain.around(scope_with([]), exchange.receive, exchange.send)
    assert (receive, send) == (exchange.receive, exchange.send)


def test_a_body_past_the_drain_cap_is_left_and_the_answer_says_the_connection_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("whatsblast.asgi.DRAIN_MAX_BYTES", 2500)
    declared = Exchange([b"x" * 1000] * 3)
    through_drain(answer_unread, declared, [(b"content-length", b"3000")])
    assert declared.events == ["http.response.start", "http.response.body"]  # nothing read
    assert declared.headers[b"connection"] == b"close"
    # Chunked, so known only once read past the cap.
    streamed = Exchange([b"x" * 1000] * 4)
    through_drain(answer_unread, streamed, [(b"transfer-encoding", b"chunked")])
    assert streamed.events == ["receive"] * 3 + ["http.response.start", "http.response.body"]
    assert streamed.headers[b"connection"] == b"close"


def test_a_body_held_back_for_100_continue_is_not_asked_for_and_the_connection_closes() -> None:
    exchange = Exchange([b"x" * 1000])
    headers = [(b"content-length", b"1000"), (b"expect", b"100-continue")]
    through_drain(answer_unread, exchange, headers)
    assert exchange.events == ["http.response.start", "http.response.body"]
    assert exchange.headers[b"connection"] == b"close"


def test_django_answering_without_reading_gets_the_body_drained_first() -> None:
    exchange = Exchange([b"x" * 70_000, b"y" * 70_000])

    async def go() -> None:
        await application(
            scope_with([(b"content-length", b"140000")]), exchange.receive, exchange.send
        )

    asyncio.run(go())
    assert exchange.events[:3] == ["receive", "receive", "http.response.start"]
    assert b"connection" not in exchange.headers
