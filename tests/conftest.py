"""Shared fixtures: the real PostgreSQL (pytest-django's test database) and the real Redis.

The Redis database named by REDIS_URL belongs to the test run: it is flushed around every
test so no token bucket or queue leaks from one test into the next.

``scripts/test.sh`` runs the suite on pytest-xdist workers. Each worker is a test run of its
own: pytest-django gives it its own test database (``…_gw1``) and ``pytest_configure`` below
its own Redis database, the one after REDIS_URL's for each worker after the first.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import redis

from webhooks.ingest import committer_stop
from whatsblast.core.counters import writes_resume
from whatsblast.core.redis import get_redis

REDIS_DATABASES = 16  # Redis's and Valkey's default


def redis_url_for_worker(url: str, worker: int) -> str:
    """REDIS_URL's database moved up by ``worker`` (0 keeps it): the path of a
    ``redis://`` URL, the ``db`` parameter of a ``unix://`` one."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if parts.scheme == "unix":
        base = int(query.get("db", 0))
    else:
        base = int(parts.path.strip("/") or query.get("db", 0))
    database = base + worker
    if database >= REDIS_DATABASES:
        raise pytest.UsageError(
            f"test worker {worker} would use Redis database {database} of {url}: give a lower "
            f"database in REDIS_URL or fewer workers (-n)"
        )
    if parts.scheme == "unix":
        # urlunsplit would drop the empty host: "unix:/path".
        return f"{url.partition('?')[0]}?{urlencode({**query, 'db': str(database)})}"
    query.pop("db", None)
    return urlunsplit(parts._replace(path=f"/{database}", query=urlencode(query)))


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker:
        return
    from django.conf import settings

    url = redis_url_for_worker(settings.REDIS_URL, int(worker.removeprefix("gw")))
    settings.REDIS_URL = url
    for queue in settings.RQ_QUEUES.values():
        queue["URL"] = url


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, the files with long scenarios (marked ``slow``) first.

    The scheduler hands out whole files in collection order; the fault suite alone takes a
    third of the run, and started late it would leave the other worker idle at the end.
    A run in one process keeps the files' own order.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: files stay whole


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


# Other sessions of the test database that are inside a statement or a transaction. A
# process the test started and stopped (a worker, the ticker) may leave its backend running
# the statement it was in when it was killed, and the live server's thread may still be
# answering a scrape of /metrics. The flush that ends a transactional test is one TRUNCATE
# of every table: it takes their locks one by one, and a session that still locks a table
# (a foreign-key check of an INSERT in flight) can deadlock with it, which fails the test's
# teardown. So the flush waits until those sessions are done.
BUSY_SESSIONS_SQL = """
    SELECT pid, application_name, state, left(query, 120)
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND state IS DISTINCT FROM 'idle'
      AND backend_type = 'client backend'
"""
QUIET_WAIT_S = 15.0


def is_transactional(request: pytest.FixtureRequest) -> bool:
    marker = request.node.get_closest_marker("django_db")
    names = request.fixturenames
    return bool(
        (marker and marker.kwargs.get("transaction"))
        or "transactional_db" in names
        or "live_server" in names
    )


@pytest.fixture(autouse=True)
def database_quiet_before_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    if not is_transactional(request):
        yield
        return
    # Requested here so that it is torn down (the flush) after this fixture's teardown.
    request.getfixturevalue("transactional_db")
    yield
    from django.db import connection

    deadline = time.monotonic() + QUIET_WAIT_S
    with connection.cursor() as cursor:
        while True:
            cursor.execute(BUSY_SESSIONS_SQL)
            busy = cursor.fetchall()
            if not busy or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if busy:
            # Still inside a statement after the wait: ended, so the flush can run.
            warnings.warn(f"sessions ended before the flush: {busy}", stacklevel=1)
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM (" + BUSY_SESSIONS_SQL + ") AS busy"
            )


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
