"""A flood of Meta's callbacks at three times what the stack can store, through the proxy.

The stack as deploy/ runs it: nginx with the webhook blocks of deploy/nginx/whatsblast.conf
taken as they are (only the upstream's port and its ``max_conns`` are this run's: workers x
threads), in front of gunicorn with the production settings. One status per POST, each a
distinct body signed as Meta signs (bench/webhook_ingest.py makes them); every 50th POST
is unsigned, as a forger would send.

1. Capacity: wrk with as many connections as gunicorn has threads, for ``--capacity-seconds``:
   the POSTs/s answered 200 is C.
2. Flood: for ``--seconds``, connections that each send a POST every 100 ms, as many as make
   ``--multiple`` x C offered (wrk's ``delay``: the next POST leaves on its clock, not when
   an answer comes, as long as answers come in under 100 ms, which the proxy's 503s do).

Prints one JSON object: capacity, offered POSTs/s (requests over wall time) and its
multiple of C, answers by status, 503s carrying Retry-After, wrk's timeouts and socket
errors, latency p50/p99/max over every request, the events stored during the flood and how
many of them came from unsigned POSTs (must be 0). The answered-200 count must not exceed the
stored count. Needs nginx and wrk (Debian's packages).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/webhook_flood.py \\
        [--seconds 30] [--multiple 3] [--workers 2] [--threads 8] [--keep-events]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import django_setup
from webhook_ingest import PATH, ROOT, prepare, server_env
from wrk_replay import wrk_replay

NGINX_CONF = ROOT / "deploy" / "nginx" / "whatsblast.conf"
UNSIGNED_EVERY = 50
DELAY_MS = 100
WRK_PROCESSES = 2
# Unpaced, the capacity phase sends as fast as the stack answers: 16 connections at 1 ms
# would be 16,000/s; it has measured 4,900/s here. A wrap there repeats bodies the
# ingest finds stored already, which would flatter the capacity.
CAPACITY_BODIES_PER_S = 20_000


def block(text: str, name: str) -> str:
    """The lines between ``# BEGIN name`` and ``# END name`` of the deployed config."""
    match = re.search(rf"# BEGIN {name}[^\n]*\n(.*?)\n\s*# END {name}", text, re.S)
    if match is None:
        raise RuntimeError(f"{NGINX_CONF} has no '# BEGIN {name}' block")
    return match.group(1)


