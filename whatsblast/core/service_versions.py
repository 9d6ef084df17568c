"""The oldest PostgreSQL and Redis whatsblast runs on, checked when a process first uses them.

* Redis 7.0 or later, or Valkey 7.2 or later (Valkey reports the Redis version it is
  compatible with as ``redis_version``): the login throttle uses ``EXPIRE … NX`` (7.0).
  ``get_redis`` and every RQ worker check the server once, on their first connection.
* PostgreSQL 14 or later: Django 5.2's own floor, which Django checks on every new
  connection ("PostgreSQL 14 or later is required (found 13.x)").

An older server is refused with an error naming the version found, at start-up, instead of
a ``wrong number of arguments`` deep inside a request.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

MIN_REDIS = (7, 0)
MIN_POSTGRES = 14


class ServiceVersionError(ImproperlyConfigured):
    """A service answers, but is older than whatsblast supports."""


def version_tuple(text: str) -> tuple[int, ...]:
    """``"7.2.4"`` → ``(7, 2, 4)``; anything after the numbers is ignored."""
    match = re.match(r"^\s*(\d+(?:\.\d+)*)", text)
    if match is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def redis_version_supported(version: str) -> bool:
    return version_tuple(version)[:2] >= MIN_REDIS


def redis_server_describe(info: dict[str, Any]) -> str:
    """``Valkey 9.1.2 (Redis 7.2.4 compatible)`` or ``Redis 6.2.14``, from ``INFO server``."""
    redis_version = str(info.get("redis_version", "?"))
    valkey = info.get("valkey_version")
    if valkey:
        return f"Valkey {valkey} (Redis {redis_version} compatible)"
    return f"Redis {redis_version}"


def redis_version_refusal(info: dict[str, Any], *, where: str = "") -> str | None:
    """Why the server that answered ``INFO server`` with ``info`` is refused; ``None`` if not."""
    version = str(info.get("redis_version", "0"))
    if redis_version_supported(version):
        return None
    minimum = ".".join(str(n) for n in MIN_REDIS)
    return (
        f"{redis_server_describe(info)}{f' at {where}' if where else ''} is too old: "
        f"whatsblast needs Redis {minimum} or later (or Valkey 7.2 or later). Upgrade the "
        "server, or unset REDIS_URL to use the embedded one."
    )


def redis_version_check(conn: Any, *, where: str = "") -> str:
    """Raise ``ServiceVersionError`` unless the server behind ``conn`` is new enough.

    Returns the server's description. Connection errors propagate as they are: a server
    that does not answer is the caller's usual problem, not a version problem.
    """
    info = conn.info("server")
    refusal = redis_version_refusal(info, where=where)
    if refusal is not None:
        raise ServiceVersionError(refusal)
    return redis_server_describe(info)
