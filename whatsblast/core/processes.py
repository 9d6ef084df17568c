"""Starting and stopping the project's own processes (web, workers, ticker, simulator).

Used by the demo and by tests and benchmarks that need the real thing: every child runs in
its own process group so that stopping it also stops what it forked (an RQ worker's work
horse), and a child that dies early is reported with the tail of its output.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

BASE_DIR = Path(__file__).resolve().parents[2]  # the checkout: manage.py lives here


def database_url(db: Mapping[str, Any]) -> str:
    """A URL reaching the database that Django settings dict ``db`` names.

    A socket directory may sit in ``HOST`` or, as django-environ parses
    ``postgresql://…@/name?host=/dir`` (the embedded PostgreSQL), in ``OPTIONS["host"]``:
    both are kept, so a child reaches the very server and database its parent uses (under
    pytest, the test database).
    """
    options = dict(db.get("OPTIONS") or {})
    host = str(db.get("HOST") or options.pop("host", "") or "127.0.0.1")
    options.pop("host", None)
    user = quote(str(db.get("USER") or "postgres"), safe="")
    password = f":{quote(str(db['PASSWORD']), safe='')}" if db.get("PASSWORD") else ""
    name = quote(str(db["NAME"]), safe="")
    extra = {k: str(v) for k, v in options.items() if isinstance(v, str | int)}
    if host.startswith("/"):
        query = urlencode({"host": host, **extra})
        return f"postgresql://{user}{password}@/{name}?{query}"
    port = db.get("PORT") or 5432
    query = f"?{urlencode(extra)}" if extra else ""
    return f"postgresql://{user}{password}@{host}:{port}/{name}{query}"


def service_environment() -> dict[str, str]:
    """What a child process needs to use this process's own PostgreSQL, Redis and data.

    Built from the connection actually in use, not from the environment: with the URLs
    unset, this process started (or found) the embedded servers, and under pytest its
    database is the test database, which no environment variable names.
    """
    from django.conf import settings
    from django.db import connection

    return {
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": str(settings.REDIS_URL),
        "WHATSBLAST_DATA_DIR": str(settings.DATA_DIR),
    }


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ChildExited(RuntimeError):
    """A child of a group ended while the group still needed it."""

    def __init__(self, child: Child) -> None:
        self.child = child
        super().__init__(
            f"{child.name} exited with {child.process.returncode}:\n{child.log_tail()}"
        )


@dataclass
class ProcessGroup:
    """A set of children started together and stopped together."""

    log_dir: Path
    env: Mapping[str, str]
    children: list[Child] = field(default_factory=list)
    # Put before every command, e.g. ("ip", "netns", "exec", NAME) to run it on another
    # host's network (tests/faults/network.py).
    prefix: Sequence[str] = ()

    def start(self, name: str, args: Sequence[str], *, python: bool = True) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        argv = [*self.prefix, *([sys.executable, *args] if python else args)]
        process = subprocess.Popen(  # noqa: S603 - argv built by the project
            argv,
            cwd=BASE_DIR,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = Child(name, process, log_path)
        self.children.append(child)
        return child

    def manage(self, name: str, *args: str) -> Child:
        return self.start(name, [str(BASE_DIR / "manage.py"), *args])

    def check(self) -> None:
        for child in self.children:
            if not child.alive():
                raise ChildExited(child)

    def kill(self, child: Child, sig: int = signal.SIGKILL) -> None:
        """Signal the child's whole process group (an RQ worker and its work horse)."""
        if child in self.children:
            self.children.remove(child)  # its exit is wanted, not a failure
        try:
            os.killpg(child.process.pid, sig)
        except ProcessLookupError:
            return
        child.process.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        for child in self.children:
            if child.alive():
                try:
                    os.killpg(child.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for child in self.children:
            remaining = max(0.1, deadline - time.monotonic())
            try:
                child.process.wait(remaining)
            except subprocess.TimeoutExpired:
                os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait(10)
        self.children.clear()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_http(url: str, timeout: float = 30.0) -> None:
    import requests

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException as exc:
            last = exc
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s: {last}")
