"""Events out: events a second to a local receiver, and a campaign's send rate with events
on against off, in one run.

Both parts deliver to a receiver of the bench's own (``--receiver``, this file run in a
process of its own: a raw asyncio HTTP/1.1 server that answers 204 at once, keeps every
POST with its arrival time and signature, and parses them only when asked for the figures,
after the run, so it costs the shared cores as little as a receiver can).

1. **Delivery** (``--events`` N, default 100,000, once per count of ``--delivery-workers``,
   default 1 and 2): N/2 campaign messages, as the settlement leaves them (``sent``, with a
   wamid), get their ``delivered`` then their ``read`` through ``status_updates_apply``, the
   webhook applier's own statement, 1,000 rows a statement (a transaction each, as the
   applier commits them). The triggers write one event per row changed into the outbox: N
   events, as production writes them. One subscription names the receiver and
   ``manage.py events`` runs in 1 (or 2) processes, started and idle before the first
   commit. The clock runs from the first commit to the receiver's arrival of the last
   event. Reported: events/s, the fill's own time, the POSTs and their sizes, the gaps
   between POSTs (the worker's cycle per batch: select, sign, POST, cursor) and each
   event's latency (arrival - ``occurred_at``), p50/p99/max; CPU per 1,000 events of the
   events workers and of their own PostgreSQL backends (found by their TCP ports in
   ``pg_stat_activity``), and of the receiver. Before the first round the same fill runs
   once with no subscription: the fill's PostgreSQL backend CPU per 1,000 rows, with and
   without events, is the triggers' cost on the write path.

2. **Send rate, events on against off** (``--pairs`` P, default 3: off on, on off, off on): the
   full loop of bench/full_loop.py (the simulator at ``--latency-ms`` calling back every
   status, ``--webhook-batch-size`` statuses a POST, half the messages read; gunicorn as
   deployed; ``--workers`` RQ workers; the ticker), each run a fresh campaign of
   ``--recipients`` over a pool of ``--numbers`` numbers at ``--rate`` msg/s each, so that
   the engine, not the rate, is the bound. Every run's campaign and audience is made before
   the first run. "On": a subscription to the receiver and one ``manage.py events`` process
   beside the senders, started before the clock; "off": no subscription and no events
   process (the triggers still run, and find no subscription). The clock runs from the
   launch (``campaign_start``, its INSERT of the messages included) to the simulator's last
   accepted send; wall-clock send rate = recipients / that time. Reported per run: that rate,
   the rate between the first and last send, the drain after the last send, CPU (cores)
   per process kind over the send window (with this database's PostgreSQL backends, the
   events worker's own apart, and the whole machine: "others" is the busy time that was not
   this run's, the box being shared); for "on" runs every event the database holds for the
   run against the receiver's (one each, contiguous sequences, in order, signed), and their
   latency. The ratio on/off of each pair and their median.

Prints one JSON object, with the machine's speed (docs/performance.md, "How the figures are
taken") before and after. About 6-7 minutes with the defaults.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/events.py \\
        [--events 100000] [--delivery-workers 1,2] [--pairs 3] [--recipients 12000] \\
        [--numbers 4] [--rate 1000] [--webhook-batch-size 1] \\
        [--skip-delivery | --skip-send]

Run it against a scratch database: it refuses one holding subscriptions of its own (events
off means none exist), deletes its subscriptions when done and leaves its other rows
behind under names starting with "bench-events".
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import secrets
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import (
    ROOT,
    bench_audience,
    django_setup,
    hot_tables_vacuum,
    process_env,
    sim_accepted_records,
)

PREFIX = "bench-events"
EVENT_TABLES = ("delivery_eventoutbox", "delivery_event", "delivery_eventsubscription")
TARGET_EVENTS_PER_S = 2000
TARGET_RATIO = 0.97
FILL_BATCH = 1000


# --- the receiver (standard library only; its own process) ------------------------------


class ReceiverState:
    def __init__(self) -> None:
        self.secret = ""
        self.posts: list[tuple[float, str, bytes]] = []
        self.events = 0

    def reset(self, secret: str) -> None:
        self.secret = secret
        self.posts = []
        self.events = 0


def receiver_main(port: int) -> None:
    state = ReceiverState()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head[:-4].split(b"\r\n")
                method, target = request_line.split(b" ")[:2]
                length, sig = 0, ""
                for line in header_lines:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"whatsblast-signature":
                        sig = value.strip().decode()
                body = await reader.readexactly(length) if length else b""
                if method == b"POST" and target == b"/hooks":
                    state.posts.append((time.time(), sig, body))
                    # Each event object starts so (body_of: "id" first, no spaces).
                    state.events += body.count(b'{"id":"')
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                else:
                    payload = json.dumps(_receiver_control(state, target.decode(), body)).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=256)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


def _receiver_control(state: ReceiverState, target: str, body: bytes) -> dict[str, Any]:
    if target == "/reset":
        state.reset(json.loads(body or b"{}").get("secret", ""))
        return {}
    if target == "/count":
        return {
            "posts": len(state.posts),
            "events": state.events,
            "last_at": state.posts[-1][0] if state.posts else None,
        }
    if target == "/stats":
        return _receiver_stats(state)
    return {"error": f"unknown {target}"}


def _signed(secret: str, header: str, body: bytes, at: float) -> bool:
    """What a receiver checks (docs/events.md): the time is recent, the HMAC matches."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        stamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(at - stamp) > 300:
        return False
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(digest, parts.get("v1", ""))


