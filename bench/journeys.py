"""Journeys: the sweep's cost per due row, 100,000 waits due at once beside transactional
sends, and events in through the batch API beside a campaign's sends.

1. **The sweep** (``--sweep-rows`` N, default 100,000; in this process): N instances of a
   live journey due at once at a send step (inserted in one statement, as a wait's end
   leaves them), swept by ``journeys.sweep.journeys_sweep`` in its batches: each one a
   message of the step's campaign, the instance's new place and its history, in one
   transaction. Reported: wall time, rows/s, and CPU per 1,000 due rows (this process and
   its PostgreSQL backend); the same for instances at a wait that ends and then send (two
   steps a row). The sweep's pacing is off here (JOURNEYS_SEND_AHEAD_SECONDS=0): every row
   is swept at once, to measure what a row costs.

2. **Due at once** (``--due`` N, default 100,000): the processes as deployed (the simulator
   at ``--latency-ms``, gunicorn, ``--workers`` RQ workers, the ticker), one number at
   ``--rate`` msg/s with a transactional reserve of ``--reserve``. Three runs, in this
   order, each ``--seconds`` long: (a) transactional sends alone; (b) beside a plain campaign
   of N recipients launched at the start; (c) beside N journey instances due at once (the
   ticker's pass sweeps them, its job goes on with the rest). Transactional sends are POSTed
   to /api/v1/messages at ``--tps``; each one's latency runs from its API call to the
   simulator's receipt (one host, one clock). Reported per run: the latency's p50/p99/max,
   the campaign traffic's rate over the window against the number's campaign share, and
   for (c) how long the sweep took to make every message (none within the window: the
   sweep keeps JOURNEYS_SEND_AHEAD_SECONDS of the number's rate ahead, so 100,000 at
   160/s take ten minutes, as the number does). Targets: (c)'s rate ≥ 0.97 × the share,
   (c)'s p99 ≤ 1.2 × (b)'s.

3. **Events in** (``--pairs`` P, default 2): a campaign of ``--recipients`` on ``--numbers``
   numbers at ``--send-rate`` msg/s each (the numbers' rate is the bound, as in
   production), alone ("off") and beside events POSTed to /api/v1/events ("on") in
   batches of 1,000 by ``--posters`` threads of this process, as fast as the API takes
   them, for a live cart journey (each event an entry: an instance that waits). Reported
   per run: the send rate (recipients over launch → last accepted send), events accepted
   a second, and how long after the last POST the last event was routed. Targets: events
   ≥ 5,000/s, send rate on ≥ 0.97 × off (each pair, and the median).

Prints one JSON object with the machine's speed (a 20-million-step loop) before and after.
Run it against a scratch database and Redis database: it empties the RQ queues and leaves
its rows behind under names starting with "bench-jr".

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/journeys.py \\
        [--skip-sweep] [--skip-due] [--skip-events] [--due 100000] [--rate 200]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
import uuid
from typing import Any

from harness import ROOT, bench_audience, django_setup, hot_tables_vacuum, process_env

django_setup()

import django_rq  # noqa: E402
import psutil  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    CampaignStatus,
    ContactList,
    PhoneNumber,
    Template,
)
from delivery.api.keys import api_key_create  # noqa: E402
from delivery.campaigns.launch import campaign_start  # noqa: E402
from delivery.campaigns.lifecycle import campaign_cancel  # noqa: E402
from delivery.models import ApiScope, Message  # noqa: E402
from journeys.models import ContactEvent, Journey, JourneyInstance  # noqa: E402
from journeys.sweep import journeys_sweep  # noqa: E402
from journeys.versions import journey_archive, journey_create, journey_go_live  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402

PREFIX = "bench-jr"
TOKEN = "bench-token"  # noqa: S105 - the simulator's token
EVENTS_TARGET = 5000
RATIO_TARGET = 0.97
P99_RATIO_TARGET = 1.2
BATCH = 1000


def machine_loop_s() -> float:
    started = time.perf_counter()
    x = 0
    for i in range(20_000_000):
        x += i
    return round(time.perf_counter() - started, 2)


def backend_cpu() -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = int(cursor.fetchone()[0])
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]

    return {
        "p50": round(pct(50), 4),
        "p99": round(pct(99), 4),
        "max": round(ordered[-1], 4),
        "n": len(ordered),
    }


def number_create(
    run: str,
    tag: str,
    rate: int,
    reserve: float,
    sim: str | None,
    account: BusinessAccount | None = None,
) -> PhoneNumber:
    """A number on the simulator (``sim``) with the bench's templates; on ``account`` (a
    pool's numbers share one), else on an account of its own."""
    pnid = f"{PREFIX}-{run}-{tag}"
    shared = account is not None
    if account is None:
        account = BusinessAccount.objects.create(
            waba_id=pnid, messaging_limit_tier="TIER_UNLIMITED"
        )
    number = PhoneNumber.objects.create(
        phone_number_id=pnid,
        display_phone_number="+15550002000",
        account=account,
        access_token=TOKEN,
        rate_per_second=rate,
        transactional_reserve=reserve,
        api_base_url=sim or "http://127.0.0.1:1",
    )
    for name in ("bench_promo", "otp"):
        if not shared:
            Template.objects.create(
                account=account, name=name, language="en_US", body_param_count=1
            )
    if sim:
        requests.post(
            f"{sim}/_sim/numbers",
            json={"phone_number_id": pnid, "access_token": TOKEN, "rate": rate},
            timeout=5,
        ).raise_for_status()
        for name in ("bench_promo", "otp"):
            requests.post(
                f"{sim}/_sim/templates",
                json={"name": name, "language": "en_US", "body_params": 1},
                timeout=5,
            ).raise_for_status()
    return number


