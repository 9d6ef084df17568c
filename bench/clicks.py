"""Clicks/s the tracked-link endpoint stores and redirects, against webhook POSTs/s, in one run.

One web process, started as deploy/ runs it (``gunicorn -c deploy/gunicorn.conf.py
whatsblast.asgi``, production settings: DEBUG off, the group commits), is loaded twice with
wrk at the same concurrency for the same time:

1. webhook POSTs: one delivered status per POST, each body distinct and signed as Meta
   signs (bench/webhook_ingest.py makes them), as bench/webhook_ingest.py measures;
2. clicks: ``GET /c/<token>`` from a phone's browser User-Agent, cycling over the tokens of
   ``--messages`` messages of one campaign (its destination names a contact field and adds
   UTM parameters, so every answer reads the campaign and the contact).

Each phase is warmed for ``--warmup`` seconds first (not counted). Then an exact check:
``--exact`` clicks, each awaited, so that the 302s seen and the rows stored can be compared
one for one (wrk's timed phase abandons a request per connection at its deadline, stored
but not counted by it). Prints one JSON object: both rates, clicks over POSTs, the clicks'
latency p50/p90/p99/max (wrk's, over every request), the 302s answered against the click
rows stored (equal in the exact check, or the run fails), statuses, errors, wall-clock
times. The run's campaign, contacts, messages, clicks and events are deleted afterwards.
Needs wrk (Debian's package).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/clicks.py \\
        [--seconds 10] [--connections 48] [--workers 3] [--messages 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import wrk_replay as replay
from harness import django_setup
from webhook_ingest import PATH as WEBHOOK_PATH
from webhook_ingest import ROOT, prepare, server_env

# The web process's SECRET_KEY (webhook_ingest.server_env): the tokens are made with it.
SECRET_KEY = "bench-only-secret-key-" + "x" * 40
BROWSER = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0.0.0 Mobile Safari/537.36"
)
# wrk_replay's script builds a signed POST from each line "<signature> <body>"; for clicks
# each line is "- /c/<token>" and the request a GET of that path with a browser's UA. The
# rest of the script (pacing, counting statuses, the RESULT line) is the same.
_POST_LINE = 'requests[#requests + 1] = wrk.format("POST", "__PATH__", headers, body)'
_GET_LINE = f'requests[#requests + 1] = wrk.format("GET", body, {{["User-Agent"] = "{BROWSER}"}})'


def wrk_phase(url: str, path: str, requests_file: Path, args: argparse.Namespace, *,
              seconds: int, gets: bool = False) -> dict[str, Any]:  # fmt: skip
    """One wrk phase at the run's concurrency; answers counted by status in both phases,
    so the client's cost per request is the same for POSTs and GETs."""
    script = replay._SCRIPT
    if gets:
        if _POST_LINE not in script:
            raise RuntimeError("bench/wrk_replay.py's script changed: update bench/clicks.py")
        replay._SCRIPT = script.replace(_POST_LINE, _GET_LINE)
    try:
        return replay.wrk_replay(
            url, path, requests_file, connections=args.connections, seconds=seconds,
            processes=args.wrk_processes, count_statuses=True,
        )  # fmt: skip
    finally:
        replay._SCRIPT = script


