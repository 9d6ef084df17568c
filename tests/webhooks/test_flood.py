"""A flood of signed POSTs against the real web process (gunicorn as deploy/ runs it).

One status per POST, as Meta sends them, more at once than the process admits while the
database is held up (a lock on the events table from another connection). What must hold:
past the admission limit the answer is 503 with Retry-After at once, never a 500 or a
timeout; every POST answered 200 is in the table exactly once; a POST retried after a 503
is stored once; unsigned POSTs are refused and never stored; every stored event applies;
accepted POSTs leave no access-log line, refused ones do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
import requests
from django.db import connection

from tests.observability.test_deploy import production_env, web_process
from tests.webhooks.support import URL, fixture_json, meta_bytes, sign
from webhooks.applier import events_drain
from webhooks.models import WebhookEvent, WebhookEventStatus
from whatsblast.core.processes import service_environment

pytestmark = pytest.mark.django_db(transaction=True)

POSTS = 80
ADMITTED = 4  # WEBHOOK_MAX_PENDING for the process under test


def body_for(n: int) -> bytes:
    payload = fixture_json("status_delivered")
    payload["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = f"wamid.flood-{n}"
    return meta_bytes(payload)


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """One gunicorn worker with 16 threads and a small admission limit."""
    env = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        **service_environment(),
        STATIC_ROOT=str(tmp_path / "static"),
        GUNICORN_WORKERS="1",
        GUNICORN_THREADS="16",
        WEBHOOK_MAX_PENDING=str(ADMITTED),
        WEBHOOK_STORE_TIMEOUT_S="8",
        WEBHOOK_RETRY_AFTER_S="1",
        LOG_FORMAT="text",
    )
    with web_process(tmp_path, env) as (url, log_path):
        yield url, env["WHATSAPP_APP_SECRET"], log_path


def lock_events_table(release: threading.Event, locked: threading.Event) -> None:
    with psycopg.connect(**connection.get_connection_params()) as other, other.cursor() as cur:
        cur.execute("LOCK TABLE webhooks_webhookevent IN EXCLUSIVE MODE")
        locked.set()
        release.wait(30)


def test_a_flood_past_capacity_is_shed_with_503_and_nothing_acked_is_lost(web) -> None:
    url, secret, log_path = web
    headers = {"Content-Type": "application/json", "X-Forwarded-Proto": "https"}
    bodies = [body_for(n) for n in range(POSTS)]

    def post(body: bytes, signature: str | None) -> tuple[int, str | None, float]:
        signed = {**headers, "X-Hub-Signature-256": signature} if signature else headers
        started = time.monotonic()
        response = requests.post(url + URL, data=body, headers=signed, timeout=15)
        return response.status_code, response.headers.get("Retry-After"), time.monotonic() - started

    release, locked = threading.Event(), threading.Event()
    holder = threading.Thread(target=lock_events_table, args=(release, locked), daemon=True)
    holder.start()
    assert locked.wait(10)
    with ThreadPoolExecutor(max_workers=POSTS) as pool:
        futures = [pool.submit(post, body, sign(body, secret)) for body in bodies]
        # While the database is held up, the POSTs beyond what the process admits are shed.
        time.sleep(2.0)
        shed_early = [f.result() for f in futures if f.done()]
        release.set()
        first = [f.result() for f in futures]
    holder.join(10)

    statuses = Counter(status for status, _, _ in first)
    assert set(statuses) <= {200, 503}, statuses  # no 500, no other answer
    assert statuses[503] >= POSTS - 16, statuses  # everything past the threads' share
    assert statuses[200] >= 1
    assert shed_early and all(status == 503 for status, _, _ in shed_early)
    assert all(retry == "1" for status, retry, _ in first if status == 503)
    assert all(seconds < 1.0 for status, _, seconds in shed_early)  # at once, not a timeout

    # Meta retries what was shed; each retry is stored (or found stored) and acked once.
    to_retry = [body for body, (status, _, _) in zip(bodies, first, strict=True) if status != 200]
    for _ in range(10):
        if not to_retry:
            break
        time.sleep(1)
        with ThreadPoolExecutor(max_workers=8) as pool:
            again = list(pool.map(lambda b: post(b, sign(b, secret))[0], to_retry))
        assert set(again) <= {200, 503}
        to_retry = [b for b, status in zip(to_retry, again, strict=True) if status != 200]
    assert not to_retry

    # Unsigned and wrongly signed POSTs are refused and never stored.
    forged = [body_for(1000 + n) for n in range(5)]
    assert [post(b, None)[0] for b in forged] == [403] * 5
    assert [post(b, sign(b, "wrong"))[0] for b in forged] == [403] * 5

    stored = WebhookEvent.objects.all()
    assert stored.count() == POSTS
    assert {bytes(e.body) for e in stored} == set(bodies)

    events_drain(budget_seconds=30)
    assert not WebhookEvent.objects.exclude(status=WebhookEventStatus.PROCESSED).exists()

    log = log_path.read_text()
    webhook_lines = [line for line in log.splitlines() if f"POST {URL}" in line]
    assert webhook_lines and all('" 503 ' in line or '" 403 ' in line for line in webhook_lines)
    assert sum('" 403 ' in line for line in webhook_lines) == 10


def test_threaded_worker_a_post_that_waited_past_the_queue_limit_is_answered_503_unread(
    tmp_path: Path,
) -> None:
    """The threaded alternative (gthread, whatsblast.wsgi). One thread, held by a POST whose
    commit waits on a lock: the POST queued behind it waited longer than
    WEBHOOK_QUEUE_LIMIT_S, so it is refused at once, never stored. (The asgi worker's
    equivalent, a loop running late: tests/webhooks/test_asgi.py.)"""
    env = production_env(
        ALLOWED_HOSTS="127.0.0.1",
        **service_environment(),
        STATIC_ROOT=str(tmp_path / "static"),
        GUNICORN_WORKERS="1",
        GUNICORN_THREADS="1",
        GUNICORN_WORKER_CLASS="whatsblast.gunicorn_worker.QueueTimedThreadWorker",
        WEBHOOK_MAX_PENDING="12",
        WEBHOOK_QUEUE_LIMIT_S="0.3",
        WEBHOOK_STORE_TIMEOUT_S="8",
        WEBHOOK_RETRY_AFTER_S="2",
        LOG_FORMAT="text",
    )
    with web_process(tmp_path, env, app="whatsblast.wsgi") as (url, _):
        secret = env["WHATSAPP_APP_SECRET"]
        headers = {"Content-Type": "application/json", "X-Forwarded-Proto": "https"}
        first, queued = body_for(1), body_for(2)

        def post(body: bytes) -> requests.Response:
            return requests.post(
                url + URL,
                data=body,
                headers={**headers, "X-Hub-Signature-256": sign(body, secret)},
                timeout=15,
            )

        release, locked = threading.Event(), threading.Event()
        holder = threading.Thread(target=lock_events_table, args=(release, locked), daemon=True)
        holder.start()
        assert locked.wait(10)
        with ThreadPoolExecutor(max_workers=2) as pool:
            held = pool.submit(post, first)
            time.sleep(0.3)  # the first has the only thread, waiting for its commit
            behind = pool.submit(post, queued)
            time.sleep(1.2)
            release.set()
            answers = held.result(), behind.result()
        holder.join(10)

        assert answers[0].status_code == 200
        assert answers[1].status_code == 503
        assert answers[1].headers["Retry-After"] == "2"
        # Nobody limits a POST that got its thread in time: the same body is stored now.
        assert post(queued).status_code == 200
    assert sorted(bytes(e.body) for e in WebhookEvent.objects.all()) == sorted([first, queued])


@pytest.mark.slow
def test_a_flood_at_three_times_capacity_through_the_proxy_is_shed_and_what_was_acked_is_stored(
    tmp_path: Path,
) -> None:
    """nginx (the deployed webhook blocks) in front of gunicorn (production settings), 30 s
    of one-status POSTs at three times what the pair stores, 1 in 50 unsigned."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(  # noqa: S603 - our own benchmark script
        [
            sys.executable, str(root / "bench" / "webhook_flood.py"),
            "--seconds", "30", "--workers", "2", "--threads", "8", "--keep-events",
        ],
        env={**os.environ, **service_environment()},
        capture_output=True, text=True, timeout=600, cwd=root / "bench",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    flood = report["flood"]
    print(json.dumps(report))

    assert report["offered_multiple"] >= 2.5, report  # the flood was one
    assert set(flood["statuses"]) <= {"200", "403", "503"}, flood  # no 500, nothing else
    assert int(flood["statuses"]["503"]) > flood["requests"] / 3  # shed, not queued
    assert flood["retry_after_on_503"] == flood["statuses"]["503"]
    assert flood["errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    assert flood["max_ms"] < 10_000  # the configured limit: the proxy's read timeout
    assert flood["wrapped"] == 0  # every body sent once
    # Every POST answered 200 is stored (a 503 whose commit happened after all may be too).
    assert report["events_stored_during_flood"] >= flood["statuses"]["200"]
    assert (
        report["events_stored_during_flood"] <= flood["statuses"]["200"] + flood["statuses"]["503"]
    )
    assert report["events_stored_from_unsigned"] == 0

    events_drain(budget_seconds=120)
    assert not WebhookEvent.objects.exclude(status=WebhookEventStatus.PROCESSED).exists()
