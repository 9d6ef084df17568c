"""Clicks/s the tracked-link endpoint stores and redirects, against webhook POSTs/s, in one run.

One web process, started as deploy/ runs it (``gunicorn -c deploy/gunicorn.conf.py
whatsblast.asgi``, production settings: DEBUG off, the group commits, the same admission
limit for both), is loaded with wrk, alternately with:

- webhook POSTs: one delivered status per POST, each body distinct and signed as Meta
  signs (bench/webhook_ingest.py makes them), as bench/webhook_ingest.py measures;
- clicks: ``GET /c/<token>`` from a phone's browser User-Agent, cycling over the tokens of
  ``--messages`` messages of one campaign (its destination names a contact field and adds
  UTM parameters, so every answer reads the campaign and the contact).

Both kinds get the same phases: ``--rounds`` rounds of one phase each, in the order A B,
B A, A B, ... (so neither always runs first, on a warmer or a more loaded machine), each
phase ``--seconds`` long at ``--connections``, warmed for ``--warmup`` seconds first (not
counted), against the same server. Then an exact check: ``--exact`` clicks, each awaited,
so that the 302s seen and the rows stored can be compared one for one (wrk's timed phase
abandons a request per connection at its deadline, stored but not counted by it).

Prints one JSON object: each kind's rate over all its phases (answers / seconds) and per
round, clicks over POSTs (overall and per round), each kind's worst latency over its phases
(wrk's p50/p90/p99/max, over every request), the answers against the rows stored, statuses
and errors, the issue's targets (clicks >= POSTs, click p99 < 50 ms, every answered click
stored), the machine (CPUs, load average before and after: the box is shared) and the
wall-clock time of every step. Fails if a 302 was answered for a click not stored. The
run's campaign, contacts, messages, clicks and events are deleted afterwards. Needs wrk
(Debian's package).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/clicks.py \\
        [--rounds 2] [--seconds 10] [--connections 48] [--workers 3] [--messages 10000]
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
    parser.add_argument("--rounds", type=int, default=2, help="phases of each kind")
    parser.add_argument("--seconds", type=int, default=10, help="length of every phase")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--connections", type=int, default=48)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--wrk-processes", type=int, default=1)
    parser.add_argument("--max-pending", type=int, default=500, help="both admission limits")
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
    load_before = os.getloadavg()
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
    # Every POST phase and its warm-up get bodies of their own, numbered apart: wrk starts
    # each run at the top of its file, and a body sent again is a duplicate, stored once.
    measured = max(50_000, 15_000 * args.seconds)
    warm = max(10_000, 15_000 * args.warmup)
    post_files = []
    for index in range(args.rounds):
        posts_file, warm_file = directory / f"posts-{index}.txt", directory / f"warm-{index}.txt"
        prepare(posts_file, measured, first=index * (measured + warm))
        prepare(warm_file, warm, first=index * (measured + warm) + measured)
        post_files.append((posts_file, warm_file))
    clicks_file = directory / "clicks.txt"
    ids = list(campaign.messages.order_by("id").values_list("id", flat=True))
    clicks_file.write_text("".join(f"- /c/{click_token(i)}\n" for i in ids))
    prepared_s = time.monotonic() - run_started

    def click_rows() -> int:
        return Click.objects.filter(campaign=campaign).count()

    def event_rows() -> int:
        return WebhookEvent.objects.filter(id__gt=first_event).count()

    port = free_port()
    env = {
        **server_env(args, port),
        "CLICK_FALLBACK_URL": "https://fallback.example.org/",
        "CLICK_MAX_PENDING": str(args.max_pending),  # as WEBHOOK_MAX_PENDING
    }
    web = subprocess.Popen(  # noqa: S603 - our own web process
        [
            str(ROOT / ".venv" / "bin" / "gunicorn"),
            "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
        ],
        cwd=ROOT, env=env, stderr=(directory / "web.log").open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    phases: dict[str, list[dict[str, Any]]] = {"webhook_posts": [], "clicks": []}
    try:
        wait_for_http(f"{url}/healthz")
        for index in range(args.rounds):
            posts_file, warm_file = post_files[index]
            kinds = [
                ("webhook_posts", WEBHOOK_PATH, posts_file, warm_file, False, event_rows),
                ("clicks", "/c/", clicks_file, clicks_file, True, click_rows),
            ]
            order = kinds if index % 2 == 0 else kinds[::-1]  # A B, then B A, ...
            for name, path, requests_file, warm_up_file, gets, rows in order:
                started = time.monotonic()
                if args.warmup:
                    wrk_phase(url, path, warm_up_file, args, seconds=args.warmup, gets=gets)
                time.sleep(0.5)  # the warm-up's last commits
                rows_before = rows()
                result = wrk_phase(url, path, requests_file, args, seconds=args.seconds, gets=gets)
                time.sleep(0.5)
                result["rows_stored"] = rows() - rows_before
                result["round"] = index
                result["wall_s"] = round(time.monotonic() - started, 2)
                phases[name].append(result)
        check = requests_check(url, click_token(ids[0]))
        before = click_rows()
        exact_started = time.monotonic()
        exact = asyncio.run(
            clicks_exact(url, [click_token(i) for i in ids[: args.exact]], args.connections)
        )
        exact["rows_stored"] = click_rows() - before
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
    posts = summary(phases["webhook_posts"], "200", args.connections)
    clicks = summary(phases["clicks"], "302", args.connections)
    ratio = clicks["per_s"] / posts["per_s"] if posts["per_s"] else 0.0
    stored_ok = clicks["stored_matches_answers"] and (
        exact["answered_302"] == exact["rows_stored"] == exact["sent"]
    )
    report = {
        "scenario": "clicks_vs_webhooks",
        "workers": args.workers,
        "connections": args.connections,
        "rounds": args.rounds,
        "seconds_per_phase": args.seconds,
        "messages": args.messages,
        "webhook_posts_per_s": round(posts["per_s"]),
        "clicks_per_s": round(clicks["per_s"]),
        "clicks_over_posts": round(ratio, 2),
        "clicks_over_posts_by_round": [
            round(c / p, 2) if p else None
            for c, p in zip(clicks["per_s_by_round"], posts["per_s_by_round"], strict=True)
        ],
        "click_latency_ms": clicks["latency_ms"],
        "webhook_latency_ms": posts["latency_ms"],
        "targets": {
            "clicks_at_least_posts": ratio >= 1.0,
            "click_p99_under_50_ms": clicks["latency_ms"]["p99_ms"] < 50,
            "every_answered_click_stored": stored_ok,
        },
        "clicks": clicks,
        "webhook_posts": posts,
        "exact_check": exact,
        "sample_redirect": check,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "wall_clock_s": {
            "prepare": round(prepared_s, 2),
            "webhook_phases": [p["wall_s"] for p in phases["webhook_posts"]],
            "click_phases": [p["wall_s"] for p in phases["clicks"]],
            "exact_check": exact["wall_s"],
            "cleanup": round(time.monotonic() - cleanup_started, 2),
            "total": round(time.monotonic() - run_started, 2),
        },
    }
    print(json.dumps(report))
    if not clicks["stored_matches_answers"]:
        raise SystemExit("a 302 was answered for a click that is not stored")
    if exact["answered_302"] != exact["rows_stored"] or exact["answered_302"] != exact["sent"]:
        raise SystemExit("clicks answered 302 and click rows stored differ")


def summary(runs: list[dict[str, Any]], ok: str, connections: int) -> dict[str, Any]:
    """One kind's phases together: its rate over all of them, per round, the worst latency
    of any phase, answers against rows stored."""
    answered = [run["statuses"].get(ok, 0) for run in runs]
    seconds = sum(run["seconds"] for run in runs)
    stored = [run["rows_stored"] for run in runs]
    return {
        "per_s": round(sum(answered) / seconds, 1) if seconds else 0.0,
        "per_s_by_round": [
            round(n / run["seconds"]) if run["seconds"] else 0
            for n, run in zip(answered, runs, strict=True)
        ],
        "latency_ms": {
            key: max(run[key] for run in runs) for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms")
        },
        "latency_ms_by_round": [
            {key: run[key] for key in ("p50_ms", "p90_ms", "p99_ms", "max_ms")} for run in runs
        ],
        "answered": sum(answered),
        "rows_stored": sum(stored),
        # wrk stops at its deadline with a request in flight on each connection: the server
        # stores and answers those, wrk no longer counts them. So a phase may store up to
        # `connections` more rows than it saw answers, never fewer.
        "stored_matches_answers": all(
            0 <= rows - n <= connections for rows, n in zip(stored, answered, strict=True)
        ),
        "abandoned_by_wrk_at_stop": [rows - n for rows, n in zip(stored, answered, strict=True)],
        "seconds": round(seconds, 2),
        "statuses": [run["statuses"] for run in runs],
        "errors": [run["errors"] for run in runs],
        "wrapped": sum(run["wrapped"] for run in runs),
    }


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
