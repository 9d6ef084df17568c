"""The checks behind ``/readyz``: can this deployment do its work right now?

Each check returns a ``Check`` with ``ok`` and details safe to show anyone who can reach
the endpoint: error texts pass through ``whatsblast.core.logging.redact`` (URL passwords,
tokens and configured secrets never appear), and only the exception's class and message
are kept.

The checks look at the whole system, not only this process: a deployment with no live
worker on a queue is not ready even though the web process is fine. Webhooks are still
stored durably in that state, so point a load balancer at ``/healthz``, and deploy gates
and monitoring at ``/readyz`` (see docs/operations.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import redis
import rq
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from whatsblast.core.logging import redact

_migrations_applied = False


@dataclass
class Check:
    ok: bool
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, elapsed_ms: float) -> dict[str, Any]:
        return {"ok": self.ok, "ms": round(elapsed_ms, 1), **self.details}


def describe_error(exc: BaseException) -> str:
    """An exception as ``Class: message``, scrubbed and short."""
    return redact(f"{type(exc).__name__}: {exc}")[:300]


@lru_cache(maxsize=4)
def redis_client(url: str) -> redis.Redis:
    """A client for readiness only, with short timeouts: a probe must answer in seconds."""
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)


def check_postgres() -> Check:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return Check(True)


def check_redis() -> Check:
    redis_client(settings.REDIS_URL).ping()
    return Check(True)


def check_migrations() -> Check:
    """Every migration on disk is applied (the plan to the leaf nodes is empty).

    A success is remembered for the life of the process: migrations do not un-apply, and a
    new release that brings more restarts the processes. Loading the graph costs tens of
    milliseconds, too much for every probe.
    """
    global _migrations_applied
    if _migrations_applied:
        return Check(True)
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        pending = [f"{m.app_label}.{m.name}" for m, _ in plan]
        return Check(False, {"unapplied": pending[:20], "count": len(pending)})
    _migrations_applied = True
    return Check(True)


def workers_alive(
    conn: redis.Redis, *, queues: tuple[str, ...], max_age_s: float
) -> dict[str, int]:
    """Workers per queue whose last heartbeat is at most ``max_age_s`` old.

    A worker killed with SIGKILL stays registered until its key expires (worker TTL + 60 s),
    so the heartbeat age decides, not the registration.
    """
    now = datetime.now(tz=UTC)
    alive: dict[str, int] = {}
    for name in queues:
        workers = rq.Worker.all(queue=rq.Queue(name, connection=conn))
        alive[name] = sum(
            1
            for worker in workers
            if worker.last_heartbeat is not None
            and (now - worker.last_heartbeat).total_seconds() <= max_age_s
        )
    return alive


def check_workers() -> Check:
    alive = workers_alive(
        redis_client(settings.REDIS_URL),
        queues=tuple(settings.RQ_QUEUE_NAMES),
        max_age_s=settings.READYZ_WORKER_MAX_AGE_SECONDS,
    )
    idle = [name for name, count in alive.items() if count == 0]
    details: dict[str, Any] = {"alive": alive}
    if idle:
        details["error"] = f"no live worker for {', '.join(idle)}"
    return Check(not idle, details)


def check_webhook_lag() -> Check:
    """The oldest stored callback still waiting for the applier is young enough."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        # webhookevent_pending_idx: a probe of the first pending entry.
        cursor.execute(
            "SELECT coalesce(extract(epoch FROM now() - min(received_at)), 0) "
            "FROM webhooks_webhookevent WHERE status = 'pending'"
        )
        (lag,) = cursor.fetchone()
    limit = settings.READYZ_WEBHOOK_LAG_SECONDS
    details: dict[str, Any] = {"lag_seconds": round(float(lag), 1), "limit_seconds": limit}
    if lag > limit:
        details["error"] = "the webhook applier is behind"
    return Check(float(lag) <= limit, details)


CHECKS: dict[str, Callable[[], Check]] = {
    "postgres": check_postgres,
    "redis": check_redis,
    "migrations": check_migrations,
    "workers": check_workers,
    "webhook_lag": check_webhook_lag,
}


def readiness_report() -> tuple[bool, dict[str, Any]]:
    """Run every check (one failing does not stop the others); (all ok, JSON details)."""
    results: dict[str, Any] = {}
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            result = check()
        except Exception as exc:
            result = Check(False, {"error": describe_error(exc)})
        results[name] = result.as_dict((time.monotonic() - started) * 1000)
    ready = all(result["ok"] for result in results.values())
    return ready, {"status": "ready" if ready else "not ready", "checks": results}
