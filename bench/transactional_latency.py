"""Transactional latency while a campaign saturates the same number.

Starts, as real processes: the simulator (``--latency-ms``, default 50), the web server
(gunicorn), ``--workers`` RQ workers (``rqworker transactional campaigns maintenance``,
default 2) and the ticker. Creates a number at ``--rate`` msg/s with transactional
reserve ``--reserve`` and a campaign of ``--recipients`` contacts, launches it, waits for
it to reach its share, then POSTs transactional sends to ``/api/v1/messages`` at ``--tps``
per second for ``--seconds``. Each send's latency runs from the moment its API call starts
to the simulator's receipt of it (``/_sim/records``: wall time and recipient; one host, one
clock). Prints one JSON object:

    {"latency_s": {"p50", "p95", "p99", "max"}, "api_call_s": {...}, "sent": 300, "lost": 0,
     "campaign": {"share": 80, "achieved_per_s": 79.1, "ratio": 0.99}, "number": {...}}

Uses the database and Redis from DATABASE_URL/REDIS_URL; empties the RQ queues in that
Redis database first, so point it at a scratch one. Leaves its rows behind (campaign
names start with "bench-txn"); the campaign is cancelled at the end.

    .venv/bin/python bench/transactional_latency.py [--seconds 60] [--tps 5] [--rate 100]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import uuid
from typing import Any

from harness import django_setup, process_env

django_setup()

import django_rq  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    Contact,
    ContactList,
    ListMembership,
    PhoneNumber,
    Template,
)
from delivery.api.keys import api_key_create  # noqa: E402
from delivery.campaigns.launch import campaign_start  # noqa: E402
from delivery.campaigns.lifecycle import campaign_cancel  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402

TOKEN = "bench-token"  # noqa: S105 - the simulator's token


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--tps", type=float, default=5, help="transactional sends per second")
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--reserve", type=float, default=0.2)
    parser.add_argument("--recipients", type=int, default=20_000)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=5, help="campaign-only seconds first")
    parser.add_argument(
        "--worker-class", default="", help="e.g. whatsblast.rq.SimpleWorker (no fork per job)"
    )
    parser.add_argument(
        "--transactional-worker",
        action="store_true",
        help="add one SimpleWorker serving only the transactional queue",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    for name in settings.RQ_QUEUE_NAMES:
        django_rq.get_queue(name).empty()

    run = uuid.uuid4().hex[:8]
    sim_port, web_port = free_port(), free_port()
    sim, web = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{web_port}"
    group = ProcessGroup(
        settings.DATA_DIR / "bench-logs" / f"txn-{run}",
        process_env(DEBUG="0", ALLOWED_HOSTS="127.0.0.1,localhost"),
    )
    campaign: Campaign | None = None
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
        )  # fmt: skip
        group.start(
            "web",
            [
                "-m", "gunicorn", "whatsblast.asgi", "--worker-class", "asgi",
                "--bind", f"127.0.0.1:{web_port}", "--workers", "2",
            ],
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        wait_for_http(f"{web}/healthz")
        campaign, key = _setup(run, args, sim)
        worker_class = ["--worker-class", args.worker_class] if args.worker_class else []
        for index in range(args.workers):
            group.manage(
                f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance",
                *worker_class, *(["--with-scheduler"] if index == 0 else []),
            )  # fmt: skip
        if args.transactional_worker:
            group.manage(
                "worker-txn", "rqworker", "transactional",
                "--worker-class", "whatsblast.rq.SimpleWorker",
            )  # fmt: skip
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)  # workers up before the clock starts
        campaign_start(campaign=campaign)
        time.sleep(args.warmup)
        group.check()
        fired = _fire(web, key, campaign.phone_number.phone_number_id, args)
        group.check()
        result = _report(sim, campaign, fired, args)
    finally:
        if campaign is not None:
            campaign_cancel(campaign=Campaign.objects.get(pk=campaign.pk), reason="bench done")
        group.stop()
    print(json.dumps(result, indent=2))


def _setup(run: str, args: argparse.Namespace, sim: str) -> tuple[Campaign, str]:
    pnid = f"bench-txn-{run}"
    account = BusinessAccount.objects.create(waba_id=pnid, messaging_limit_tier="TIER_UNLIMITED")
    number = PhoneNumber.objects.create(
        phone_number_id=pnid,
        display_phone_number="+15550009999",
        account=account,
        access_token=TOKEN,
        rate_per_second=args.rate,
        transactional_reserve=args.reserve,
        api_base_url=sim,
    )
    promo = Template.objects.create(
        account=account, name="bench_promo", language="en_US", body_param_count=1
    )
    Template.objects.create(account=account, name="otp", language="en_US", body_param_count=1)
    requests.post(
        f"{sim}/_sim/numbers",
        json={"phone_number_id": pnid, "access_token": TOKEN, "rate": args.rate},
        timeout=5,
    ).raise_for_status()
    for name in ("bench_promo", "otp"):
        requests.post(
            f"{sim}/_sim/templates",
            json={"name": name, "language": "en_US", "body_params": 1},
            timeout=5,
        ).raise_for_status()
    contact_list = ContactList.objects.create(name=f"bench-txn-{run}")
    first = Contact.objects.count()  # reruns get fresh people
    contacts = Contact.objects.bulk_create(
        (Contact(phone=f"+4930{first + i:010d}", name=f"B{i}") for i in range(args.recipients)),
        batch_size=5000,
    )
    ListMembership.objects.bulk_create(
        (ListMembership(contact_list=contact_list, contact=c) for c in contacts), batch_size=5000
    )
    campaign = Campaign.objects.create(
        name=f"bench-txn-{run}",
        phone_number=number,
        template=promo,
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([contact_list])
    _, key = api_key_create(name=f"bench-{run}", phone_number_ids=[pnid])
    return campaign, key


def _fire(web: str, key: str, pnid: str, args: argparse.Namespace) -> dict[str, Any]:
    """POST at a steady ``--tps``; returns start times per recipient and call durations."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    count = int(args.seconds * args.tps)
    started_at: dict[str, float] = {}
    call_s: list[float] = []
    refused: dict[str, int] = {}
    t0 = time.time()
    for n in range(count):
        due = t0 + n / args.tps
        time.sleep(max(0.0, due - time.time()))
        to = f"+5521{987_000_000 + n:09d}"
        started = time.time()
        response = session.post(
            f"{web}/api/v1/messages",
            json={
                "phone_number_id": pnid,
                "to": to,
                "template": {"name": "otp", "language": "en_US", "params": {"body": [str(n)]}},
            },
            headers={"Idempotency-Key": f"otp-{n}"},
            timeout=10,
        )
        call_s.append(time.time() - started)
        if response.status_code == 202:
            started_at[to] = started
        else:
            refused[str(response.status_code)] = refused.get(str(response.status_code), 0) + 1
    return {"started_at": started_at, "call_s": call_s, "refused": refused, "t0": t0}