def nginx_conf(directory: Path, *, port: int, upstream_port: int, max_conns: int) -> str:
    deployed = NGINX_CONF.read_text()
    upstream = block(deployed, "webhook upstream")
    upstream = upstream.replace("127.0.0.1:8000", f"127.0.0.1:{upstream_port}")
    upstream = re.sub(r"max_conns=\d+", f"max_conns={max_conns}", upstream)
    upstream = re.sub(r"keepalive \d+", f"keepalive {max_conns}", upstream)
    temp = {
        f"{kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    }
    return "\n".join(
        [
            "daemon off;",
            "worker_processes 1;",
            "user root;" if os.geteuid() == 0 else "",
            f"pid {directory / 'nginx.pid'};",
            f"error_log {directory / 'error.log'} warn;",
            "events { worker_connections 8192; }",
            "http {",
            "access_log off;",
            *sorted(temp),
            upstream,
            "server {",
            f"listen 127.0.0.1:{port};",
            "client_max_body_size 5m;",
            block(deployed, "webhook location"),
            "location = /healthz { return 200; }",
            "}",
            "}",
        ]
    )


def prepare_requests(path: Path, *, first: int, count: int) -> Path:
    """``count`` distinct signed bodies numbered from ``first`` (files prepared with ranges
    that do not overlap share no body); every UNSIGNED_EVERY-th one loses its signature."""
    signed = path.with_suffix(".signed")
    prepare(signed, count, first)
    with signed.open("rb") as lines, path.open("wb") as out:
        for n, line in enumerate(lines, start=first):
            if n % UNSIGNED_EVERY == UNSIGNED_EVERY - 1:
                _, _, body = line.partition(b" ")
                line = b"- " + body.replace(b"wamid.bench-ingest-", b"wamid.unsigned-")
            out.write(line)
    signed.unlink()
    return path


def flood_bodies_needed(*, connections: int, processes: int, seconds: int) -> int:
    """The most POSTs the paced flood can send, so that no body is sent twice: each
    connection waits DELAY_MS before each of its POSTs, so it sends at most
    seconds x 1000 / DELAY_MS of them, plus one in flight as wrk stops and one for wrk's
    clock running a little past ``seconds``. Each wrk process replays its own slice
    (every processes-th line) with its share of the connections, rounded up."""
    per_process = math.ceil(connections / processes)
    per_connection = math.ceil(seconds * 1000 / DELAY_MS) + 2
    return processes * per_process * per_connection


def wrk(url: str, requests_file: Path, *, connections: int, seconds: int, pace_ms: int,
        timeout_s: float, processes: int = WRK_PROCESSES) -> dict[str, Any]:  # fmt: skip
    """The phase's figures, its answers counted by status (503s with Retry-After too)."""
    return wrk_replay(
        url, PATH, requests_file, connections=connections, seconds=seconds,
        processes=processes, pace_ms=pace_ms, timeout_s=timeout_s, count_statuses=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--capacity-seconds", type=int, default=5)
    parser.add_argument("--multiple", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--max-pending", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=10.0, help="wrk's, = proxy_read_timeout")
    parser.add_argument("--keep-events", action="store_true", help="leave them for the caller")
    args = parser.parse_args()
    args.group_commit = True
    for tool in ("wrk", "nginx"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            raise SystemExit(f"bench/webhook_flood.py needs {tool}: apt-get install {tool}")
    django_setup()
    from django.db import connection

    from webhooks.models import WebhookEvent
    from whatsblast.core.processes import free_port, wait_for_http

    directory = Path(tempfile.mkdtemp(prefix="wb-flood-"))
    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    web_port, proxy_port = free_port(), free_port()
    in_flight = args.workers * args.threads
    (directory / "nginx.conf").write_text(
        nginx_conf(directory, port=proxy_port, upstream_port=web_port, max_conns=in_flight)
    )
    env = {
        **server_env(args, web_port),
        "GUNICORN_WORKERS": str(args.workers),
        "GUNICORN_THREADS": str(args.threads),
        "WEBHOOK_MAX_PENDING": str(args.max_pending),
    }
    web = subprocess.Popen(  # noqa: S603 - our own web process
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
        ],
        cwd=ROOT, env=env, stderr=(directory / "web.log").open("wb"),
    )  # fmt: skip
    proxy = subprocess.Popen(  # noqa: S603 - nginx with the config written above
        [shutil.which("nginx") or "/usr/sbin/nginx", "-c", str(directory / "nginx.conf")],
        stderr=(directory / "nginx.log").open("wb"),
    )
    url = f"http://127.0.0.1:{proxy_port}"
    try:
        wait_for_http(f"http://127.0.0.1:{web_port}/healthz")
        wait_for_http(f"{url}/healthz")
        # Enough distinct bodies that none repeats: the capacity phase's, then the flood's,
        # sized from the connections it will have, numbered on from the capacity phase's.
        capacity_count = CAPACITY_BODIES_PER_S * args.capacity_seconds
        capacity_file = prepare_requests(directory / "capacity.txt", first=0, count=capacity_count)
        capacity = wrk(url, capacity_file, connections=in_flight, seconds=args.capacity_seconds,
                       pace_ms=0, timeout_s=args.timeout)  # fmt: skip
        c = capacity["statuses"].get("200", 0) / capacity["seconds"]
        latency_s = capacity["p50_ms"] / 1000
        connections = math.ceil(args.multiple * c * (DELAY_MS / 1000 + latency_s))
        flood_file = prepare_requests(
            directory / "flood.txt",
            first=capacity_count,
            count=flood_bodies_needed(
                connections=connections, processes=WRK_PROCESSES, seconds=args.seconds
            ),
        )
        flood_from = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first()
        time.sleep(1)  # the capacity phase's last commits
        flood = wrk(url, flood_file, connections=connections, seconds=args.seconds,
                    pace_ms=DELAY_MS, timeout_s=args.timeout)  # fmt: skip
        time.sleep(1)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), count(*) FILTER (WHERE position(%s::bytea IN body) > 0)"
                " FROM webhooks_webhookevent WHERE id > %s",
                [b"wamid.unsigned-", flood_from or first_event],
            )
            stored, unsigned = cursor.fetchone()
    finally:
        proxy.terminate()
        web.terminate()
        proxy.wait(timeout=30)
        web.wait(timeout=30)
        if not args.keep_events:
            WebhookEvent.objects.filter(id__gt=first_event).delete()
    print(
        json.dumps(
            {
                "scenario": "webhook_flood",
                "workers": args.workers,
                "threads": args.threads,
                "capacity_posts_per_s": round(c),
                "capacity": capacity,
                "flood": flood,
                "offered_multiple": round(flood["posts_per_s"] / c, 2) if c else None,
                "events_stored_during_flood": stored,
                "events_stored_from_unsigned": unsigned,
                "first_event_id": first_event,
                "logs": str(directory),
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
