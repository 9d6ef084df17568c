"""Each pytest-xdist worker flushes its own Redis database, never another worker's."""

from __future__ import annotations

import pytest

from tests.conftest import redis_url_for_worker


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("redis://127.0.0.1:6379/9", 0, "redis://127.0.0.1:6379/9"),
        ("redis://127.0.0.1:6379/9", 1, "redis://127.0.0.1:6379/10"),
        ("redis://127.0.0.1:6379", 1, "redis://127.0.0.1:6379/1"),
        (
            "redis://:pw@cache:6380/2?socket_timeout=5",
            3,
            "redis://:pw@cache:6380/5?socket_timeout=5",
        ),
        ("unix:///data/redis/redis.sock", 1, "unix:///data/redis/redis.sock?db=1"),
        ("unix:///data/redis/redis.sock?db=4", 2, "unix:///data/redis/redis.sock?db=6"),
    ],
)
def test_a_worker_takes_the_database_after_the_runs_own(
    url: str, worker: int, expected: str
) -> None:
    assert redis_url_for_worker(url, worker) == expected


def test_a_worker_past_the_last_database_is_refused_with_the_fix() -> None:
    with pytest.raises(pytest.UsageError, match="database 16 .* lower database in REDIS_URL"):
        redis_url_for_worker("redis://127.0.0.1:6379/15", 1)
