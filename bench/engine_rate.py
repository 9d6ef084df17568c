"""Sustained send rate vs configured rate, per number, through the whole engine.

Starts the simulator (``--latency-ms``, default 250), ``--workers`` RQ workers and the
ticker as real processes, creates ``--numbers`` phone numbers at ``--rate`` msg/s each
(transactional reserve ``--reserve``, default 0 so the campaign may use the whole rate),
one campaign per number with ``rate x --seconds`` recipients, launches them, and reads the
simulator's per-second histogram of accepted sends. Steady state excludes the first and
last two seconds. Prints one JSON object:

    {"rate": 250, "numbers": 1, "achieved_per_number": [...], "accuracy": 0.99,
     "max_second": 251, "overshoot_seconds": 0, ...}

Uses the database and Redis from DATABASE_URL/REDIS_URL (or the embedded ones) and leaves
its rows behind under campaign names starting with "bench-rate".

    .venv/bin/python bench/engine_rate.py --rate 250 [--numbers 10] [--seconds 20] [--workers 3]
"""

from __future__ import annotations

import argparse
import json
import math
import time
import uuid

from harness import django_setup, process_env

django_setup()

import psutil  # noqa: E402
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
from delivery.campaigns.launch import campaign_start  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--numbers", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--reserve", type=float, default=0.0)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--workers", type=int, default=0, help="0: one per sender chain + 1")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)

    run = uuid.uuid4().hex[:8]
    share = args.rate * (1 - args.reserve)
    chains = max(1, math.ceil(share / settings.CAMPAIGN_SLOT_RATE)) * args.numbers
    workers = args.workers or chains + 1
    sim_port = free_port()
    sim = f"http://127.0.0.1:{sim_port}"
    group = ProcessGroup(
        settings.DATA_DIR / "bench-logs" / run,
        process_env(),
    )
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        campaigns = [_setup(run, index, args, sim) for index in range(args.numbers)]
        for index in range(workers):
            group.manage(f"worker-{index}", "rqworker", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)  # workers up before the clock starts
        started = time.time()
        for campaign in campaigns:
            campaign_start(campaign=campaign)
        peak_rss = _wait(campaigns, group, timeout=args.seconds * 4 + 60)
        elapsed = time.time() - started
        result = _report(sim, campaigns, args, share, elapsed, workers, peak_rss)
    finally:
        group.stop()
    print(json.dumps(result, indent=2))


def _setup(run: str, index: int, args: argparse.Namespace, sim: str) -> Campaign:
    pnid = f"bench-{run}-{index}"
    account = BusinessAccount.objects.create(
        waba_id=f"bench-{run}-{index}", messaging_limit_tier="TIER_UNLIMITED"
    )
    number = PhoneNumber.objects.create(
        phone_number_id=pnid,
        display_phone_number=f"+1555{index:07d}",
        account=account,
        access_token="bench-token",  # noqa: S106 - simulator token
        rate_per_second=args.rate,
        transactional_reserve=args.reserve,
        api_base_url=sim,
    )
    template = Template.objects.create(
        account=account, name="bench_promo", language="en_US", body_param_count=1
    )
    requests.post(
        f"{sim}/_sim/numbers",
        json={"phone_number_id": pnid, "access_token": "bench-token", "rate": args.rate},
        timeout=5,
    ).raise_for_status()
    requests.post(
        f"{sim}/_sim/templates",
        json={"name": "bench_promo", "language": "en_US", "body_params": 1},
        timeout=5,
    ).raise_for_status()
    recipients = int(args.rate * (1 - args.reserve) * args.seconds)
    contact_list = ContactList.objects.create(name=f"bench-rate-{run}-{index}")
    first = Contact.objects.count()  # reruns and other numbers get fresh people
    contacts = Contact.objects.bulk_create(
        (Contact(phone=f"+4930{first + i:010d}", name=f"B{i}") for i in range(recipients)),
        batch_size=5000,
    )
    ListMembership.objects.bulk_create(
        (ListMembership(contact_list=contact_list, contact=c) for c in contacts), batch_size=5000
    )
    campaign = Campaign.objects.create(
        name=f"bench-rate-{run}-{index}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([contact_list])
    return campaign


def _wait(campaigns: list[Campaign], group: ProcessGroup, *, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    peak = 0.0
    while time.monotonic() < deadline:
        group.check()
        for child in group.children:
            if child.name.startswith("worker"):
                try:
                    proc = psutil.Process(child.process.pid)
                    rss = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
                    peak = max(peak, rss / 2**20)
                except psutil.Error:
                    pass
        ids = [c.pk for c in campaigns]
        if Campaign.objects.filter(pk__in=ids, status="completed").count() == len(ids):
            return peak
        time.sleep(0.5)
    raise SystemExit("campaigns did not complete in time")


def _report(
    sim: str,
    campaigns: list[Campaign],
    args: argparse.Namespace,
    share: float,
    elapsed: float,
    workers: int,
    peak_rss: float,
) -> dict[str, object]:
    achieved: list[float] = []
    max_second = 0
    overshoot = 0
    for campaign in campaigns:
        pnid = campaign.phone_number.phone_number_id
        histogram = requests.get(
            f"{sim}/_sim/histogram", params={"phone_number_id": pnid}, timeout=10
        ).json()
        seconds = sorted((int(k), v) for k, v in histogram.items())
        steady = [v for _, v in seconds[2:-2]] or [v for _, v in seconds]
        achieved.append(sum(steady) / len(steady))
        max_second = max(max_second, *(v for _, v in seconds))
        overshoot += sum(1 for _, v in seconds if v > args.rate)
    duplicates = requests.get(f"{sim}/_sim/duplicates", timeout=10).json()
    return {
        "scenario": "engine_rate",
        "rate": args.rate,
        "campaign_share": share,
        "numbers": args.numbers,
        "latency_ms": args.latency_ms,
        "workers": workers,
        "recipients_per_number": int(share * args.seconds),
        "achieved_per_number": [round(a, 1) for a in achieved],
        "accuracy_min": round(min(achieved) / share, 4),
        "accuracy_mean": round(sum(achieved) / len(achieved) / share, 4),
        "max_second": max_second,
        "overshoot_seconds": overshoot,
        "duplicates": sum(len(v) for v in duplicates.values())
        if isinstance(duplicates, dict)
        else duplicates,
        "elapsed_s": round(elapsed, 1),
        "worker_peak_rss_mb": round(peak_rss, 1),
    }


if __name__ == "__main__":
    main()
