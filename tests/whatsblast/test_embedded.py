"""The embedded services: start real servers under a data directory, reuse, stop cleanly."""

from __future__ import annotations

import psycopg
import redis

from whatsblast.core import embedded
from whatsblast.core.service_versions import redis_version_check


def test_start_reuse_and_stop(tmp_path) -> None:
    data_dir = tmp_path / "data"
    pg_url = embedded.postgres_url(data_dir)
    redis_url = embedded.redis_url(data_dir)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert redis.Redis.from_url(redis_url).ping()
    # The embedded server has every command the code uses (Redis 7 level, e.g. EXPIRE NX).
    assert redis_version_check(redis.Redis.from_url(redis_url)).startswith("Valkey")
    with psycopg.connect(pg_url) as conn:
        server_version = conn.info.server_version
    assert server_version >= 140000
    assert embedded.status(data_dir) == {"postgres": True, "redis": True}
    # Starting again finds the running servers.
    assert embedded.postgres_url(data_dir) == pg_url
    assert embedded.redis_url(data_dir) == redis_url
    assert sorted(embedded.stop_all(data_dir)) == ["postgres", "redis"]
    assert embedded.status(data_dir) == {"postgres": False, "redis": False}
    assert embedded.stop_all(data_dir) == []
