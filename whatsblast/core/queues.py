"""The RQ queues and jobs: names, priorities, timeouts, and enqueueing by name.

Every job is named here with its queue and timeout, and is enqueued by its dotted name, so
no app imports the module that defines the jobs (``whatsblast.jobs``, the roof): the
services that queue work stay below the code that runs it. Enqueueing after commit is the
normal case: the rows are the record, a job only wakes a worker sooner.

Queues go through the process's one Redis client (``whatsblast.core.redis``): django-rq
builds a new connection pool from ``RQ_QUEUES`` on every ``get_queue`` call; passing the
shared client keeps one pool per process and follows ``REDIS_URL`` wherever it points.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import django_rq
import redis
import rq
from django.conf import settings
from django.db import transaction

from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

TRANSACTIONAL = "transactional"
CAMPAIGNS = "campaigns"
MAINTENANCE = "maintenance"
# Served in this order by every worker: transactional traffic first.
PRIORITY = (TRANSACTIONAL, CAMPAIGNS, MAINTENANCE)
# A queue's default job timeout: an OTP is stale within a minute; a maintenance job may
# launch a million recipients or import a million contacts.
TIMEOUTS = {TRANSACTIONAL: 60, CAMPAIGNS: 600, MAINTENANCE: 1800}


@dataclass(frozen=True)
class JobSpec:
    """A job by its dotted name, with the queue it runs on and how long it may take."""

    path: str
    queue: str
    timeout_s: int | None = None  # None: the queue's default


_JOBS = "whatsblast.jobs"
NUMBER_SEND = JobSpec(f"{_JOBS}.number_send_job", CAMPAIGNS)
CAMPAIGN_LAUNCH = JobSpec(f"{_JOBS}.campaign_launch_job", MAINTENANCE)
CAMPAIGNS_LAUNCH_TOGETHER = JobSpec(f"{_JOBS}.campaigns_launch_together_job", MAINTENANCE)
CAMPAIGN_START_SCHEDULED = JobSpec(f"{_JOBS}.campaign_start_job", MAINTENANCE)
TRANSACTIONAL_SEND = JobSpec(f"{_JOBS}.transactional_send_job", TRANSACTIONAL)
MAINTENANCE_TICK = JobSpec(f"{_JOBS}.maintenance_tick_job", MAINTENANCE, timeout_s=60)
WEBHOOK_APPLY = JobSpec(f"{_JOBS}.webhook_apply_job", MAINTENANCE)
TEMPLATE_SYNC = JobSpec(f"{_JOBS}.template_sync_all_job", MAINTENANCE)
CONTACTS_IMPORT = JobSpec(f"{_JOBS}.contacts_import_job", MAINTENANCE)
GRAPH_READ = JobSpec(f"{_JOBS}.graph_read_all_job", MAINTENANCE)
CAMPAIGN_COSTS_REFRESH = JobSpec(f"{_JOBS}.campaign_costs_refresh_job", MAINTENANCE)
JOURNEYS_PASS = JobSpec(f"{_JOBS}.journeys_pass_job", MAINTENANCE, timeout_s=300)
ALL_JOBS = (
    NUMBER_SEND,
    CAMPAIGN_LAUNCH,
    CAMPAIGNS_LAUNCH_TOGETHER,
    CAMPAIGN_START_SCHEDULED,
    TRANSACTIONAL_SEND,
    MAINTENANCE_TICK,
    WEBHOOK_APPLY,
    TEMPLATE_SYNC,
    CONTACTS_IMPORT,
    GRAPH_READ,
    CAMPAIGN_COSTS_REFRESH,
    JOURNEYS_PASS,
)


def get_queue(name: str) -> rq.Queue:
    return django_rq.get_queue(name, connection=get_redis())


def enqueue(
    job: JobSpec,
    *args: Any,
    at: datetime | None = None,
    delay: timedelta | None = None,
    timeout_s: int | None = None,
) -> rq.job.Job:
    """Queue ``job`` now (or at ``at``, or after ``delay``); raises when Redis is away."""
    queue = get_queue(job.queue)
    options: dict[str, Any] = {"result_ttl": settings.RQ_RESULT_TTL_SECONDS}
    timeout = timeout_s or job.timeout_s
    if timeout is not None:
        options["job_timeout"] = timeout
    queued: rq.job.Job
    if at is not None:
        queued = queue.enqueue_at(at, job.path, *args, **options)
    elif delay is not None:
        queued = queue.enqueue_in(delay, job.path, *args, **options)
    else:
        queued = queue.enqueue(job.path, *args, **options)
    return queued


def after_commit(action: Callable[[], object], *, what: str) -> None:
    """Run ``action`` (an enqueue, a kick) once the transaction commits.

    The rows are the record; the job only wakes a worker sooner. When Redis is away the
    commit stands, a warning says what was not queued, and the maintenance tick, which
    finds due work from the tables, does it later. The request never fails for it.
    """

    def run() -> None:
        try:
            action()
        except redis.RedisError as exc:
            logger.warning("%s not queued (Redis unavailable: %s); the tick will do it", what, exc)

    transaction.on_commit(run)


def enqueue_after_commit(job: JobSpec, *args: Any, what: str = "") -> None:
    """``enqueue`` once the transaction commits, Redis errors logged (see ``after_commit``)."""
    after_commit(lambda: enqueue(job, *args), what=what or job.path.rsplit(".", 1)[-1])


def waiting(queue_name: str) -> int:
    """Jobs waiting on the queue (one LLEN)."""
    return int(get_queue(queue_name).count)


def urgent_jobs_waiting() -> bool:
    """Transactional or campaign jobs wait: a long maintenance job should let them by."""
    try:
        return waiting(TRANSACTIONAL) > 0 or waiting(CAMPAIGNS) > 0
    except redis.RedisError:
        return False  # nobody can be waiting on a queue that cannot be read
