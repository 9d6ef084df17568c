"""A flood of signed POSTs against the real web process (gunicorn as deploy/ runs it).

One status per POST, as Meta sends them, more at once than the process admits while the
database is held up (a lock on the events table from another connection). What must hold:
past the admission limit the answer is 503 with Retry-After at once, never a 500 or a
timeout; every POST answered 200 is in the table exactly once; a POST retried after a 503
is stored once; unsigned POSTs are refused and never stored; every stored event applies;
accepted POSTs leave no access-log line, refused ones do.
"""

from __future__ import annotations

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