ONE_SEND = {
    "entry": {"type": "event", "event": "bench_go"},
    "steps": [
        {"id": "offer", "type": "send", "template": "bench_promo",
         "mapping": {"body": {"1": {"field": "name"}}}},
    ],
}  # fmt: skip
WAIT_THEN_SEND = {
    "entry": {"type": "event", "event": "bench_go"},
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"minutes": 1}},
        *ONE_SEND["steps"],
    ],
}


def instances_due(journey: Journey, contact_list: ContactList, *, step: str, waiting: bool) -> int:
    """One instance per contact of the list, due now at ``step`` (at a wait whose time is
    up, when ``waiting``): the state a mass of waits ending at once leaves."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO journeys_journeyinstance
                   (journey_id, contact_id, version, key, state, step, due_at, step_due_at,
                    waiting_since, entered_at, exit_kind, exit_reason, properties, resumed,
                    holdout, test, updated_at)
            SELECT %(journey)s, m.contact_id, %(version)s, '', 'active', %(step)s, now(),
                   now(), CASE WHEN %(waiting)s THEN now() - interval '1 minute' END,
                   now() - interval '1 minute', '', '', '{}'::jsonb, '{}'::jsonb,
                   false, false, now()
              FROM campaigns_listmembership AS m WHERE m.contact_list_id = %(list)s
            """,
            {
                "journey": journey.pk,
                "version": journey.version,
                "step": step,
                "waiting": waiting,
                "list": contact_list.pk,
            },
        )
        count = int(cursor.rowcount)
        cursor.execute("VACUUM (ANALYZE) journeys_journeyinstance")
    return count


# --- part 1: the sweep --------------------------------------------------------------------


