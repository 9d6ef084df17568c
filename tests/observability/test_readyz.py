"""/readyz against the real services, and a real `manage.py rqworker` subprocess."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from webhooks.models import WebhookEvent
from whatsblast.core.processes import ProcessGroup, free_port, service_environment

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = ("transactional", "campaigns", "maintenance")


@pytest.fixture
def processes(tmp_path, settings) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def readyz() -> tuple[int, dict]:
    response = Client().get("/readyz")
    return response.status_code, response.json()


def wait_for_status(status: int, group: ProcessGroup, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        group.check()
        code, body = readyz()
        if code == status:
            return body
        time.sleep(0.2)
    raise AssertionError(f"/readyz never answered {status}: {body}")


def start_worker(group: ProcessGroup, name: str = "worker"):
    # A short TTL makes the idle worker heartbeat every second (TTL - 15 s).
    return group.manage(name, "rqworker", *QUEUES, "--worker-ttl", "16")


def test_healthz_is_a_plain_liveness_answer() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_not_ready_without_a_worker_then_ready_once_one_runs(processes: ProcessGroup) -> None:
    code, body = readyz()
    assert code == 503
    assert body["status"] == "not ready"
    checks = body["checks"]
    assert checks["workers"]["ok"] is False
    assert checks["workers"]["alive"] == {name: 0 for name in QUEUES}
    for name in ("postgres", "redis", "migrations", "webhook_lag"):
        assert checks[name]["ok"] is True, checks[name]

    start_worker(processes)
    body = wait_for_status(200, processes)

    assert body["status"] == "ready"
    assert body["checks"]["workers"]["alive"] == {name: 1 for name in QUEUES}


@override_settings(READYZ_WORKER_MAX_AGE_SECONDS=5)
def test_a_killed_worker_stops_counting_once_its_heartbeat_is_stale(
    processes: ProcessGroup,
) -> None:
    worker = start_worker(processes)
    wait_for_status(200, processes)
    time.sleep(6)  # longer than the allowed age: a live worker has heartbeated since
    assert readyz()[0] == 200

    processes.kill(worker, signal.SIGKILL)  # no chance to unregister itself

    started = time.monotonic()
    body = wait_for_status(503, processes, timeout=15)
    assert time.monotonic() - started <= 7
    assert body["checks"]["workers"]["alive"]["campaigns"] == 0


def test_unreachable_redis_fails_readiness_without_leaking_its_password(
    processes: ProcessGroup, settings
) -> None:
    start_worker(processes)
    wait_for_status(200, processes)
    dead = f"redis://:sup3r-secret-pass@127.0.0.1:{free_port()}/11"

    with override_settings(REDIS_URL=dead):
        code, body = readyz()

    assert code == 503
    assert body["checks"]["redis"]["ok"] is False
    assert "ConnectionError" in body["checks"]["redis"]["error"]
    assert body["checks"]["workers"]["ok"] is False
    assert body["checks"]["postgres"]["ok"] is True
    assert "sup3r-secret-pass" not in Client().get("/readyz").content.decode()
    with override_settings(REDIS_URL=dead):
        assert "sup3r-secret-pass" not in Client().get("/readyz").content.decode()

    # Redis back (the real URL again): ready again.
    assert readyz()[0] == 200


@override_settings(READYZ_WEBHOOK_LAG_SECONDS=60)
def test_a_webhook_backlog_older_than_the_bound_fails_readiness(processes: ProcessGroup) -> None:
    start_worker(processes, "web-hook-worker")
    wait_for_status(200, processes)
    # Stored bodies nobody applied (the worker serves no applier job for them).
    event = WebhookEvent.objects.create(body=b"{}", body_sha256="a" * 64)
    WebhookEvent.objects.filter(pk=event.pk).update(
        received_at=timezone.now() - timedelta(seconds=90)
    )

    code, body = readyz()

    assert code == 503
    lag = body["checks"]["webhook_lag"]
    assert lag["ok"] is False and lag["lag_seconds"] >= 89 and lag["limit_seconds"] == 60
    WebhookEvent.objects.filter(pk=event.pk).update(status="processed")
    assert readyz()[0] == 200
