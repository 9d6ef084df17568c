"""Counters kept in Redis, so every worker process on every host adds to one total.

RQ may fork a work horse per job, and a prometheus_client counter incremented in the horse
dies with it. The engine and the webhook endpoint therefore add their counts to Redis
hashes under ``wb:metrics:`` (HINCRBY / HINCRBYFLOAT), and the web process's ``/metrics``
reads them back at scrape time (``whatsblast.observability.collector``). A writer gathers a
batch's measurements in memory and writes them in one pipeline: one round trip per
flushed batch, never one per message.

Counters are best effort. A Redis error is logged, and writes stop for
``BACKOFF_AFTER_ERROR_S`` so that neither a send loop nor the webhook endpoint waits on its
own instrumentation while Redis is away (the counts of that window are lost; Prometheus
sees a flat line, not a lie).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

import redis

from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "wb:metrics"
BACKOFF_AFTER_ERROR_S = 10.0

_backoff_lock = threading.Lock()
_writes_paused_until = 0.0


def counters_add(
    increments: Iterable[tuple[str, str, str, float]], conn: redis.Redis | None = None
) -> bool:
    """Apply (op, key, field, amount) increments in one pipeline; ``False`` when skipped.

    ``op`` is ``"int"`` (HINCRBY) or ``"float"`` (HINCRBYFLOAT).
    """
    global _writes_paused_until
    ops = list(increments)
    if not ops or time.monotonic() < _writes_paused_until:
        return False
    try:
        pipe = (conn or get_redis()).pipeline(transaction=False)
        for op, key, field, amount in ops:
            if op == "float":
                pipe.hincrbyfloat(key, field, amount)
            else:
                pipe.hincrby(key, field, int(amount))
        pipe.execute()
    except Exception as exc:  # RedisError mostly; nothing here may break a send loop
        with _backoff_lock:
            _writes_paused_until = time.monotonic() + BACKOFF_AFTER_ERROR_S
        logger.warning(
            "metrics not written (%s); writes paused for %.0fs", exc, BACKOFF_AFTER_ERROR_S
        )
        return False
    return True


def writes_resume() -> None:
    """Forget a Redis error: the next write is tried at once (tests, and after a failover)."""
    global _writes_paused_until
    with _backoff_lock:
        _writes_paused_until = 0.0
