"""CloudApiClient.send_batch (requests + a thread pool) against the simulator at 250 ms.

Starts ``manage.py simulator`` as a separate process, then calls ``send_batch`` repeatedly
for ``--seconds`` at each concurrency, and prints one JSON object: calls/s and the client
process's CPU per call. Little's law bounds the ideal at concurrency / latency.

    .venv/bin/python bench/client_throughput.py [--seconds 6] [--concurrency 100 250]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import django
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")
os.environ.setdefault("DEBUG", "1")
django.setup()

from simulator_ceiling import NUMBER, TEMPLATE, TOKEN, start_simulator  # noqa: E402

from delivery.cloud.client import Accepted, CloudApiClient, SendRequest  # noqa: E402


def run(url: str, *, concurrency: int, seconds: float, latency_s: float) -> dict[str, float]:
    client = CloudApiClient(
        api_version="v23.0", connect_timeout=3.0, read_timeout=10.0, pool_size=concurrency
    )
    batch = [
        SendRequest(
            base_url=url,
            phone_number_id=NUMBER,
            access_token=TOKEN,
            to=f"+4915{i:09d}",
            callback_data=f"wb:{i}",
            template_name=TEMPLATE,
            language="en_US",
            params={"body": ["Asha", str(i)]},
        )
        for i in range(concurrency * 4)
    ]
    client.send_batch(batch[:concurrency], concurrency=concurrency)  # warm the pool
    me = psutil.Process()
    cpu0, started = sum(me.cpu_times()[:2]), time.perf_counter()
    calls = accepted = 0
    while time.perf_counter() - started < seconds:
        results = client.send_batch(batch, concurrency=concurrency)
        calls += len(results)
        accepted += sum(isinstance(r, Accepted) for r in results)
    wall = time.perf_counter() - started
    cpu = sum(me.cpu_times()[:2]) - cpu0
    client.close()
    return {
        "concurrency": concurrency,
        "calls": calls,
        "accepted": accepted,
        "calls_per_s": round(calls / wall, 1),
        "ideal_calls_per_s": round(concurrency / latency_s, 1),
        "client_cpu_percent": round(100 * cpu / wall, 1),
        "client_cpu_ms_per_call": round(1000 * cpu / calls, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[100, 250])
    parser.add_argument("--latency-ms", type=float, default=250.0)
    args = parser.parse_args()
    proc, url = start_simulator(args.latency_ms, 0.0)
    try:
        runs = [
            run(url, concurrency=c, seconds=args.seconds, latency_s=args.latency_ms / 1000)
            for c in args.concurrency
        ]
    finally:
        proc.terminate()
        proc.wait(10)
    print(
        json.dumps(
            {
                "scenario": "client_throughput",
                "mechanism": "requests.Session + ThreadPoolExecutor",
                "latency_ms": args.latency_ms,
                "runs": runs,
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
