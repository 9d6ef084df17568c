"""Conversions/s through the real API: ``POST /api/v1/conversions`` over HTTP.

Starts the web process as a real process (gunicorn, ``--web-workers`` ASGI workers, DEBUG
off), creates ``--contacts`` contacts each with a delivered message of one campaign (a
tenth of them its holdout rows instead), then posts ``--conversions`` conversions for them
in batches of ``--batch`` from ``--concurrency`` client threads, each item with its own id.
Every conversion has a message (or holdout row) to be attributed to, so every batch runs
the attribution. Prints one JSON object: conversions/s, wall-clock, batch latency (p50,
p95, worst), stored == posted (from the answers and from the table), attributed and
holdout counts. The run's campaign, contacts, messages and conversions are deleted after.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/conversions.py \\
        [--conversions 100000] [--batch 1000] [--contacts 20000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from harness import django_setup, process_env

django_setup()

import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    Contact,
    PhoneNumber,
    Template,
)
from delivery.api.keys import api_key_create  # noqa: E402
from delivery.campaigns.skips import HOLDOUT  # noqa: E402
from delivery.models import ApiKey, Conversion, Message  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402

PHONE_PREFIX = "+5511987"  # São Paulo mobiles: +55 11 987xx-xxxx, valid numbers


def _setup(run: str, contacts: int) -> tuple[Campaign, list[str]]:
    account = BusinessAccount.objects.create(waba_id=f"bench-conv-{run}")
    number = PhoneNumber.objects.create(
        phone_number_id=f"bench-conv-{run}",
        display_phone_number="+15550003000",
        account=account,
        access_token="bench-token",  # noqa: S106 - never used
    )
    template = Template.objects.create(
        account=account, name="bench_conv", language="en_US", body_param_count=1
    )
    campaign = Campaign.objects.create(
        name=f"Bench conversions {run}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
        holdout_percent=10,
        attribution_days=7,
    )
    Contact.objects.filter(phone__startswith=PHONE_PREFIX).delete()  # an earlier run's
    phones = [f"{PHONE_PREFIX}{i:06d}" for i in range(contacts)]
    created = Contact.objects.bulk_create((Contact(phone=p) for p in phones), batch_size=5000)
    now = timezone.now()
    day_ago = now - timedelta(days=1)
    Message.objects.bulk_create(
        (
            Message(
                campaign=campaign,
                contact=c,
                phone_number=number,
                template=template,
                to=c.phone or "",
                next_attempt_at=now,
                **(
                    {"status": "skipped", "skip_reason": HOLDOUT}
                    if i % 10 == 0
                    else {"status": "delivered", "sent_at": day_ago, "delivered_at": day_ago}
                ),
            )
            for i, c in enumerate(created)
        ),
        batch_size=5000,
    )
    # As autovacuum would have: every table the attribution statement reads. Left with the
    # dead rows a previous bench deleted (the click bench leaves ~600,000) and stale
    # statistics, the same run measured 4,195 conversions/s instead of 34,483.
    with connection.cursor() as cursor:
        for table in (
            "campaigns_contact",
            "delivery_message",
            "delivery_conversion",
            "delivery_click",
        ):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
    return campaign, phones


def _batches(run: str, phones: list[str], total: int, size: int) -> list[bytes]:
    # After the launch (the rows' created_at, set by bulk_create), so that the holdout
    # rows' window (from their created_at) holds the conversions too.
    occurred = timezone.now().isoformat()
    bodies = []
    for start in range(0, total, size):
        items = [
            {
                "id": f"{run}-{i}",
                "phone": phones[i % len(phones)],
                "event": "purchase",
                "value": f"{10 + i % 90}.90",
                "currency": "BRL",
                "occurred_at": occurred,
            }
            for i in range(start, min(total, start + size))
        ]
        bodies.append(json.dumps({"conversions": items}).encode())
    return bodies


def _post_all(url: str, key: str, bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    # A connection per batch: gunicorn's asgi worker sometimes closes a kept-alive
    # connection just as the client reuses it (RemoteDisconnected on ~1 batch in 12 in a
    # trial), and a connect costs well under a millisecond against ~50 ms a batch.
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Connection": "close",
    }

    def post(body: bytes) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        response = requests.post(url, data=body, headers=headers, timeout=120)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        return elapsed, response.json()

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(post, bodies))
    wall = time.perf_counter() - started
    latencies = sorted(a[0] for a in answers)
    sums = {
        k: sum(a[1][k] for a in answers)
        for k in ("received", "stored", "duplicates", "rejected", "attributed", "holdout")
    }
    return {
        "wall_s": round(wall, 3),
        "batch_latency_s": {
            "p50": round(statistics.median(latencies), 4),
            "p95": round(latencies[int(0.95 * (len(latencies) - 1))], 4),
            "worst": round(latencies[-1], 4),
        },
        **sums,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--contacts", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=2)
    args = parser.parse_args()
    if args.batch > settings.CONVERSIONS_MAX_BATCH:
        raise SystemExit(
            f"--batch is over CONVERSIONS_MAX_BATCH ({settings.CONVERSIONS_MAX_BATCH})"
        )
    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    port = free_port()
    web = f"http://127.0.0.1:{port}"
    group = ProcessGroup(
        settings.DATA_DIR / "bench-logs" / f"conv-{run}",
        process_env(DEBUG="0", ALLOWED_HOSTS="127.0.0.1,localhost"),
    )
    campaign: Campaign | None = None
    api_key: ApiKey | None = None
    try:
        group.start(
            "web",
            [
                "-m", "gunicorn", "whatsblast.asgi", "--worker-class", "asgi",
                "--bind", f"127.0.0.1:{port}", "--workers", str(args.web_workers),
            ],
        )  # fmt: skip
        setup_started = time.perf_counter()
        campaign, phones = _setup(run, args.contacts)
        api_key, key = api_key_create(name=f"bench-conv-{run}", all_numbers=True,
                                      requests_per_second=100_000)  # fmt: skip
        bodies = _batches(run, phones, args.conversions, args.batch)
        setup_s = time.perf_counter() - setup_started
        wait_for_http(f"{web}/healthz")
        posted = _post_all(f"{web}/api/v1/conversions", key, bodies, args.concurrency)
        group.check()
        in_table = Conversion.objects.filter(dedupe_key__startswith=f"api:{api_key.pk}:id:{run}-")
        stored_rows = in_table.count()
        attributed_rows = in_table.filter(campaign=campaign).count()
        result = {
            "conversions": args.conversions,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "web_workers": args.web_workers,
            "contacts": args.contacts,
            "conversions_per_s": round(args.conversions / posted["wall_s"], 1),
            **posted,
            "stored_rows": stored_rows,
            "stored_equals_posted": stored_rows == posted["stored"] == args.conversions,
            "attributed_to_campaign_rows": attributed_rows,
            "setup_s": round(setup_s, 1),
        }
    finally:
        if api_key is not None:
            Conversion.objects.filter(dedupe_key__startswith=f"api:{api_key.pk}:").delete()
        if campaign is not None:
            Message.objects.filter(campaign=campaign).delete()
            Contact.objects.filter(phone__startswith=PHONE_PREFIX).delete()
            account = campaign.phone_number.account
            campaign.delete()
            PhoneNumber.objects.filter(account=account).delete()
            Template.objects.filter(account=account).delete()
            account.delete()
        group.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