def _records(sim: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        page = requests.get(
            f"{sim}/_sim/records", params={"after": after, "limit": 50_000}, timeout=30
        ).json()["records"]
        if not page:
            return rows
        rows.extend(page)
        after = page[-1]["seq"]


def _report(
    sim: str, campaign: Campaign, fired: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    started_at: dict[str, float] = fired["started_at"]
    deadline = time.time() + 15
    while True:
        records = _records(sim)
        received = {
            r["to"]: r["wall"]
            for r in records
            if r["to"] in started_at and r["outcome"].startswith("accepted")
        }
        if len(received) == len(started_at) or time.time() > deadline:
            break
        time.sleep(0.5)
    latencies = sorted(received[to] - started_at[to] for to in received)
    t_start, t_end = fired["t0"], fired["t0"] + args.seconds
    in_window = [r for r in records if t_start <= r["wall"] < t_end]
    campaign_sends = [
        r for r in in_window if r["to"] not in started_at and r["outcome"].startswith("accepted")
    ]
    per_second: dict[int, int] = {}
    for r in in_window:
        if r["outcome"].startswith("accepted"):
            per_second[int(r["wall"])] = per_second.get(int(r["wall"]), 0) + 1
    whole = [v for s, v in per_second.items() if int(t_start) < s < int(t_end)]
    share = args.rate * (1 - args.reserve)
    achieved = len(campaign_sends) / args.seconds
    throttled = sum(1 for r in records if r["outcome"] == "130429")
    return {
        "scenario": "transactional_latency",
        "seconds": args.seconds,
        "tps": args.tps,
        "workers": args.workers,
        "worker_class": args.worker_class or settings.RQ.get("WORKER_CLASS", "rq.Worker"),
        "transactional_worker": args.transactional_worker,
        "sim_latency_ms": args.latency_ms,
        "sent": len(started_at),
        "received": len(received),
        "lost": len(started_at) - len(received),
        "refused": fired["refused"],
        "latency_s": _percentiles(latencies),
        "p99_under_1s": bool(latencies) and _pct(latencies, 99) < 1.0,
        "api_call_s": _percentiles(sorted(fired["call_s"])),
        "campaign": {
            "share_per_s": share,
            "achieved_per_s": round(achieved, 2),
            "ratio": round(achieved / share, 3),
        },
        "number": {
            "rate": args.rate,
            "max_second": max(whole, default=0),
            "mean_per_s": round(statistics.fmean(whole), 2) if whole else 0,
            "throttled_130429": throttled,
        },
    }


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    # Nearest rank: the smallest value with at least p % of the values at or below it.
    index = min(len(values) - 1, max(0, math.ceil(p / 100 * len(values)) - 1))
    return values[index]


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": round(_pct(values, 50), 4),
        "p95": round(_pct(values, 95), 4),
        "p99": round(_pct(values, 99), 4),
        "max": round(values[-1], 4),
        "mean": round(statistics.fmean(values), 4),
    }


if __name__ == "__main__":
    main()
