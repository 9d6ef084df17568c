"""One Redis client per process, built from REDIS_URL and shared by RQ and the engine.

The first time a process gets the client it checks the server's version
(``whatsblast.core.service_versions``): an old server is refused with its version named, once,
rather than failing later on a command it lacks. A server that does not answer is not
checked yet; the next call tries again.
"""

from __future__ import annotations

import asyncio
import socket
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio
from django.conf import settings

from whatsblast.core.service_versions import redis_version_check

_checked: set[str] = set()


def client_options(url: str) -> dict[str, Any]:
    """Timeouts and keepalive for a client of ``url`` (settings: REDIS_*_TIMEOUT).

    A partitioned worker (packets dropped, nothing refused) must see a command fail within
    REDIS_SOCKET_TIMEOUT rather than wait for the kernel, so that it stops renewing what
    it can no longer hold and another host takes its slots (docs/operations.md). Keepalive
    probes find a dead idle connection; they exist for TCP only, not for Unix sockets.
    """
    options: dict[str, Any] = {
        "socket_connect_timeout": settings.REDIS_CONNECT_TIMEOUT,
        "socket_timeout": settings.REDIS_SOCKET_TIMEOUT,
        "health_check_interval": 30,
    }
    if urlsplit(url).scheme != "unix":
        options["socket_keepalive"] = True
        options["socket_keepalive_options"] = {
            option: value
            for option, value in (
                (getattr(socket, "TCP_KEEPIDLE", None), 10),
                (getattr(socket, "TCP_KEEPINTVL", None), 5),
                (getattr(socket, "TCP_KEEPCNT", None), 3),
            )
            if option is not None
        }
    return options


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, **client_options(url))


def get_redis() -> redis.Redis:
    url = settings.REDIS_URL
    conn = _client(url)
    if url not in _checked:
        try:
            redis_version_check(conn, where=_where(url))
        except (redis.ConnectionError, redis.TimeoutError):
            return conn  # down: the caller meets that itself; the version is checked later
        _checked.add(url)
    return conn


def _where(url: str) -> str:
    """The server's address without credentials, for an error message."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" + (
        parts.path if parts.scheme == "unix" else ""
    )


_async_clients: dict[tuple[int, str], redis.asyncio.Redis] = {}


def get_async_redis() -> redis.asyncio.Redis:
    """The asyncio client of the running event loop (one per loop: clients are bound to it)."""
    loop = asyncio.get_running_loop()
    url = settings.REDIS_URL
    key = (id(loop), url)
    client = _async_clients.get(key)
    if client is None:
        client = _async_clients[key] = redis.asyncio.Redis.from_url(url, **client_options(url))
    return client
