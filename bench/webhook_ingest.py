"""Webhook POSTs/s the endpoint stores, one status per POST, as Meta sends them.

Starts the web process exactly as deploy/ runs it (``gunicorn -c deploy/gunicorn.conf.py
whatsblast.wsgi``, production settings: DEBUG off, JSON logs, the group commit), then
drives it with wrk (C, keep-alive connections, one request per signed body) from
``--connections`` connections for ``--seconds``: every request carries a distinct body
in Meta's shape and escaping, signed with the app secret as Meta signs. wrk cannot sign,
so the bodies and their signatures are made beforehand and replayed in order.

Prints one JSON object: POSTs/s answered 200, latency p50/p90/p99/max (wrk's, over every
request), non-2xx answers, the web processes' CPU per POST answered (user + system of the
gunicorn tree during the run, once every worker has booted), and how many events the table
holds afterwards (every 200 must be there). No applier runs; the run's events are
deleted afterwards. Needs wrk (Debian's package). ``--server-env NAME=VALUE`` (repeatable)
sets one of the web process's variables, to run another worker or parser beside the
deployed one (``GUNICORN_WORKER_CLASS``, ``GUNICORN_HTTP_PARSER``: deploy/gunicorn.conf.py).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/webhook_ingest.py \\
        [--seconds 10] [--connections 64] [--workers 2] [--threads 16] \\
        [--server-env GUNICORN_HTTP_PARSER=fast]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import django_setup
from wrk_replay import wrk_replay

ROOT = Path(__file__).resolve().parent.parent
APP_SECRET = "bench-app-secret"
PATH = "/webhooks/whatsapp"


def callback_body(n: int, stamp: int) -> bytes:
    """One delivered status, as Meta writes it: compact, ``/`` escaped."""
    payload = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550783881",
                                "phone_number_id": "106540352242922",
                            },
                            "statuses": [
                                {
                                    "id": f"wamid.bench-ingest-{stamp}-{n}",
                                    "status": "delivered",
                                    "timestamp": str(stamp),
                                    "recipient_id": "16505551234",
                                    "biz_opaque_callback_data": f"wb:{n + 1}",
                                    "pricing": {
                                        "billable": True,
                                        "pricing_model": "PMP",
                                        "type": "regular",
                                        "category": "marketing",
                                    },
                                }
                            ],
                        },
                    }
                ],
            }
        ],
    }
    return json.dumps(payload, separators=(",", ":")).replace("/", "\\/").encode()


def prepare(path: Path, count: int, first: int = 0) -> None:
    """``count`` signed POSTs, one per line, numbered from ``first`` (distinct bodies)."""
    stamp = int(time.time())
    with path.open("wb") as f:
        for n in range(first, first + count):
            body = callback_body(n, stamp)
            digest = hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
            f.write(b"sha256=" + digest.encode() + b" " + body + b"\n")


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its children so far."""
    import psutil

    root = psutil.Process(pid)
    return float(sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)]))


def wait_until_idle(pid: int, timeout_s: float = 20.0) -> None:
    """Until the process tree spends under 5 % of a core: its workers have all booted (one
    answering /healthz is not all of them), so their start-up is not counted as POSTs'."""
    deadline = time.monotonic() + timeout_s
    before = tree_cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_cpu_s(pid)
        if now - before < 0.025:
            return
        before = now


def wrk_run(url: str, requests_file: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Replay the signed POSTs with ``args.connections`` over ``args.wrk_processes``."""
    return wrk_replay(
        url,
        PATH,
        requests_file,
        connections=args.connections,
        seconds=args.seconds,
        processes=args.wrk_processes,
    )


def server_env(args: argparse.Namespace, port: int) -> dict[str, str]:
    from whatsblast.core.processes import service_environment

    overrides = dict(item.partition("=")[::2] for item in getattr(args, "server_env", []))
    return {
        **os.environ,
        **service_environment(),
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "DEBUG": "0",
        "SECRET_KEY": "bench-only-secret-key-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LOG_LEVEL": "WARNING",
        "LOG_FORMAT": "json",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": str(args.workers),
        "GUNICORN_THREADS": str(args.threads),
        "WEBHOOK_GROUP_COMMIT": "1" if args.group_commit else "0",
        "WEBHOOK_MAX_PENDING": str(args.max_pending),
        # The applier's debounced job would be queued once a second: none runs here.
        "WEBHOOK_APPLY_DEBOUNCE_MS": "60000",
        **overrides,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=48)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--wrk-processes", type=int, default=1)
    parser.add_argument("--max-pending", type=int, default=500)
    parser.add_argument("--no-group-commit", dest="group_commit", action="store_false")
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="NAME=VALUE",
        help="a variable for the web process (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench/webhook_ingest.py needs wrk: apt-get install wrk")
    django_setup()
    from django.db import connection

    from webhooks.models import WebhookEvent
    from whatsblast.core.processes import free_port, wait_for_http

    # Every run from a vacuumed table: the dead rows of the previous run's clean-up would
    # otherwise be vacuumed during this one.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) webhooks_webhookevent")
    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    requests_file = Path(tempfile.mkstemp(suffix=".txt")[1])
    # Enough distinct bodies that none repeats (a repeat is a duplicate, stored once): more
    # than the 2-core machine has carried (5,091/s at best), checked after the run.
    prepare(requests_file, max(50_000, 15_000 * args.seconds))
    port = free_port()
    web = subprocess.Popen(  # noqa: S603 - our own web process
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
        ],
        cwd=ROOT,
        env=server_env(args, port),
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz")
        wait_until_idle(web.pid)
        cpu_before = tree_cpu_s(web.pid)
        result = wrk_run(f"http://127.0.0.1:{port}", requests_file, args)
        cpu_s = tree_cpu_s(web.pid) - cpu_before
        stored = WebhookEvent.objects.filter(id__gt=first_event).count()
    finally:
        web.terminate()
        web.wait(timeout=30)
        requests_file.unlink()
        WebhookEvent.objects.filter(id__gt=first_event).delete()
    result.update(
        scenario="webhook_ingest",
        workers=args.workers,
        threads=args.threads,
        connections=args.connections,
        group_commit=args.group_commit,
        server_env=args.server_env,
        events_stored=stored,
        answered_200=result["requests"] - result["non_2xx"],
    )
    result["web_cpu_us_per_post"] = round(cpu_s * 1e6 / max(result["answered_200"], 1), 1)
    print(json.dumps(result))
    if result["wrapped"]:
        raise SystemExit("bodies were sent twice (their duplicates are not stored): prepare more")


if __name__ == "__main__":
    sys.exit(main())
