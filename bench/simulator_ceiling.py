"""The simulator's own ceiling: send requests/s it sustains at 250 ms latency.

Starts ``manage.py simulator`` as a separate process, drives it from this process with an
asyncio load generator (closed loop: ``--concurrency`` requests always in flight over
keep-alive connections) and prints one JSON object: requests/s, latency p50/p99 and the CPU
of both processes. At 250 ms, 1,000 in flight allow up to 4,000 requests/s, so a lower
figure is the simulator's (or the machine's) limit, not the loop's.

    .venv/bin/python bench/simulator_ceiling.py [--seconds 10] [--concurrency 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
NUMBER, TOKEN, TEMPLATE = "bench-pn", "bench-token", "bench_promo"


# A webhook sink for --webhooks: answers 200 to every POST, in its own process.
SINK = """
import sys
from aiohttp import web
async def ok(request):
    await request.read()
    return web.Response()
app = web.Application()
app.router.add_post("/webhooks/whatsapp", ok)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def start_sink() -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", SINK, str(port)], text=True)
    for _ in range(100):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/webhooks/whatsapp"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("webhook sink did not start")


def start_simulator(
    latency_ms: float, jitter_ms: float, *extra: str
) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "simulator",
        "--port=0",
        f"--latency-ms={latency_ms}",
        f"--jitter-ms={jitter_ms}",
        f"--number={NUMBER}:{TOKEN}:1000000",
        f"--template={TEMPLATE}:en_US:2",
        "--no-pair-limit",
        "--record-bodies=0",
        *extra,
    ]
    env = {**os.environ, "DEBUG": os.environ.get("DEBUG", "1")}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"simulator did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1]


def message_body(i: int) -> bytes:
    body = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": f"+4915{i:09d}",
        "type": "template",
        "biz_opaque_callback_data": f"wb:{i}",
        "template": {
            "name": TEMPLATE,
            "language": {"policy": "deterministic", "code": "en_US"},
            "components": [
                {
                    "type": "body",
                    "parameters": [
                        {"type": "text", "text": "Asha"},
                        {"type": "text", "text": "42"},
                    ],
                }
            ],
        },
    }
    return json.dumps(body, separators=(",", ":")).encode()


async def drive(url: str, *, concurrency: int, seconds: float, warmup: float) -> dict[str, float]:
    endpoint = f"{url}/v23.0/{NUMBER}/messages"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    latencies: list[float] = []
    errors = 0
    counter = iter(range(10**9))
    started = time.perf_counter()
    measure_from = started + warmup
    stop_at = measure_from + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)

    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal errors
            while (now := time.perf_counter()) < stop_at:
                data = message_body(next(counter))
                async with session.post(endpoint, data=data, headers=headers) as response:
                    await response.read()
                    ok = response.status == 200
                done = time.perf_counter()
                if now >= measure_from:
                    latencies.append(done - now)
                    errors += not ok

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "requests_per_s": round(len(latencies) / seconds, 1),
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=250.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument(
        "--webhooks", action="store_true", help="also deliver status webhooks (batches of 100)"
    )
    args = parser.parse_args()
    sink, extra = None, []
    if args.webhooks:
        sink, callback = start_sink()
        extra = [f"--callback-url={callback}", "--webhook-batch-size=100", "--app-secret=s"]
    proc, url = start_simulator(args.latency_ms, args.jitter_ms, *extra)
    try:
        sim, me = psutil.Process(proc.pid), psutil.Process()
        sim_cpu0, me_cpu0, t0 = sum(sim.cpu_times()[:2]), sum(me.cpu_times()[:2]), time.time()
        result = asyncio.run(
            drive(url, concurrency=args.concurrency, seconds=args.seconds, warmup=args.warmup)
        )
        wall = time.time() - t0
        sim_cpu = sum(sim.cpu_times()[:2]) - sim_cpu0
        me_cpu = sum(me.cpu_times()[:2]) - me_cpu0
        with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
            stats = json.loads(response.read())
            accepted = stats["accepted"]
    finally:
        proc.terminate()
        proc.wait(10)
        if sink is not None:
            sink.terminate()
            sink.wait(10)
    total = result["requests"]
    print(
        json.dumps(
            {
                "scenario": "simulator_ceiling",
                "latency_ms": args.latency_ms,
                "concurrency": args.concurrency,
                "seconds": args.seconds,
                **result,
                "simulator_accepted_total": accepted,
                "webhooks": stats["webhooks"] if args.webhooks else None,
                "simulator_cpu_percent": round(100 * sim_cpu / wall, 1),
                "loadgen_cpu_percent": round(100 * me_cpu / wall, 1),
                "simulator_cpu_ms_per_request": round(1000 * sim_cpu / max(1, accepted), 3),
                "measured_requests": total,
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