def part_sweep(run: str, rows: int) -> dict[str, Any]:
    settings.JOURNEYS_SEND_AHEAD_SECONDS = 0  # every row at once: what a row costs
    number = number_create(run, "sweep", 1000, 0.2, None)
    contacts = bench_audience(f"{PREFIX}-{run}-sweep", rows, phone_prefix="+4931", name_prefix="S")
    result: dict[str, Any] = {"rows": rows}
    for shape, definition, step, waiting in (
        ("send", ONE_SEND, "offer", False),
        ("wait_then_send", WAIT_THEN_SEND, "wait", True),
    ):
        journey = journey_go_live(
            journey=journey_create(
                name=f"{PREFIX}-{run}-{shape}", phone_number=number, definition=definition
            )
        )
        made = instances_due(journey, contacts, step=step, waiting=waiting)
        hot_tables_vacuum()
        cpu_before, backend_before = time.process_time(), backend_cpu()
        started = time.perf_counter()
        report = journeys_sweep()
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        backend = backend_cpu() - backend_before
        sent = Message.objects.filter(campaign__journey_step__journey=journey).count()
        per_k = made / 1000
        result[shape] = {
            "instances": made,
            "messages": sent,
            "every_row_once": sent == made,
            "batches": report.batches,
            "steps": report.steps,
            "wall_s": round(wall, 2),
            "rows_per_s": round(made / wall),
            "cpu_ms_per_1000_rows": {
                "process": round(cpu * 1000 / per_k, 1),
                "postgres_backend": round(backend * 1000 / per_k, 1),
                "total": round((cpu + backend) * 1000 / per_k, 1),
            },
        }
        journey_archive(journey=journey)
    return result


# --- processes ------------------------------------------------------------------------------