def _receiver_stats(state: ReceiverState) -> dict[str, Any]:
    ids: set[str] = set()
    seqs: list[int] = []
    lags: list[float] = []
    sizes: list[int] = []
    types: Counter[str] = Counter()
    duplicates = bad_signatures = 0
    in_order = True
    last_seq = 0
    for at, sig, body in state.posts:
        if not _signed(state.secret, sig, body, at):
            bad_signatures += 1
        events = json.loads(body)["events"]
        sizes.append(len(events))
        for event in events:
            if event["id"] in ids:
                duplicates += 1
                continue
            ids.add(event["id"])
            seqs.append(event["sequence"])
            types[event["type"]] += 1
            in_order = in_order and event["sequence"] > last_seq
            last_seq = max(last_seq, event["sequence"])
            lags.append(at - datetime.fromisoformat(event["occurred_at"]).timestamp())
    arrivals = [at for at, _, _ in state.posts]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    return {
        "posts": len(state.posts),
        "events": len(ids),
        "duplicates": duplicates,
        "first_seq": min(seqs) if seqs else None,
        "last_seq": max(seqs) if seqs else None,
        "contiguous": bool(seqs) and max(seqs) - min(seqs) + 1 == len(seqs),
        "in_order": in_order,
        "bad_signatures": bad_signatures,
        "batch_size": {
            "max": max(sizes, default=0),
            "mean": round(statistics.fmean(sizes), 1) if sizes else 0,
        },
        "types": dict(types),
        "first_at": arrivals[0] if arrivals else None,
        "last_at": arrivals[-1] if arrivals else None,
        "post_interval_ms": percentiles([g * 1000 for g in gaps], 1),
        "event_latency_s": percentiles(lags, 3),
    }


def percentiles(values: Iterable[float], digits: int) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    if len(ordered) == 1:
        return {"p50": round(ordered[0], digits), "max": round(ordered[0], digits), "n": 1}
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50": round(cut[49], digits),
        "p99": round(cut[98], digits),
        "max": round(ordered[-1], digits),
        "n": len(ordered),
    }


# --- shared ------------------------------------------------------------------------------


def machine_loop_s() -> float:
    """docs/performance.md's machine speed: a 20-million-step Python loop (lower is faster)."""
    started = time.perf_counter()
    x = 0
    for i in range(20_000_000):
        x += i
    return round(time.perf_counter() - started, 2)


class Receiver:
    def __init__(self, url: str) -> None:
        import requests

        self.base = url
        self.session = requests.Session()

    @property
    def hooks(self) -> str:
        return f"{self.base}/hooks"

    def control(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.session.post(f"{self.base}{path}", json=body or {}, timeout=120)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer


def tables_vacuum() -> None:
    """The hot tables and the events tables, as autovacuum keeps them (harness.py says why)."""
    from django.db import connection

    hot_tables_vacuum()
    with connection.cursor() as cursor:
        for table in EVENT_TABLES:
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def subscriptions_check() -> None:
    from delivery.models import EventSubscription

    others = EventSubscription.objects.exclude(name__startswith=PREFIX)
    if others.exists():
        raise SystemExit(
            f"this database has {others.count()} event subscription(s) of its own: events "
            "cannot be off; run the bench against a scratch database"
        )
    EventSubscription.objects.filter(name__startswith=PREFIX).delete()


def subscription_open(receiver: Receiver, run: str) -> Any:
    """A subscription to the receiver, from now on. Events an earlier run left in the
    outbox (one stopped before its worker routed them) are lined up first: a subscription
    starts after the highest routed event, and would otherwise get them."""
    from django.test import override_settings

    from delivery.events.router import events_route
    from delivery.events.subscriptions import subscription_create

    while events_route():
        pass
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=True):  # the receiver is on this machine
        subscription, secret = subscription_create(name=f"{PREFIX}-{run}", url=receiver.hooks)
    receiver.control("/reset", {"secret": secret})
    return subscription