def campaign_create(run: str, messages: int) -> Any:
    """A campaign with a tracked link and ``messages`` messages, each to its own contact."""
    from campaigns.models import BusinessAccount, Campaign, Contact, PhoneNumber, Template
    from delivery.models import Message

    account = BusinessAccount.objects.create(waba_id=f"bench-clicks-{run}")
    number = PhoneNumber.objects.create(
        phone_number_id=f"bench-clicks-{run}",
        display_phone_number="+15550002000",
        account=account,
        access_token="bench-token",  # noqa: S106 - never used
    )
    template = Template.objects.create(
        account=account, name="bench_clicks", language="en_US", body_param_count=1
    )
    campaign = Campaign.objects.create(
        name=f"Bench clicks {run}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
        link_destination="https://shop.example.com/sale/{{city}}?who={{name}}",
        link_utm=True,
    )
    first = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        (
            Contact(phone=f"+4931{first + i:010d}", name=f"C{i}", attributes={"city": "Berlin"})
            for i in range(messages)
        ),
        batch_size=5000,
    )
    from django.utils import timezone

    now = timezone.now()
    Message.objects.bulk_create(
        (
            Message(
                campaign=campaign,
                contact=c,
                phone_number=number,
                template=template,
                to=c.phone or "",
                status="sent",
                next_attempt_at=now,
                variant=i % 2,
            )  # fmt: skip
            for i, c in enumerate(contacts)
        ),
        batch_size=5000,
    )
    return campaign


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--connections", type=int, default=48)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--wrk-processes", type=int, default=1)
    parser.add_argument("--max-pending", type=int, default=500)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--exact", type=int, default=3000, help="clicks of the exact check")
    args = parser.parse_args()
    args.group_commit = True
    if shutil.which("wrk") is None:
        raise SystemExit("bench/clicks.py needs wrk: apt-get install wrk")
    os.environ["SECRET_KEY"] = SECRET_KEY
    django_setup()
    from django.db import connection

    from campaigns.models import BusinessAccount, Contact, PhoneNumber, Template
    from delivery.models import Click
    from webhooks.models import WebhookEvent
    from whatsblast.core.click_tokens import click_token
    from whatsblast.core.processes import free_port, wait_for_http

    run_started = time.monotonic()
    run = str(int(time.time()))
    with connection.cursor() as cursor:
        for table in ("webhooks_webhookevent", "delivery_click", "delivery_message"):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    first_contact = Contact.objects.order_by("-id").values_list("id", flat=True).first() or 0
    campaign = campaign_create(run, args.messages)
    with connection.cursor() as cursor:  # as autovacuum would have, for the new rows
        for table in ("delivery_message", "campaigns_contact", "campaigns_campaign"):
            cursor.execute(f"ANALYZE {table}")
    directory = Path(tempfile.mkdtemp(prefix="wb-clicks-"))
    posts_file, warm_posts_file = directory / "posts.txt", directory / "warm-posts.txt"
    # Enough distinct bodies that none repeats (a repeat is a duplicate, stored once), and
    # the warm-up's numbered apart from the measured phase's.
    measured = max(50_000, 15_000 * args.seconds)
    prepare(posts_file, measured)
    prepare(warm_posts_file, max(10_000, 15_000 * args.warmup), first=measured)
    clicks_file = directory / "clicks.txt"
    ids = list(campaign.messages.order_by("id").values_list("id", flat=True))
    clicks_file.write_text("".join(f"- /c/{click_token(i)}\n" for i in ids))
    prepared_s = time.monotonic() - run_started

    port = free_port()
    env = {**server_env(args, port), "CLICK_FALLBACK_URL": "https://fallback.example.org/"}
    web = subprocess.Popen(  # noqa: S603 - our own web process
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
        ],
        cwd=ROOT, env=env, stderr=(directory / "web.log").open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/healthz")
        phases: dict[str, Any] = {}
        for name, path, requests_file, warm_file, gets in (
            ("webhook_posts", WEBHOOK_PATH, posts_file, warm_posts_file, False),
            ("clicks", "/c/", clicks_file, clicks_file, True),
        ):
            started = time.monotonic()
            if args.warmup:
                wrk_phase(url, path, warm_file, args, seconds=args.warmup, gets=gets)
            time.sleep(0.5)  # the warm-up's last commits
            rows_before = (
                Click.objects.filter(campaign=campaign).count()
                if gets
                else WebhookEvent.objects.filter(id__gt=first_event).count()
            )
            result = wrk_phase(url, path, requests_file, args, seconds=args.seconds, gets=gets)
            time.sleep(0.5)
            rows_after = (
                Click.objects.filter(campaign=campaign).count()
                if gets
                else WebhookEvent.objects.filter(id__gt=first_event).count()
            )
            result["rows_stored"] = rows_after - rows_before
            result["wall_s"] = round(time.monotonic() - started, 2)
            phases[name] = result
        check = requests_check(url, click_token(ids[0]))
        before = Click.objects.filter(campaign=campaign).count()
        exact_started = time.monotonic()
        exact = asyncio.run(
            clicks_exact(url, [click_token(i) for i in ids[: args.exact]], args.connections)
        )
        exact["rows_stored"] = Click.objects.filter(campaign=campaign).count() - before
        exact["wall_s"] = round(time.monotonic() - exact_started, 2)
    finally:
        web.terminate()
        web.wait(timeout=30)
        cleanup_started = time.monotonic()
        WebhookEvent.objects.filter(id__gt=first_event).delete()
        account = campaign.phone_number.account
        campaign.delete()  # its messages and clicks with it
        Contact.objects.filter(id__gt=first_contact).delete()
        for model in (Template, PhoneNumber, BusinessAccount):  # protected: leaves first
            field = "id" if model is BusinessAccount else "account_id"
            model.objects.filter(**{field: account.id}).delete()
        shutil.rmtree(directory, ignore_errors=True)
    posts, clicks = phases["webhook_posts"], phases["clicks"]
    answered_302 = clicks["statuses"].get("302", 0)
    posts_rate = posts["statuses"].get("200", 0) / posts["seconds"]
    clicks_rate = answered_302 / clicks["seconds"]
    report = {
        "scenario": "clicks_vs_webhooks",
        "workers": args.workers,
        "connections": args.connections,
        "seconds": args.seconds,
        "messages": args.messages,
        "webhook_posts_per_s": round(posts_rate),
        "clicks_per_s": round(clicks_rate),
        "clicks_over_posts": round(clicks_rate / posts_rate, 2) if posts_rate else None,
        "click_latency_ms": {k: clicks[k] for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")},
        "webhook_latency_ms": {k: posts[k] for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")},
        "clicks_answered_302": answered_302,
        "click_rows_stored": clicks["rows_stored"],
        # wrk stops at its deadline with a request in flight on each connection: the server
        # stores and answers those, wrk no longer counts them. So the timed phase may store
        # up to `connections` more rows than it saw 302s, never fewer.
        "clicks_abandoned_by_wrk_at_stop": clicks["rows_stored"] - answered_302,
        "exact_check": exact,
        "webhook_answered_200": posts["statuses"].get("200", 0),
        "webhook_rows_stored": posts["rows_stored"],
        "click_statuses": clicks["statuses"],
        "webhook_statuses": posts["statuses"],
        "click_errors": clicks["errors"],
        "webhook_errors": posts["errors"],
        "sample_redirect": check,
        "wall_clock_s": {
            "prepare": round(prepared_s, 2),
            "webhook_phase": posts["wall_s"],
            "click_phase": clicks["wall_s"],
            "cleanup": round(time.monotonic() - cleanup_started, 2),
            "total": round(time.monotonic() - run_started, 2),
        },
    }
    print(json.dumps(report))
    if not 0 <= clicks["rows_stored"] - answered_302 <= args.connections:
        raise SystemExit("a 302 was answered for a click that is not stored")
    if exact["answered_302"] != exact["rows_stored"] or exact["answered_302"] != exact["sent"]:
        raise SystemExit("clicks answered 302 and click rows stored differ")


async def clicks_exact(url: str, tokens: list[str], connections: int) -> dict[str, Any]:
    """Each of ``tokens`` clicked once, ``connections`` at a time, every answer awaited: a
    run of fixed size, so the 302s seen can be compared with the rows stored exactly."""
    import aiohttp

    statuses: dict[str, int] = {}
    pending = iter(tokens)

    async def worker(session: aiohttp.ClientSession) -> None:
        for token in pending:
            async with session.get(
                f"{url}/c/{token}", headers={"User-Agent": BROWSER}, allow_redirects=False
            ) as answer:
                await answer.read()
                statuses[str(answer.status)] = statuses.get(str(answer.status), 0) + 1

    limit = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=limit) as session:
        await asyncio.gather(*(worker(session) for _ in range(connections)))
    return {"sent": len(tokens), "answered_302": statuses.get("302", 0), "statuses": statuses}


def requests_check(url: str, token: str) -> str:
    """One click's Location, to show what the load was redirected to."""
    import requests

    answer = requests.get(
        f"{url}/c/{token}", headers={"User-Agent": BROWSER}, allow_redirects=False, timeout=10
    )
    return f"{answer.status_code} {answer.headers.get('Location')}"


if __name__ == "__main__":
    sys.exit(main())
