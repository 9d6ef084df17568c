"""The RQ queues, reached through the process's one Redis client (``whatsblast.redis``).

django-rq builds a new connection pool from ``RQ_QUEUES`` on every ``get_queue`` call;
passing the shared client keeps one pool per process and follows ``REDIS_URL`` wherever
it points.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import django_rq
import redis
import rq
from django.db import transaction

from whatsblast.redis import get_redis

logger = logging.getLogger(__name__)


def get_queue(name: str) -> rq.Queue:
    return django_rq.get_queue(name, connection=get_redis())


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
