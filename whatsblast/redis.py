"""One Redis client per process, built from REDIS_URL and shared by RQ and the engine."""

from __future__ import annotations

from functools import cache

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=5, socket_timeout=10, health_check_interval=30
    )