def subscription_close(subscription: Any) -> None:
    from django.db import connection

    subscription.delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) delivery_eventsubscription")


def tree_cpu(pid: int) -> float:
    import psutil

    try:
        proc = psutil.Process(pid)
        return float(
            sum(t.user + t.system for t in (p.cpu_times() for p in [proc, *proc.children(True)]))
        )
    except psutil.Error:
        return 0.0


def pid_cpu(pids: Iterable[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def backends_of(pid: int, timeout: float = 30.0) -> list[int]:
    """The PostgreSQL backend pids serving process ``pid`` (its TCP connections' ports);
    waits until it has connected (a Django process connects at its first query)."""
    import psutil
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pg_port = int(connection.settings_dict.get("PORT") or 5432)
        ports = [
            c.laddr.port
            for p in [psutil.Process(pid), *psutil.Process(pid).children(True)]
            for c in p.net_connections(kind="tcp")
            if c.raddr and c.raddr.port == pg_port
        ]
        if ports:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pid FROM pg_stat_activity WHERE client_port = ANY(%s)", [ports]
                )
                found = [row[0] for row in cursor.fetchall()]
            if found:
                return found
        time.sleep(0.1)
    raise SystemExit(f"process {pid} never connected to PostgreSQL")


def events_ready(backends: list[int], timeout: float = 30.0) -> None:
    """Wait until every events worker's backend is busy with its loop (its last statement
    keeps starting anew: the loop runs every 50 ms when idle); a process connects during
    its start-up checks, before its loop begins."""
    from django.db import connection

    def starts() -> dict[int, Any]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid, query_start FROM pg_stat_activity WHERE pid = ANY(%s)", [backends]
            )
            return dict(cursor.fetchall())

    deadline = time.monotonic() + timeout
    before = starts()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = starts()
        if all(now.get(pid) not in (None, before.get(pid)) for pid in backends):
            return
        before = now
    raise SystemExit(f"events workers {backends} never started their loop")


def log_problems(children: Iterable[Any]) -> dict[str, Any]:
    """The warnings and errors the events workers logged, and the first of them."""
    lines = [
        line
        for child in children
        for line in child.log_path.read_text(errors="replace").splitlines()
        if " WARNING " in line or " ERROR " in line or "Traceback" in line
    ]
    return {"count": len(lines), "first": lines[0][:300] if lines else None}


