"""Shared fixtures: the real PostgreSQL (pytest-django's test database) and the real Redis.

The Redis database named by REDIS_URL belongs to the test run: it is flushed around every
test so no token bucket or queue leaks from one test into the next.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from whatsblast.redis import get_redis


@pytest.fixture(autouse=True)
def redis_conn() -> Iterator[redis.Redis]:
    conn = get_redis()
    conn.flushdb()
    yield conn
    conn.flushdb()


# The Cloud API simulator fixtures (`simulator`, `webhook_receiver`).
pytest_plugins = ["tests.simulator_fixtures"]