class Stack:
    """The simulator, the web server, the workers and the ticker, as deployed."""

    def __init__(self, run: str, args: argparse.Namespace) -> None:
        self.run = run
        self.args = args
        sim_port, web_port = free_port(), free_port()
        self.sim, self.web = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{web_port}"
        self.group = ProcessGroup(
            settings.DATA_DIR / "bench-logs" / f"journeys-{run}",
            process_env(DEBUG="0", ALLOWED_HOSTS="127.0.0.1,localhost"),
        )
        self.group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
        )  # fmt: skip
        self.group.start(
            "web",
            [
                str(ROOT / ".venv" / "bin" / "gunicorn"), "-c",
                str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
                "--bind", f"127.0.0.1:{web_port}",
            ],
        )  # fmt: skip
        wait_for_http(f"{self.sim}/_sim/health")
        wait_for_http(f"{self.web}/healthz")
        for index in range(args.workers):
            self.group.manage(
                f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance",
                *(["--with-scheduler"] if index == 0 else []),
            )  # fmt: skip
        self.group.manage("ticker", "ticker", "--every", "1")
        time.sleep(3)

    def stop(self) -> None:
        self.group.stop()

    def accepted_since(self, after: int, pnids: set[str]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        while True:
            page = requests.get(
                f"{self.sim}/_sim/records", params={"after": after, "limit": 50_000}, timeout=60
            ).json()["records"]
            if not page:
                return rows
            rows.extend(
                r
                for r in page
                if str(r["outcome"]).startswith("accepted") and r["phone_number_id"] in pnids
            )
            after = page[-1]["seq"]

    def last_seq(self) -> int:
        page = requests.get(f"{self.sim}/_sim/stats", timeout=10).json()
        return int(page.get("requests", 0))


# --- part 2: due at once beside transactional sends -------------------------------------------


def fire_otps(stack: Stack, key: str, pnid: str, seconds: float, tps: float) -> dict[str, float]:
    """POST transactional sends at a steady rate; each one's start time by recipient."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    started_at: dict[str, float] = {}
    refused: dict[int, int] = {}
    t0 = time.time()
    tag = uuid.uuid4().hex[:6]
    for n in range(int(seconds * tps)):
        time.sleep(max(0.0, t0 + n / tps - time.time()))
        to = f"+55219{int(tag, 16) % 100:02d}{n:06d}"
        started = time.time()
        response = session.post(
            f"{stack.web}/api/v1/messages",
            json={
                "phone_number_id": pnid,
                "to": to,
                "template": {"name": "otp", "language": "en_US", "params": {"body": [str(n)]}},
            },
            headers={"Idempotency-Key": f"otp-{tag}-{n}"},
            timeout=10,
        )
        if response.status_code == 202:
            started_at[to] = started
        else:
            refused[response.status_code] = refused.get(response.status_code, 0) + 1
    if refused:
        print(json.dumps({"otps_refused": refused}), file=sys.stderr)
    return started_at


def due_run(stack: Stack, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    run = f"{stack.run}-{mode}"
    number = number_create(run, "due", args.rate, args.reserve, stack.sim)
    _, key = api_key_create(name=f"{PREFIX}-{run}", phone_number_ids=[number.phone_number_id])
    share = args.rate * (1 - args.reserve)
    contacts = (
        bench_audience(f"{PREFIX}-{run}", args.due, phone_prefix="+4932", name_prefix="D")
        if mode != "alone"
        else None
    )
    hot_tables_vacuum()
    after = stack.last_seq()
    campaign: Campaign | None = None
    journey: Journey | None = None
    started = time.time()
    if mode == "campaign":
        assert contacts is not None
        campaign = Campaign.objects.create(
            name=f"{PREFIX}-{run}",
            phone_number=number,
            template=Template.objects.get(account=number.account, name="bench_promo"),
            param_mapping={"body": {"1": {"field": "name"}}},
        )
        campaign.lists.set([contacts])
        campaign_start(campaign=campaign)
    elif mode == "journey":
        assert contacts is not None
        journey = journey_go_live(
            journey=journey_create(name=f"{PREFIX}-{run}", phone_number=number, definition=ONE_SEND)
        )
        instances_due(journey, contacts, step="offer", waiting=False)
    swept_at: float | None = None
    watcher_stop = threading.Event()

    def watch() -> None:
        nonlocal swept_at
        from django.db import connection as own

        try:
            while not watcher_stop.is_set() and journey is not None:
                if not JourneyInstance.objects.filter(journey=journey, state="active").exists():
                    swept_at = time.time()
                    return
                time.sleep(0.5)
        finally:
            own.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(args.warmup)
    otps = fire_otps(stack, key, number.phone_number_id, args.seconds, args.tps)
    window = (started + args.warmup, time.time())
    time.sleep(3)  # the last sends land
    watcher_stop.set()
    watcher.join()
    rows = stack.accepted_since(after, {number.phone_number_id})
    received = {r["to"]: r["wall"] for r in rows if r["to"] in otps}
    latencies = [received[to] - otps[to] for to in received]
    bulk = [r for r in rows if r["to"] not in otps and window[0] <= r["wall"] < window[1]]
    rate = len(bulk) / (window[1] - window[0])
    if campaign is not None:
        campaign_cancel(campaign=Campaign.objects.get(pk=campaign.pk), reason="bench done")
    if journey is not None:
        journey_archive(journey=journey)
        Campaign.objects.filter(journey_step__journey=journey).exclude(
            status=CampaignStatus.CANCELLED
        ).update(status=CampaignStatus.CANCELLED)
    return {
        "mode": mode,
        "otps": len(otps),
        "otps_received": len(received),
        "latency_s": percentiles(latencies),
        "bulk_rate_per_s": round(rate, 1),
        "share_per_s": share,
        "bulk_ratio_to_share": round(rate / share, 3) if mode != "alone" else None,
        "sweep_s": round(swept_at - started, 1) if swept_at else None,
    }


def part_due(stack: Stack, args: argparse.Namespace) -> dict[str, Any]:
    runs = {mode: due_run(stack, mode, args) for mode in ("alone", "campaign", "journey")}
    p99 = {m: r["latency_s"].get("p99") for m, r in runs.items()}
    ratio = p99["journey"] / p99["campaign"] if p99["journey"] and p99["campaign"] else None
    journey_rate = runs["journey"]["bulk_ratio_to_share"]
    return {
        "runs": runs,
        "p99_journey_over_campaign": round(ratio, 3) if ratio else None,
        "p99_journey_over_alone": round(p99["journey"] / p99["alone"], 3)
        if p99["journey"] and p99["alone"]
        else None,
        "met": bool(
            ratio is not None
            and ratio <= P99_RATIO_TARGET
            and journey_rate is not None
            and journey_rate >= RATIO_TARGET
        ),
    }


# --- part 3: events in beside a campaign ------------------------------------------------------


def post_events(
    stack: Stack, key: str, bodies: list[bytes], posters: int, stop_at: float
) -> dict[str, Any]:
    """POST the prepared bodies (1,000 events each) from ``posters`` threads until they are
    used up or ``stop_at``; events accepted and the last POST's end."""
    lock = threading.Lock()
    queue = list(reversed(bodies))
    accepted = [0]
    dropped = [0]
    last_end = [0.0]
    refused: dict[int, int] = {}

    def poster() -> None:
        session = requests.Session()
        session.headers.update(
            {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        )
        while time.time() < stop_at:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            try:
                response = session.post(f"{stack.web}/api/v1/events", data=body, timeout=60)
            except requests.ConnectionError:
                # The server closed the kept-alive connection unanswered: sent again on a
                # new one (each event has an id, so nothing is stored twice), and counted.
                with lock:
                    dropped[0] += 1
                session.close()
                response = session.post(f"{stack.web}/api/v1/events", data=body, timeout=60)
            with lock:
                last_end[0] = time.time()
                if response.status_code == 200:
                    accepted[0] += int(response.json()["stored"])
                else:
                    refused[response.status_code] = refused.get(response.status_code, 0) + 1

    threads = [threading.Thread(target=poster) for _ in range(posters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "accepted": accepted[0],
        "last_post_end": last_end[0],
        "refused": refused,
        "connections_dropped": dropped[0],
    }


def events_run(
    stack: Stack, mode: str, index: int, args: argparse.Namespace, cart: Journey | None
) -> dict[str, Any]:
    run = f"{stack.run}-ev{index}-{mode}"
    first = number_create(run, "n0", args.send_rate, 0.0, stack.sim)
    numbers = [first] + [
        number_create(run, f"n{i}", args.send_rate, 0.0, stack.sim, account=first.account)
        for i in range(1, args.numbers)
    ]
    audience = bench_audience(
        f"{PREFIX}-{run}", args.recipients, phone_prefix="+4933", name_prefix="E"
    )
    campaign = Campaign.objects.create(
        name=f"{PREFIX}-{run}",
        phone_number=numbers[0],
        template=Template.objects.get(account=numbers[0].account, name="bench_promo"),
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([audience])
    if len(numbers) > 1:
        campaign.pool_numbers.set(numbers[1:])
    bodies: list[bytes] = []
    if mode == "on":
        shoppers = args.events_total
        bodies = [
            json.dumps(
                {
                    "events": [
                        {
                            "id": f"{run}-{n}",
                            "phone": f"+55119{index:02d}{n:06d}",
                            "name": "cart_updated",
                            "properties": {"cart_id": f"c{n}", "cart_path": f"c/{n}"},
                        }
                        for n in range(start, min(start + BATCH, shoppers))
                    ]
                }
            ).encode()
            for start in range(0, shoppers, BATCH)
        ]
    hot_tables_vacuum()
    after = stack.last_seq()
    _, key = api_key_create(
        name=f"{PREFIX}-{run}", all_numbers=True, scopes=[ApiScope.CAMPAIGNS],
        requests_per_second=100_000,
    )  # fmt: skip
    events_before = ContactEvent.objects.count()
    started = time.time()
    campaign_start(campaign=campaign)
    posted: dict[str, Any] = {}
    if bodies:
        posted = post_events(stack, key, bodies, args.posters, started + args.events_seconds)
    pnids = {n.phone_number_id for n in numbers}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        stats = requests.get(f"{stack.sim}/_sim/stats", timeout=10).json()
        done = sum(
            int(v.get("accepted", 0)) for k, v in stats.get("per_number", {}).items() if k in pnids
        )
        if done >= args.recipients:
            break
        stack.group.check()
        time.sleep(0.25)
    rows = stack.accepted_since(after, pnids)
    last_send = max(r["wall"] for r in rows)
    routed_at = None
    if bodies:
        deadline = time.monotonic() + 300
        while ContactEvent.objects.filter(routed_at__isnull=True).exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.25)
        routed_at = time.time()
    result: dict[str, Any] = {
        "mode": mode,
        "recipients": args.recipients,
        "sent": len(rows),
        "send_rate_per_s": round(len(rows) / (last_send - started), 1),
        "share_per_s": args.send_rate * args.numbers,
    }
    if bodies:
        post_s = posted["last_post_end"] - started
        result["events"] = {
            "posted": posted["accepted"],
            "stored": ContactEvent.objects.count() - events_before,
            "refused": posted["refused"],
            "connections_dropped": posted["connections_dropped"],
            "post_s": round(post_s, 2),
            "events_per_s": round(posted["accepted"] / post_s),
            "routed_after_last_post_s": round((routed_at or 0) - posted["last_post_end"], 2),
            "instances": JourneyInstance.objects.filter(journey=cart).count() if cart else 0,
        }
    return result


def part_events(stack: Stack, args: argparse.Namespace) -> dict[str, Any]:
    number = number_create(f"{stack.run}-cart", "cart", 80, 0.2, stack.sim)
    cart = journey_go_live(
        journey=journey_create(
            name=f"{PREFIX}-{stack.run}-cart",
            phone_number=number,
            definition={
                "entry": {"type": "event", "event": "cart_updated"},
                "key": "cart_id",
                "steps": [
                    {"id": "wait", "type": "wait", "delay": {"hours": 1}},
                    {
                        "id": "remind",
                        "type": "send",
                        "template": "bench_promo",
                        "mapping": {"body": {"1": {"property": "cart_path"}}},
                    },
                ],
            },  # fmt: skip
        )
    )
    pairs = []
    for index in range(args.pairs):
        order = ("off", "on") if index % 2 == 0 else ("on", "off")
        runs = {mode: events_run(stack, mode, index, args, cart) for mode in order}
        pairs.append(
            {
                "order": list(order),
                "off": runs["off"],
                "on": runs["on"],
                "ratio_on_off": round(
                    runs["on"]["send_rate_per_s"] / runs["off"]["send_rate_per_s"], 3
                ),
            }
        )
    ratios = [p["ratio_on_off"] for p in pairs]
    rates = [p["on"]["events"]["events_per_s"] for p in pairs]
    journey_archive(journey=cart)
    return {
        "pairs": pairs,
        "ratio_median": round(statistics.median(ratios), 3),
        "events_per_s_min": min(rates),
        "met": min(rates) >= EVENTS_TARGET and statistics.median(ratios) >= RATIO_TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--skip-due", action="store_true")
    parser.add_argument("--skip-events", action="store_true")
    parser.add_argument("--sweep-rows", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=100_000)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--reserve", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=5)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--recipients", type=int, default=18_000)
    parser.add_argument("--numbers", type=int, default=2)
    parser.add_argument("--send-rate", type=int, default=150)
    parser.add_argument("--events-total", type=int, default=200_000)
    parser.add_argument("--events-seconds", type=float, default=40)
    parser.add_argument("--posters", type=int, default=4)
    args = parser.parse_args()
    began = time.time()
    loop_before = machine_loop_s()
    call_command("migrate", verbosity=0)
    for name in settings.RQ_QUEUE_NAMES:
        django_rq.get_queue(name).empty()
    run = uuid.uuid4().hex[:8]
    result: dict[str, Any] = {"scenario": "journeys", "run": run}
    if not args.skip_sweep:
        result["sweep"] = part_sweep(run, args.sweep_rows)
    if not (args.skip_due and args.skip_events):
        stack = Stack(run, args)
        try:
            # Each part is printed to stderr as it ends too: a later part's failure keeps it.
            if not args.skip_due:
                result["due_at_once"] = part_due(stack, args)
                print(json.dumps({"due_at_once": result["due_at_once"]}), file=sys.stderr)
            if not args.skip_events:
                result["events_in"] = part_events(stack, args)
        finally:
            stack.stop()
    result["machine"] = {
        "cpus": os.cpu_count(),
        "loop_s": {"before": loop_before, "after": machine_loop_s()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    result["runtime_s"] = round(time.time() - began, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
