"""A worker cut off from PostgreSQL or Redis finds out: the timeouts reach the real clients.

The fault suite's network scenarios (tests/faults, partition_redis and partition_postgres)
show what they are for; these check that the settings are what the live connections use.
"""

from __future__ import annotations

import socket

import pytest
import redis
from django.conf import settings
from django.db import connection

from whatsblast.core.redis import _client, client_options, get_redis


@pytest.mark.django_db
def test_postgres_connections_carry_connect_keepalive_and_user_timeouts() -> None:
    connection.ensure_connection()
    # What libpq was given for this very connection (non-default parameters only).
    params = connection.connection.info.get_parameters()
    assert params["connect_timeout"] == str(settings.DB_CONNECT_TIMEOUT)
    assert params["tcp_user_timeout"] == str(settings.DB_TCP_USER_TIMEOUT_MS)
    assert params["keepalives_idle"] == str(settings.DB_KEEPALIVES_IDLE)
    assert settings.DB_TCP_USER_TIMEOUT_MS == 15_000  # the documented default


def test_redis_client_times_out_and_probes_tcp_connections() -> None:
    # A fresh client, as a process starts with: an RQ worker raises the socket timeout of
    # the connection it is given (its blocking dequeue waits minutes), and an earlier test's
    # burst worker may have done so to this process's shared one.
    _client.cache_clear()
    conn = get_redis()
    assert conn.ping()
    kwargs = conn.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == settings.REDIS_SOCKET_TIMEOUT
    assert kwargs["socket_connect_timeout"] == settings.REDIS_CONNECT_TIMEOUT
    if not settings.REDIS_URL.startswith("unix:"):
        assert kwargs["socket_keepalive"] is True
        live = conn.connection_pool.get_connection()
        try:
            sock = live._sock
            assert sock is not None
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 10
        finally:
            conn.connection_pool.release(live)


def test_a_unix_socket_client_gets_no_tcp_options(tmp_path) -> None:
    # Keepalive exists for TCP only; redis-py's Unix connection refuses the argument.
    options = client_options(f"unix://{tmp_path}/none.sock")
    assert "socket_keepalive" not in options
    client = redis.Redis.from_url(f"unix://{tmp_path}/none.sock", **options)
    with pytest.raises(redis.ConnectionError):
        client.ping()
