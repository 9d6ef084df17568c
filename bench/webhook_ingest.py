"""Webhook POSTs/s the endpoint absorbs under gunicorn: signature check, INSERT, Redis SET.

Starts gunicorn (``whatsblast.wsgi``, ``--workers`` sync workers by default, persistent
database connections as configured by DB_CONN_MAX_AGE) on a free port, then drives it
from a separate load process: an asyncio closed loop keeping ``--concurrency`` signed
POSTs in flight for ``--seconds``, each a distinct one-status callback in Meta's shape.
Prints one JSON object: posts/s and client-side latency p50/p99 (after a 1 s warm-up).

No applier runs: the events stay pending and are deleted afterwards, with the apply jobs
the run enqueued. Run it against a scratch database:

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/webhook_ingest.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
APP_SECRET = "bench-app-secret"
WARMUP_S = 1.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def callback_body(n: int) -> bytes:
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
                                    "id": f"wamid.bench-ingest-{os.getpid()}-{n}",
                                    "status": "delivered",
                                    "timestamp": str(int(time.time())),
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
    text = json.dumps(payload, separators=(",", ":"))
    return text.replace("/", "\\/").encode()


async def load(url: str, *, seconds: float, concurrency: int) -> dict[str, Any]:
    """Closed loop: ``concurrency`` POSTs always in flight until the time is up."""
    import aiohttp

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(10**9))
    started = time.perf_counter()
    measure_from = started + WARMUP_S
    stop_at = measure_from + seconds
    # Sync workers close the connection after each response; keep-alive would not help.
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while (now := time.perf_counter()) < stop_at:
                body = callback_body(next(counter))
                signature = hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
                headers = {
                    "Content-Type": "application/json",
                    "X-Hub-Signature-256": f"sha256={signature}",
                }
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                done = time.perf_counter()
                if now >= measure_from:
                    latencies.append(done - now)
                    statuses[response.status] = statuses.get(response.status, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    latencies.sort()
    count = len(latencies)
    return {
        "posts": count,
        "seconds": seconds,
        "posts_per_s": round(count / seconds),
        "p50_ms": round(latencies[count // 2] * 1000, 2) if count else None,
        "p99_ms": round(latencies[min(count - 1, int(count * 0.99))] * 1000, 2) if count else None,
        "responses": statuses,
    }


def server_start(port: int, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        WHATSAPP_APP_SECRET=APP_SECRET,
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        LOG_LEVEL="WARNING",
    )
    env.setdefault("SECRET_KEY", "bench-only-secret-key")
    command = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "whatsblast.wsgi",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(args.workers),
        "--worker-class",
        args.worker_class,
        "--threads",
        str(args.threads),
        "--log-level",
        "warning",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
        finally:
            connection.close()
    server.terminate()
    raise RuntimeError("gunicorn did not start")


def cleanup(first_event: int, started_at: float) -> None:
    """Delete the run's events and the applier jobs it enqueued."""
    import django_rq

    from webhooks.models import WebhookEvent
    from whatsblast.core.queues import WEBHOOK_APPLY

    WebhookEvent.objects.filter(id__gt=first_event).delete()
    queue = django_rq.get_queue(WEBHOOK_APPLY.queue)
    for job in queue.get_jobs():
        enqueued = job.enqueued_at.timestamp() if job.enqueued_at else 0
        if job.func_name == WEBHOOK_APPLY.path and enqueued >= started_at - 1:
            job.delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--worker-class", default="sync", choices=("sync", "gthread"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--load-only", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.load_only:  # the separate load process
        result = asyncio.run(
            load(args.load_only, seconds=args.seconds, concurrency=args.concurrency)
        )
        print(json.dumps(result))
        return

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    import django

    django.setup()
    from webhooks.models import WebhookEvent

    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    port = free_port()
    started_at = time.time()
    server = server_start(port, args)
    try:
        loader = subprocess.run(
            [
                sys.executable,
                __file__,
                "--load-only",
                f"http://127.0.0.1:{port}/webhooks/whatsapp",
                "--seconds",
                str(args.seconds),
                "--concurrency",
                str(args.concurrency),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(loader.stdout)
        stored = WebhookEvent.objects.filter(id__gt=first_event).count()
    finally:
        server.terminate()
        server.wait(timeout=30)
        cleanup(first_event, started_at)
    result.update(
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
        concurrency=args.concurrency,
        events_stored=stored,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
