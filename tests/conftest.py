"""Shared fixtures: the real PostgreSQL (pytest-django's test database) and the real Redis.

The Redis database named by REDIS_URL belongs to the test run: it is flushed around every
test so no token bucket or queue leaks from one test into the next.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from webhooks.ingest import committer_stop
from whatsblast.core.counters import writes_resume
from whatsblast.core.redis import get_redis


@pytest.fixture(autouse=True)
def redis_conn() -> Iterator[redis.Redis]:
    conn = get_redis()
    conn.flushdb()
    yield conn
    conn.flushdb()


@pytest.fixture(autouse=True)
def webhook_committer_stopped() -> Iterator[None]:
    """A test that stored webhooks through the group commit leaves no committer thread
    (and no database connection of one) behind."""
    yield
    committer_stop()


@pytest.fixture
def stopped_redis(settings: Any) -> Iterator[str]:
    """REDIS_URL pointing at a real Redis that started, answered, and was then shut down.

    Everything in the process that reaches Redis through ``get_redis`` (the engine, RQ
    queues, the login throttle, metrics) meets a stopped server from here on.
    """
    from tests.faults.services import PrivateRedis, short_tmpdir

    directory = short_tmpdir("wbr-")
    server = PrivateRedis(directory).start()
    settings.REDIS_URL = server.url
    assert get_redis().ping()
    server.stop()
    yield server.url
    writes_resume()  # metrics paused their writes on the errors; the next test starts fresh
    shutil.rmtree(directory, ignore_errors=True)


# The Cloud API simulator fixtures (`simulator`, `webhook_receiver`).
pytest_plugins = ["tests.simulator_fixtures"]