def own_backend() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def campaign_create(run: str, tag: str, numbers: list[Any], size: int) -> Any:
    from campaigns.models import Campaign, Template

    template, _ = Template.objects.get_or_create(
        account=numbers[0].account,
        name="bench_promo",
        language="en_US",
        defaults={"body_param_count": 1},
    )
    contact_list = bench_audience(
        f"{PREFIX}-{run}-{tag}", size, phone_prefix="+4932", name_prefix="E"
    )
    campaign = Campaign.objects.create(
        name=f"{PREFIX}-{run}-{tag}",
        phone_number=numbers[0],
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([contact_list])
    if len(numbers) > 1:
        campaign.pool_numbers.set(numbers[1:])
    return campaign


def numbers_create(run: str, tag: str, count: int, rate: int, sim: str | None) -> list[Any]:
    import requests

    from campaigns.models import BusinessAccount, PhoneNumber

    account = BusinessAccount.objects.create(
        waba_id=f"{PREFIX}-{run}-{tag}", messaging_limit_tier="TIER_UNLIMITED"
    )
    numbers = []
    for index in range(count):
        pnid = f"{PREFIX}-{run}-{tag}-{index}"
        numbers.append(
            PhoneNumber.objects.create(
                phone_number_id=pnid,
                display_phone_number=f"+1556{index:07d}",
                account=account,
                access_token="bench-token",  # noqa: S106 - simulator token
                rate_per_second=rate,
                transactional_reserve=0,
                api_base_url=sim or "http://127.0.0.1:1",
            )
        )
        if sim:
            requests.post(
                f"{sim}/_sim/numbers",
                json={"phone_number_id": pnid, "access_token": "bench-token", "rate": rate},
                timeout=5,
            ).raise_for_status()
    if sim:
        requests.post(
            f"{sim}/_sim/templates",
            json={"name": "bench_promo", "language": "en_US", "body_params": 1},
            timeout=5,
        ).raise_for_status()
    return numbers


# --- part 1: events a second to the receiver ---------------------------------------------


def sent_messages(run: str, tag: str, count: int) -> list[int]:
    """``count`` campaign messages as the settlement leaves them: sent, with a wamid."""
    from django.utils import timezone

    from campaigns.models import ListMembership
    from delivery.models import Message

    numbers = numbers_create(run, tag, 1, 80, None)
    campaign = campaign_create(run, tag, numbers, count)
    now = timezone.now()
    contacts = [
        m.contact
        for m in ListMembership.objects.filter(contact_list__in=campaign.lists.all())
        .select_related("contact")
        .order_by("contact_id")
    ]
    rows = Message.objects.bulk_create(
        (
            Message(
                campaign=campaign,
                contact=c,
                phone_number=numbers[0],
                template=campaign.template,
                to=c.phone or "",
                status="sent",
                wamid=f"wamid.{PREFIX}-{run}-{tag}-{i}",
                sent_at=now,
                next_attempt_at=now,
                params={"body": [c.name]},
            )  # fmt: skip
            for i, c in enumerate(contacts)
        ),
        batch_size=5000,
    )
    return [m.pk for m in rows]


def fill(ids: list[int]) -> float:
    """Each message delivered, then read: the applier's statement, 1,000 rows a commit."""
    from django.utils import timezone

    from delivery.messages import MessageUpdate, status_updates_apply

    started = time.time()
    for status in ("delivered", "read"):
        at = timezone.now()
        for i in range(0, len(ids), FILL_BATCH):
            updates = [
                MessageUpdate(
                    message_id=message_id,
                    status=status,
                    wamid=None,
                    sent_at=None,
                    delivered_at=at,
                    read_at=at if status == "read" else None,
                    failed_at=None,
                    error_code=None,
                    error_title=None,
                    error_details=None,
                    conversation_id=None,
                    pricing_category=None,
                    billable=None,
                )  # fmt: skip
                for message_id in ids[i : i + FILL_BATCH]
            ]
            changed = status_updates_apply(updates)
            if changed != len(updates):
                raise SystemExit(f"the fill changed {changed} rows of {len(updates)}")
    return time.time() - started


def trigger_cost(run: str, events: int) -> dict[str, Any]:
    """The fill's PostgreSQL backend CPU per 1,000 rows with no subscription: the write
    path's cost when events are off (compared with the rounds' fills)."""
    ids = sent_messages(run, "fill-off", events // 2)
    tables_vacuum()
    backend = [own_backend()]
    before = pid_cpu(backend)
    seconds = fill(ids)
    cpu = pid_cpu(backend) - before
    return {
        "rows": len(ids) * 2,
        "fill_s": round(seconds, 2),
        "backend_cpu_ms_per_1000_rows": round(cpu * 1000 / (len(ids) * 2 / 1000), 1),
    }


def delivery_round(
    run: str, workers: int, args: argparse.Namespace, receiver: Receiver, group: Any
) -> dict[str, Any]:
    from delivery.models import Event, EventOutbox

    ids = sent_messages(run, f"w{workers}", args.events // 2)
    expected = len(ids) * 2
    tables_vacuum()
    subscription = subscription_open(receiver, f"{run}-w{workers}")
    children = [group.manage(f"events-w{workers}-{i}", "events") for i in range(workers)]
    try:
        backends = [pid for c in children for pid in backends_of(c.process.pid)]
        events_ready(backends)
        seq_before = Event.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        fill_backend = [own_backend()]
        cpu_before = (
            sum(tree_cpu(c.process.pid) for c in children),
            pid_cpu(backends),
            pid_cpu(fill_backend),
            tree_cpu(args.receiver_pid),
        )
        started = time.time()
        fill_s = fill(ids)
        deadline = time.monotonic() + 300
        while True:
            group.check()
            count = receiver.control("/count")
            if count["events"] >= expected:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the receiver has {count['events']} events of {expected}")
            time.sleep(0.05)
        cpu_after = (
            sum(tree_cpu(c.process.pid) for c in children),
            pid_cpu(backends),
            pid_cpu(fill_backend),
            tree_cpu(args.receiver_pid),
        )
        check, stats = _events_check(receiver, seq_before)
        outbox_left = EventOutbox.objects.count()
        problems = log_problems(children)
    finally:
        for child in children:
            group.kill(child, 15)
        subscription_close(subscription)
    wall = stats["last_at"] - started
    per_k = expected / 1000
    cpu = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    return {
        "events_workers": workers,
        "events": expected,
        "received": check["received"],
        "in_database": check["in_database"],
        "outbox_left": outbox_left,
        "every_event_once": check["every_event_once"] and check["in_database"] == expected,
        "duplicates": check["duplicates"],
        "in_order": check["in_order"],
        "bad_signatures": check["bad_signatures"],
        "wall_s": round(wall, 2),
        "events_per_s": round(expected / wall, 1),
        "fill_s": round(fill_s, 2),
        "drain_after_fill_s": round(stats["last_at"] - started - fill_s, 2),
        "events_per_s_first_to_last_post": round(
            expected / (stats["last_at"] - stats["first_at"]), 1
        ),
        "posts": stats["posts"],
        "batch_size": stats["batch_size"],
        "post_interval_ms": stats["post_interval_ms"],
        "event_latency_s": stats["event_latency_s"],
        "cpu_ms_per_1000_events": {
            "events_workers": round(cpu[0] * 1000 / per_k, 1),
            "events_workers_postgres_backends": round(cpu[1] * 1000 / per_k, 1),
            "receiver": round(cpu[3] * 1000 / per_k, 1),
        },
        "fill_backend_cpu_ms_per_1000_rows": round(cpu[2] * 1000 / per_k, 1),
        "events_worker_log_problems": problems,
    }


def part_delivery(run: str, args: argparse.Namespace, receiver: Receiver) -> dict[str, Any]:
    from django.conf import settings

    from whatsblast.core.processes import ProcessGroup

    group = ProcessGroup(
        Path(settings.DATA_DIR) / "bench-logs" / f"events-{run}",
        process_env(EVENTS_ALLOW_PRIVATE_URLS="1"),  # the receiver is on this machine
    )
    off = trigger_cost(run, args.events)
    try:
        rounds = [delivery_round(run, w, args, receiver, group) for w in args.delivery_workers]
    finally:
        group.stop()
    best = max(r["events_per_s"] for r in rounds)
    return {
        "how": (
            "messages moved sent -> delivered -> read by delivery.messages."
            "status_updates_apply, 1,000 rows a commit; the triggers write the events"
        ),
        "batch_size_setting": settings.EVENTS_BATCH_SIZE,
        "rounds": rounds,
        "fill_without_subscription": off,
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "met": best >= TARGET_EVENTS_PER_S and all(r["every_event_once"] for r in rounds),
    }


# --- part 2: a campaign's send rate with events on and off -------------------------------

AWAITING = ("sending", "sent")


def _gunicorn_args() -> list[str]:
    return [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
    ]  # fmt: skip


def _kind(name: str) -> str:
    for prefix in ("worker", "events"):
        if name.startswith(prefix):
            return prefix
    return name


class CpuMeter:
    """CPU seconds used since it was made, per process kind of the run (trees, children
    included), by this database's PostgreSQL backends (each from the start, or from its
    birth; sampled often so that one closing between samples loses little), and by the
    whole machine (busy and steal, /proc/stat): the box is shared, and "others" (busy minus
    ours) says how much of it went to work that is not this run's."""

    def __init__(self, groups: list[Any], receiver_pid: int, events_backends: list[int]):
        import psutil

        self.groups = groups
        self.receiver_pid = receiver_pid
        self.events_backends = set(events_backends)
        self.base_kinds = self._kinds()
        self.base_backends = self._backends()
        self.last_backends = dict(self.base_backends)
        self.base_machine = psutil.cpu_times()

    def _kinds(self) -> dict[str, float]:
        totals: dict[str, float] = {"receiver": tree_cpu(self.receiver_pid)}
        for child in (c for g in self.groups for c in g.children):
            kind = _kind(child.name)
            totals[kind] = totals.get(kind, 0.0) + tree_cpu(child.process.pid)
        return totals

    def _backends(self) -> dict[int, float]:
        import psutil
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            pids = [row[0] for row in cursor.fetchall()]
        used: dict[int, float] = {}
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            used[pid] = t.user + t.system
        return used

    def sample(self) -> dict[str, float]:
        import psutil

        self.last_backends.update(self._backends())
        kinds = self._kinds()
        used = {k: v - self.base_kinds.get(k, 0.0) for k, v in kinds.items()}
        per_backend = {
            pid: cpu - self.base_backends.get(pid, 0.0) for pid, cpu in self.last_backends.items()
        }
        used["postgres"] = sum(per_backend.values())
        used["postgres_events_backend"] = sum(
            v for pid, v in per_backend.items() if pid in self.events_backends
        )
        used["ours"] = sum(v for k, v in used.items() if k != "postgres_events_backend")
        now, base = psutil.cpu_times(), self.base_machine

        def busy(t: Any) -> float:
            return float(t.user + t.nice + t.system + t.irq + t.softirq)

        used["machine_busy"] = busy(now) - busy(base)
        used["machine_steal"] = float(now.steal - base.steal)
        used["others"] = used["machine_busy"] - used["ours"]
        return used


def campaign_run(
    mode: str,
    campaign: Any,
    numbers: list[Any],
    ctx: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:
    import requests

    from delivery.campaigns.launch import campaign_start
    from delivery.models import Event, EventOutbox
    from webhooks.models import WebhookEvent

    sim: str = ctx["sim"]
    group = ctx["group"]
    groups: list[Any] = [group, ctx["web_group"]]
    receiver: Receiver = ctx["receiver"]
    pnids = {n.phone_number_id for n in numbers}
    tables_vacuum()
    subscription = child = None
    backends: list[int] = []
    if mode == "on":
        subscription = subscription_open(receiver, f"{ctx['run']}-{campaign.pk}")
        child = group.manage(f"events-{campaign.pk}", "events")
        backends = backends_of(child.process.pid)
        events_ready(backends)
    load_before = os.getloadavg()[0]
    try:
        first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first()
        seq_before = Event.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        meter = CpuMeter(groups, args.receiver_pid, backends)
        started = time.time()
        campaign_start(campaign=campaign)
        recipients = campaign.messages.count()
        at_last_send: dict[str, float] | None = None
        deadline = time.monotonic() + 600
        while True:
            for g in groups:
                g.check()
            stats = requests.get(f"{sim}/_sim/stats", timeout=10).json()
            accepted = sum(
                int(v.get("accepted", 0))
                for k, v in stats.get("per_number", {}).items()
                if k in pnids
            )
            used = meter.sample()
            if at_last_send is None and accepted >= recipients:
                at_last_send = used
            if at_last_send is not None and _drained(
                campaign, first_event or 0, stats, mode, seq_before, receiver
            ):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the {mode} run did not drain in time (accepted {accepted})")
            time.sleep(0.25)
        drained_at = time.time()
        at_end = meter.sample()
        sends = sorted(
            r["wall"] for r in sim_accepted_records(sim) if r["phone_number_id"] in pnids
        )
        events: dict[str, Any] | None = None
        if mode == "on":
            events, _ = _events_check(receiver, seq_before)
            events["events_worker_log_problems"] = log_problems([child])
    finally:
        if child is not None:
            group.kill(child, 15)
        if subscription is not None:
            subscription_close(subscription)
    first_send, last_send = sends[0], sends[-1]
    window = last_send - started
    assert at_last_send is not None
    result: dict[str, Any] = {
        "mode": mode,
        "campaign": campaign.pk,
        "recipients": recipients,
        "accepted": len(sends),
        "send_wall_s": round(window, 2),
        "wall_rate": round(len(sends) / window, 1),
        "span_rate": round((len(sends) - 1) / (last_send - first_send), 1),
        "first_send_after_s": round(first_send - started, 2),
        "drained_after_last_send_s": round(drained_at - last_send, 2),
        # Until the sample after the last send (polled every 0.25 s).
        "cpu_cores_send_window": {k: round(v / window, 3) for k, v in at_last_send.items()},
        "cpu_s_whole_run": {k: round(v, 2) for k, v in at_end.items()},
        "load_average_1m": {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)},
        "outbox_left": EventOutbox.objects.count(),
    }
    if events is not None:
        n = max(events["in_database"], 1) / 1000
        events["cpu_ms_per_1000_events"] = {
            "events_worker": round(at_end.get("events", 0.0) * 1000 / n, 1),
            "events_worker_postgres_backend": round(
                at_end["postgres_events_backend"] * 1000 / n, 1
            ),
        }
        result["events"] = events
    return result


def _drained(
    campaign: Any,
    first_event: int,
    stats: dict[str, Any],
    mode: str,
    seq_before: int,
    receiver: Receiver,
) -> bool:
    from campaigns.models import Campaign
    from delivery.models import Event, EventOutbox
    from webhooks.models import WebhookEvent

    if Campaign.objects.get(pk=campaign.pk).status != "completed":
        return False
    if int(stats["webhooks"].get("pending", 0)) != 0:
        return False
    if campaign.messages.filter(status__in=AWAITING).exists():
        return False
    if WebhookEvent.objects.filter(id__gt=first_event, status="pending").exists():
        return False
    if mode == "off":
        return True
    if EventOutbox.objects.exists():
        return False
    in_line = Event.objects.filter(seq__gt=seq_before).count()
    return int(receiver.control("/count")["events"]) >= in_line


def _events_check(receiver: Receiver, seq_before: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every event the database lined up after ``seq_before`` against the receiver's: the
    same number, the same first and last sequence, contiguous, none twice; and the
    receiver's figures."""
    from django.db.models import Max, Min

    from delivery.models import Event

    line = Event.objects.filter(seq__gt=seq_before)
    db = line.aggregate(first=Min("seq"), last=Max("seq"))
    in_database = line.count()
    stats = receiver.control("/stats")
    return {
        "in_database": in_database,
        "received": stats["events"],
        "every_event_once": stats["events"] == in_database
        and stats["duplicates"] == 0
        and stats["contiguous"]
        and (stats["first_seq"], stats["last_seq"]) == (db["first"], db["last"]),
        "duplicates": stats["duplicates"],
        "in_order": stats["in_order"],
        "bad_signatures": stats["bad_signatures"],
        "posts": stats["posts"],
        "batch_size": stats["batch_size"],
        "types": stats["types"],
        "event_latency_s": stats["event_latency_s"],
    }, stats


def part_send(run: str, args: argparse.Namespace, receiver: Receiver) -> dict[str, Any]:
    import requests
    from django.conf import settings

    from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http

    secret = secrets.token_urlsafe(24)
    sim_port, web_port = free_port(), free_port()
    sim, web = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{web_port}"
    logs = Path(settings.DATA_DIR) / "bench-logs" / f"events-{run}"
    env = process_env(WHATSAPP_APP_SECRET=secret, EVENTS_ALLOW_PRIVATE_URLS="1")
    group = ProcessGroup(logs, env)
    web_group = ProcessGroup(
        logs,
        {
            **env,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1",
            "GUNICORN_BIND": f"127.0.0.1:{web_port}",
            "GUNICORN_WORKERS": str(args.web_workers),
            "GUNICORN_THREADS": "16",
            "LOG_FORMAT": "json",
            "PROMETHEUS_MULTIPROC_DIR": str(logs / "prometheus"),
        },
    )
    runs: list[dict[str, Any]] = []
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
            "--callback-url", f"{web}/webhooks/whatsapp", f"--app-secret={secret}",
            "--webhook-batch-size", str(args.webhook_batch_size), "--read-fraction", "0.5",
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        requests.post(
            f"{sim}/_sim/config", json={"webhook_concurrency": 64}, timeout=5
        ).raise_for_status()
        web_group.start("web", _gunicorn_args(), python=False)
        wait_for_http(f"{web}/healthz")
        # off on, on off, off on ...: a drift over the run (the box is shared, the tables
        # grow) does not always fall on the same side of a pair.
        modes = [m for i in range(args.pairs) for m in (("off", "on"), ("on", "off"))[i % 2]]
        setups = []
        for index, _ in enumerate(modes):
            numbers = numbers_create(run, f"s{index}", args.numbers, args.rate, sim)
            setups.append((campaign_create(run, f"s{index}", numbers, args.recipients), numbers))
        for index in range(args.workers):
            group.manage(f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the first clock starts
        ctx = {"sim": sim, "group": group, "web_group": web_group, "receiver": receiver}
        ctx["run"] = run
        for mode, (campaign, numbers) in zip(modes, setups, strict=True):
            runs.append(campaign_run(mode, campaign, numbers, ctx, args))
    finally:
        group.stop()
        web_group.stop()
    pairs = []
    for i in range(0, len(runs), 2):
        off, on = sorted(runs[i : i + 2], key=lambda r: r["mode"] != "off")
        pairs.append(
            {
                "order": f"{runs[i]['mode']} {runs[i + 1]['mode']}",
                "off": off["wall_rate"],
                "on": on["wall_rate"],
                "ratio": round(on["wall_rate"] / off["wall_rate"], 4),
                "span_ratio": round(on["span_rate"] / off["span_rate"], 4),
                # Cores during each send window: the box is shared (others' work), and
                # what the events worker and its PostgreSQL backend took of it.
                "others_cores": [
                    off["cpu_cores_send_window"]["others"],
                    on["cpu_cores_send_window"]["others"],
                ],
                "events_cores_on": round(
                    on["cpu_cores_send_window"].get("events", 0.0)
                    + on["cpu_cores_send_window"]["postgres_events_backend"],
                    3,
                ),
            }
        )
    ratio = statistics.median(p["ratio"] for p in pairs)
    delivered = all(r["events"]["every_event_once"] for r in runs if r["mode"] == "on")
    return {
        "setup": {
            "recipients": args.recipients,
            "numbers": args.numbers,
            "rate_each": args.rate,
            "configured_rate": args.numbers * args.rate,
            "workers": args.workers,
            "web_workers": args.web_workers,
            "latency_ms": args.latency_ms,
            "webhook_batch_size": args.webhook_batch_size,
            "read_fraction": 0.5,
            "events_workers_when_on": 1,
        },
        "runs": runs,
        "pairs": pairs,
        "ratio_median": round(ratio, 4),
        "span_ratio_median": round(statistics.median(p["span_ratio"] for p in pairs), 4),
        "target_ratio": TARGET_RATIO,
        "every_event_delivered_when_on": delivered,
        "met": ratio >= TARGET_RATIO and delivered,
    }


# --- main --------------------------------------------------------------------------------


def main() -> None:
    if sys.argv[1:2] == ["--receiver"]:
        receiver_main(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--delivery-workers", default="1,2", help="events processes, per round")
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs of campaign runs")
    parser.add_argument("--recipients", type=int, default=12_000)
    parser.add_argument("--numbers", type=int, default=4, help="the campaign's pool")
    parser.add_argument("--rate", type=int, default=1000, help="each number's msg/s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--webhook-batch-size", type=int, default=1)
    parser.add_argument("--skip-delivery", action="store_true")
    parser.add_argument("--skip-send", action="store_true")
    args = parser.parse_args()
    args.delivery_workers = [int(w) for w in args.delivery_workers.split(",") if w]

    django_setup()
    from django.conf import settings
    from django.core.management import call_command

    from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http

    began = time.time()
    loop_before = machine_loop_s()
    load_before = os.getloadavg()[0]
    call_command("migrate", verbosity=0)
    subscriptions_check()
    run = uuid.uuid4().hex[:8]
    port = free_port()
    receivers = ProcessGroup(Path(settings.DATA_DIR) / "bench-logs" / f"events-{run}", {})
    result: dict[str, Any] = {
        "scenario": "events",
        "run": run,
    }
    try:
        child = receivers.start(
            "receiver", [str(Path(__file__).resolve()), "--receiver", str(port)]
        )
        args.receiver_pid = child.process.pid
        url = f"http://127.0.0.1:{port}"
        wait_for_http(f"{url}/count")
        receiver = Receiver(url)
        if not args.skip_delivery:
            result["delivery"] = part_delivery(run, args, receiver)
        if not args.skip_send:
            result["send_rate"] = part_send(run, args, receiver)
    finally:
        receivers.stop()
    result["machine"] = {
        "cpus": os.cpu_count(),
        "loop_s": {"before": loop_before, "after": machine_loop_s()},
        "load_average_1m": {"start": round(load_before, 2), "end": round(os.getloadavg()[0], 2)},
    }
    result["runtime_s"] = round(time.time() - began, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
