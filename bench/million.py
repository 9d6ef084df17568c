"""A campaign of a million recipients: launch time, then memory over the whole send.

Creates ``--recipients`` contacts in one set-based statement, launches a campaign to them
(timed: the one INSERT … SELECT that renders every recipient's params), then sends it at
``--rate`` msg/s through the simulator with real workers, sampling every few seconds the
workers' RSS (work horses included) and Redis's used memory. Flat memory means neither
grows with the audience: the engine holds a few hundred rows at a time, whatever the
campaign's size. Prints one JSON object.

    .venv/bin/python bench/million.py [--recipients 1000000] [--rate 1000] [--launch-only]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from harness import django_setup, process_env

django_setup()

import psutil  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    ContactList,
    PhoneNumber,
    Template,
)
from delivery.campaigns.launch import campaign_start  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402
from whatsblast.core.redis import get_redis  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipients", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--launch-only", action="store_true")
    parser.add_argument("--sample-every", type=float, default=5.0)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    sim_port = free_port()
    sim = f"http://127.0.0.1:{sim_port}"
    campaign, contacts_s = _setup(run, args, sim)

    started = time.perf_counter()
    summary = campaign_start(campaign=campaign)
    launch_s = time.perf_counter() - started
    result: dict[str, object] = {
        "scenario": "million",
        "recipients": summary.recipients,
        "contacts_insert_s": round(contacts_s, 1),
        "launch_s": round(launch_s, 1),
        "launch_rows_per_s": round(summary.recipients / launch_s),
    }
    if args.launch_only:
        print(json.dumps(result, indent=2))
        return

    group = ProcessGroup(
        settings.DATA_DIR / "bench-logs" / run,
        process_env(),
    )
    samples: list[dict[str, float]] = []
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
            "--number", f"{campaign.phone_number.phone_number_id}:bench-token:{args.rate}",
            "--template", "bench_promo:en_US:1",
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        for index in range(args.workers):
            group.manage(f"worker-{index}", "rqworker", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        send_started = time.time()
        while True:
            group.check()
            samples.append(_sample(group, send_started))
            campaign.refresh_from_db()
            if campaign.status == "completed":
                break
            time.sleep(args.sample_every)
        elapsed = time.time() - send_started
        stats = requests.get(f"{sim}/_sim/stats", timeout=30).json()
    finally:
        group.stop()
    rss = [s["workers_rss_mb"] for s in samples]
    redis_mb = [s["redis_mb"] for s in samples]
    third = max(1, len(samples) // 3)
    result.update(
        {
            "rate": args.rate,
            "send_s": round(elapsed, 1),
            "achieved_rate": round(stats["accepted"] / elapsed, 1),
            "accepted": stats["accepted"],
            "workers": args.workers,
            "workers_rss_mb": {
                "first_third_max": max(rss[:third]),
                "last_third_max": max(rss[-third:]),
                "max": max(rss),
            },
            "redis_used_mb": {
                "first_third_max": max(redis_mb[:third]),
                "last_third_max": max(redis_mb[-third:]),
                "max": max(redis_mb),
            },
            "samples": len(samples),
        }
    )
    print(json.dumps(result, indent=2))


def _setup(run: str, args: argparse.Namespace, sim: str) -> tuple[Campaign, float]:
    account = BusinessAccount.objects.create(
        waba_id=f"million-{run}", messaging_limit_tier="TIER_UNLIMITED"
    )
    number = PhoneNumber.objects.create(
        phone_number_id=f"million-{run}",
        display_phone_number="+15550000000",
        account=account,
        access_token="bench-token",  # noqa: S106 - simulator token
        rate_per_second=args.rate,
        transactional_reserve=0.0,
        api_base_url=sim,
    )
    template = Template.objects.create(
        account=account, name="bench_promo", language="en_US", body_param_count=1
    )
    contact_list = ContactList.objects.create(name=f"million-{run}")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM campaigns_contact")
        offset = cursor.fetchone()[0]
        # Set-based: a million contacts and memberships in two statements.
        cursor.execute(
            """
            INSERT INTO campaigns_contact (phone, name, attributes, created_at, updated_at)
            SELECT '+4917' || lpad((%(offset)s + g)::text, 10, '0'), 'M' || g, '{}', now(), now()
              FROM generate_series(1, %(n)s) AS g
            ON CONFLICT (phone) DO NOTHING
            """,
            {"offset": offset, "n": args.recipients},
        )
        cursor.execute(
            """
            INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
            SELECT %(list)s, id, now() FROM campaigns_contact WHERE id > %(offset)s
            ON CONFLICT DO NOTHING
            """,
            {"list": contact_list.pk, "offset": offset},
        )
    contacts_s = time.perf_counter() - started
    campaign = Campaign.objects.create(
        name=f"million-{run}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([contact_list])
    return campaign, contacts_s


def _sample(group: ProcessGroup, started: float) -> dict[str, float]:
    rss = 0.0
    for child in group.children:
        if child.name.startswith("worker"):
            try:
                proc = psutil.Process(child.process.pid)
                rss += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
            except psutil.Error:
                pass
    info = get_redis().info("memory")
    return {
        "t": round(time.time() - started, 1),
        "workers_rss_mb": round(rss / 2**20, 1),
        "redis_mb": round(info["used_memory"] / 2**20, 2),
    }


if __name__ == "__main__":
    main()
