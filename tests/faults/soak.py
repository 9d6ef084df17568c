"""The soak: an hour of mixed traffic through real processes, measured per window.

Not in CI. ``WHATSBLAST_SOAK=1 .venv/bin/pytest tests/faults/test_soak.py -s`` runs it
under pytest (asserting its checks and verdicts); ``python -m tests.faults.soak`` prints
the same JSON report. It reuses the fault suite's pieces (``tests.faults.runner``): a
private PostgreSQL and Redis, the simulator, gunicorn, RQ workers and the ticker supervised
like systemd's ``Restart=always``, and the check of the table against the simulator's
records. The traffic, for ``--minutes`` (WHATSBLAST_SOAK_MINUTES, default 60):

* campaigns on every number of ``--rates`` (default 40, 60, 80 msg/s), ``--concurrent``
  (2) at a time on each, a new one launched as soon as one completes, so the load never
  stops; every campaign is ``--campaign-seconds`` (120) of its number's share, to people
  no earlier campaign had;
* transactional sends at ``--tps`` (10/s) through ``POST /api/v1/messages`` with an API
  key, on the fastest number (which keeps a 20 % reserve for them);
* status webhooks one per POST, as Meta mostly sends them (sent, delivered, and read for
  ``--read-fraction`` of messages), signed, to the web server;
* a warm restart of one worker every ``--restart-every-minutes``
  (WHATSBLAST_SOAK_RESTART_MINUTES, default 10): SIGTERM to its process group, a new
  worker once it has gone (the two workers take turns).

Per window of ``--window-minutes`` (WHATSBLAST_SOAK_WINDOW_MINUTES, default 5) it reports
the RSS of every long-lived process (its whole process tree), Redis ``used_memory``, the
hot tables' sizes, index sizes, live and dead tuples, the send rate of each number against
its target, the transactional API's latency (the call; and the call's start to the
simulator's receipt) and the webhook status lag (received to applied; Meta's timestamp to
applied), as percentiles. At the end running campaigns are cancelled, everything in
flight settles, and the table is checked against the simulator's records (nothing lost,
nothing sent twice, no second above a number's rate), and every series gets a verdict
(``tests.faults.soak_report``): flat, growing (with the reason where growth is by design),
or falling.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from delivery.engine.send_trace import (  # noqa: E402
    grant_seconds,
    grant_to_stamp,
    grants_read,
    percentiles_ms,
)
from delivery.simulator.records import ACCEPTED_OUTCOMES  # noqa: E402
from tests.faults import soak_report  # noqa: E402
from tests.faults.runner import (  # noqa: E402
    OPEN,
    Cluster,
    Plan,
    RemoteSimulator,
    Run,
    create_audience_campaign,
    create_number,
    rate_bound,
    sql_rows,
    start_simulator,
    verify,
    wait_webhooks_applied,
)
from tests.faults.services import short_tmpdir  # noqa: E402

# The tables every send and every callback writes: their growth is the soak's question.
HOT_TABLES = (
    "delivery_message",
    "webhooks_webhookevent",
    "webhooks_unmatchedstatus",
    "campaigns_contact",
    "campaigns_listmembership",
)
# Tables that keep every row by design (nothing prunes sent messages or contacts): their
# size follows the traffic, so their bytes per row is what must stay flat. Stored callbacks
# are deleted after their retention (seven minutes here): that table is judged
# whole, sizes included, once it has settled (``pruned_tables``).
KEPT_ROWS = "rows are kept (messages, contacts, unmatched statuses): judged per row"
# A window's callback lags are read this long after it ends (its last callbacks applied),
# well before the retention deletes its first ones.
LAG_READ_AFTER_S = 30.0
CAMPAIGN_PREFIX = "+4917"  # runner.create_audience_campaign's phones
TXN_PREFIX = "+5521"
TXN_REF_FIRST = 987_000_000  # valid Brazilian mobiles, as bench/transactional_latency.py
TXN_TEMPLATE = "soak_otp"


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


@dataclass
class SoakPlan:
    minutes: float = 60.0
    window_minutes: float = 5.0
    restart_every_minutes: float = 10.0
    rates: tuple[int, ...] = (40, 60, 80)
    concurrent: int = 2
    campaign_seconds: float = 120.0
    tps: float = 10.0
    reserve: float = 0.2
    read_fraction: float = 0.2
    workers: int = 2
    web_workers: int = 2
    flat_pct: float = 10.0
    sample_s: float = 0.0  # 0: a sixth of a window, within 5-30 s
    # Stored callbacks deleted this long after arrival (WEBHOOK_EVENT_RETENTION_HOURS): in
    # minutes the table reaches the steady size production reaches in 14 days, so the
    # hour's vacuums are those of a bounded table, not of one that only grows. Short enough
    # for the table to turn over eight times in the hour (its indexes settle only after a
    # few turnovers: ``pruned_tables``), long enough for a window's lags to be read (a
    # window, LAG_READ_AFTER_S and the purge's minute) before its first callbacks go.
    webhook_retention_minutes: float = 7.0

    @property
    def duration_s(self) -> float:
        return self.minutes * 60

    @property
    def window_s(self) -> float:
        return self.window_minutes * 60

    @property
    def windows(self) -> int:
        return int(self.duration_s // self.window_s)

    @property
    def sample_every_s(self) -> float:
        return self.sample_s or min(30.0, max(5.0, self.window_s / 6))


# --------------------------------------------------------------------------------------
# Load: campaigns kept running, transactional sends at a steady pace
# --------------------------------------------------------------------------------------


@dataclass
class NumberLoad:
    number: Any
    template: Any
    share_per_s: float
    running: list[Any] = field(default_factory=list)


class CampaignLoad:
    """Keeps ``concurrent`` campaigns running on every number, each to new people."""

    def __init__(self, plan: SoakPlan, numbers: list[NumberLoad]) -> None:
        self.plan = plan
        self.numbers = numbers
        self.all: list[Any] = []
        self.next_phone = 1
        self.launched_at: list[float] = []

    def top_up(self, *, first: bool = False) -> None:
        from delivery.campaigns.launch import campaign_start

        running_ids = [c.pk for n in self.numbers for c in n.running]
        done = {
            row[0]
            for row in sql_rows(
                "SELECT id FROM campaigns_campaign"
                " WHERE id = ANY(%s) AND status IN ('completed', 'cancelled')",
                [running_ids],
            )
        }
        for load in self.numbers:
            load.running = [c for c in load.running if c.pk not in done]
            while len(load.running) < self.plan.concurrent:
                size = int(load.share_per_s * self.plan.campaign_seconds)
                if first:
                    # Staggered: the first campaigns end at different times, so launches
                    # spread over the run instead of coming in waves.
                    size = size * (len(load.running) + 1) // self.plan.concurrent
                campaign = create_audience_campaign(
                    number=load.number,
                    template=load.template,
                    first_phone=self.next_phone,
                    recipients=size,
                    max_attempts=8,
                )
                self.next_phone += size
                campaign_start(campaign=campaign)
                load.running.append(campaign)
                self.all.append(campaign)
                self.launched_at.append(time.time())

    def cancel_running(self) -> int:
        from delivery.campaigns.lifecycle import LifecycleError, campaign_cancel

        cancelled = 0
        for load in self.numbers:
            for campaign in load.running:
                try:
                    campaign_cancel(campaign=campaign, reason="soak over")
                    cancelled += 1
                except LifecycleError:
                    pass  # completed meanwhile
            load.running = []
        return cancelled


class TransactionalLoad(threading.Thread):
    """POSTs ``/api/v1/messages`` at a steady pace with the API key; records every call."""

    def __init__(self, web: str, key: str, pnid: str, tps: float) -> None:
        super().__init__(name="soak-transactional", daemon=True)
        self.web, self.key, self.pnid, self.tps = web, key, pnid, tps
        self.calls: list[dict[str, Any]] = []  # wall start, seconds, status, to
        self.halt = threading.Event()

    def run(self) -> None:
        import requests

        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.key}"
        started = time.time()
        n = 0
        while not self.halt.is_set():
            due = started + n / self.tps
            self.halt.wait(max(0.0, due - time.time()))
            if self.halt.is_set():
                return
            to = f"{TXN_PREFIX}{TXN_REF_FIRST + n:09d}"
            at = time.time()
            try:
                status = session.post(
                    f"{self.web}/api/v1/messages",
                    json={
                        "phone_number_id": self.pnid,
                        "to": to,
                        "template": {
                            "name": TXN_TEMPLATE,
                            "language": "en_US",
                            "params": {"body": [str(n)]},
                        },
                    },
                    headers={"Idempotency-Key": f"soak-{n}"},
                    timeout=10,
                ).status_code
            except requests.RequestException as exc:
                status = type(exc).__name__
            self.calls.append({"at": at, "s": time.time() - at, "status": status, "to": to})
            n += 1


# --------------------------------------------------------------------------------------
# Samples of the gauges
# --------------------------------------------------------------------------------------


def _tree_rss_mb(pid: int) -> float | None:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / 1e6


def sample(run: Run, cluster: Cluster) -> dict[str, float]:
    """One reading of every gauge, flat names (``rss_mb.web``, ``tables.<t>.dead``)."""
    import redis as redis_lib

    values: dict[str, float] = {}
    for group in cluster.groups.values():
        for child in group.children:
            rss = _tree_rss_mb(child.process.pid)
            if rss is not None:
                values[f"rss_mb.{child.name}"] = round(rss, 1)
    conn = redis_lib.Redis.from_url(run.redis.url)
    memory = conn.info("memory")
    values["redis_used_mb"] = round(int(memory["used_memory"]) / 1e6, 2)
    # What used_memory is made of: the keys' own data, and the server's overhead (clients'
    # buffers, the keyspace's tables, scripts), so that a change can be placed.
    for figure in ("used_memory_dataset", "used_memory_overhead", "mem_clients_normal"):
        if figure in memory:
            values[f"redis.{figure}_mb"] = round(int(memory[figure]) / 1e6, 2)
    values["redis_keys"] = int(conn.dbsize())
    for prefix, (keys, size) in redis_memory_by_prefix(conn).items():
        values[f"redis_prefix.{prefix}.keys"] = keys
        values[f"redis_prefix.{prefix}.mb"] = round(size / 1e6, 3)
    values["load_1m"] = os.getloadavg()[0]
    # pg_stat_user_tables' tuple counts are the statistics collector's (they lag by up to
    # a second or so); the sizes are the files' own, indexes (pg_indexes_size) and TOAST
    # included in pg_total_relation_size.
    for name, live, dead, total, indexes in sql_rows(
        """
        SELECT relname, n_live_tup, n_dead_tup,
               pg_total_relation_size(relid), pg_indexes_size(relid)
          FROM pg_stat_user_tables WHERE relname = ANY(%s)
        """,
        [list(HOT_TABLES)],
    ):
        values[f"tables.{name}.live"] = live
        values[f"tables.{name}.dead"] = dead
        values[f"tables.{name}.total_mb"] = round(total / 1e6, 3)
        values[f"tables.{name}.indexes_mb"] = round(indexes / 1e6, 3)
    return soak_report.table_ratios(values)


# --------------------------------------------------------------------------------------
# Webhook lag, per window, in PostgreSQL
# --------------------------------------------------------------------------------------


def key_prefix(name: str) -> str:
    """A key's name up to its last ``:``, with the dots a window's dotted paths would split
    on replaced."""
    return (name.rsplit(":", 1)[0] if ":" in name else name).replace(".", "_")


def redis_memory_by_prefix(conn: Any, top: int = 10) -> dict[str, tuple[int, int]]:
    """The keys of each prefix and the bytes they hold (MEMORY USAGE), the ``top`` largest.

    Pipelined a thousand keys at a time: the soak's Redis holds some tens of thousands.
    """
    keys: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    batch: list[bytes] = []

    def measure() -> None:
        pipe = conn.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key)
        for key, size in zip(batch, pipe.execute(), strict=True):
            prefix = key_prefix(key.decode(errors="replace"))
            keys[prefix] += 1
            sizes[prefix] += int(size or 0)  # None: the key expired in between
        batch.clear()

    for key in conn.scan_iter(count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            measure()
    if batch:
        measure()
    return {prefix: (keys[prefix], size) for prefix, size in sizes.most_common(top)}


def over_rate_seconds(
    accepted: list[dict[str, Any]], rates: dict[str, int], start: float
) -> dict[str, list[tuple[int, int]]]:
    """Per number, the whole seconds (from the start) in which the simulator accepted more
    than the number's rate, with their counts: to set against the restarts' moments."""
    per_second: dict[str, Counter[int]] = {number: Counter() for number in rates}
    for r in accepted:
        if r["phone_number_id"] in per_second:
            per_second[r["phone_number_id"]][int(r["wall"] - start)] += 1
    return {
        number: sorted((s, n) for s, n in seconds.items() if n > rates[number])
        for number, seconds in per_second.items()
    }


def grants_report(
    accepted: list[dict[str, Any]], rates: dict[str, int], directory: Path
) -> dict[str, Any]:
    """Per number, the seconds counted at the grants (when the send log counted each send,
    in Redis's clock, from the send trace) instead of at the simulator's stamps; and the
    delay from grant to stamp.

    The send log bounds the grants; a second over the rate at the simulator whose grants
    were within it was made on the way (the workers' loops, the simulator's, on the cores
    the soak keeps loaded)."""
    grants = grants_read(directory)
    delays = grant_to_stamp(grants, ((r.get("callback_data") or "", r["wall"]) for r in accepted))
    return {
        "grants": len(grants),
        "matched": len(delays),
        "accepted": len(accepted),
        "numbers": grant_seconds(grants, rates),
        "to_stamp_ms": percentiles_ms(delays, (0.5, 0.99, 0.999, 1.0)),
    }


def webhook_lag_windows(
    plan: SoakPlan, start: float, windows: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """Status lag percentiles for the given windows of the callback's arrival.

    Read during the soak, each window soon after it ends: the retention deletes the stored
    callbacks seven minutes after they arrive.

    One status per POST, so one stored event is one status. Two lags: received -> applied
    (the applier's) and Meta's timestamp -> applied (the whole path from the status
    happening, in whole seconds as Meta stamps them). Computed where the rows are: an
    hour brings about a million events, too many to ship to Python for percentiles.
    percentile_disc is the nearest rank, as soak_report.percentile.
    """
    rows = sql_rows(
        """
        WITH lag AS (
            SELECT floor((extract(epoch FROM received_at) - %(start)s) / %(window)s)::int AS w,
                   extract(epoch FROM processed_at - received_at) AS applier_s,
                   extract(epoch FROM processed_at) - (convert_from(body, 'UTF8')::jsonb
                       #>> '{entry,0,changes,0,value,statuses,0,timestamp}')::bigint AS meta_s
              FROM webhooks_webhookevent
             WHERE processed_at IS NOT NULL
               AND received_at >= to_timestamp(%(start)s + %(first)s * %(window)s)
               AND received_at < to_timestamp(%(start)s + (%(last)s + 1) * %(window)s)
        )
        SELECT w, count(*),
               percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY applier_s),
               max(applier_s),
               percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY meta_s),
               max(meta_s)
          FROM lag WHERE w = ANY(%(windows)s) GROUP BY w
        """,
        {
            "start": start,
            "window": plan.window_s,
            "windows": list(windows),
            "first": min(windows),
            "last": max(windows),
        },
    )

    def figures(cuts: list[Any], top: Any, n: int) -> dict[str, float]:
        p50, p95, p99 = (round(float(c), 4) for c in cuts)
        return {"p50": p50, "p95": p95, "p99": p99, "max": round(float(top), 4), "n": n}

    return {
        w: {
            "webhook_lag_s": figures(applier, applier_max, n),
            "webhook_lag_meta_s": figures(meta, meta_max, n),
        }
        for w, n, applier, applier_max, meta, meta_max in rows
    }


# --------------------------------------------------------------------------------------
# The soak
# --------------------------------------------------------------------------------------


def soak(plan: SoakPlan, base_dir: Path) -> dict[str, Any]:
    # Every process as production runs it, DEBUG off (the fault runner's default). With
    # DEBUG on, Django keeps the last 9,000 queries (their SQL with the values) of every
    # connection: the hour of 2 Dec 2026, run that way, saw each worker grow over its
    # 20-minute life (216 -> 289 MB), as a dozen such logs filling would.
    retention_h = plan.webhook_retention_minutes / 60
    soak_plan = Plan(
        fault="soak",
        recipients=0,
        rate=0,
        long=False,
        extra_env={
            "WEBHOOK_EVENT_RETENTION_HOURS": f"{retention_h:.6f}",
        },
    )
    run = Run(soak_plan, base_dir)
    env = run.start_services()
    run.setup_django()

    from campaigns.models import Template
    from delivery.api.keys import api_key_create

    cluster = Cluster(run, env)
    samples: list[tuple[float, dict[str, float]]] = []
    restarts: list[dict[str, Any]] = []
    try:
        web = cluster.start_web(workers=plan.web_workers)
        sim = start_simulator(cluster, web, webhook_batch_size=1, read_fraction=plan.read_fraction)
        sim.configure(webhook_concurrency=32)
        numbers = []
        for index, rate in enumerate(plan.rates):
            txn = rate == max(plan.rates)
            reserve = plan.reserve if txn else 0.0
            number, template = create_number(
                sim=sim, index=index, rate=rate, tier="TIER_UNLIMITED", reserve=reserve
            )
            numbers.append(NumberLoad(number, template, share_per_s=rate * (1 - reserve)))
        txn_number = next(n.number for n in numbers if n.number.rate_per_second == max(plan.rates))
        Template.objects.create(
            account=txn_number.account, name=TXN_TEMPLATE, language="en_US", body_param_count=1
        )
        sim.add_template(name=TXN_TEMPLATE, language="en_US", body_params=1)
        _, key = api_key_create(
            name=f"soak-{uuid.uuid4().hex[:6]}", phone_number_ids=[txn_number.phone_number_id]
        )
        for index in range(plan.workers):
            cluster.start(
                f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance"
            )
        cluster.start("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the clock starts

        load = CampaignLoad(plan, numbers)
        start = time.time()
        load.top_up(first=True)
        run.log("soak started", campaigns=len(load.all))
        txn = TransactionalLoad(web, key, txn_number.phone_number_id, plan.tps)
        txn.start()
        end = start + plan.duration_s
        next_sample = start
        next_restart = start + plan.restart_every_minutes * 60
        victim = 0
        lags: dict[int, dict[str, Any]] = {}
        lags_read = 0  # windows whose lags have been read (a window may have no callback)
        while time.time() < end:
            cluster.supervise()
            load.top_up()
            now = time.time()
            if now >= next_restart:
                name = f"worker-{victim % plan.workers}"
                restart = cluster.restart_warm(name)
                restarts.append({"at_s": round(now - start, 1), **restart})
                run.log("worker restarted", **restart)
                victim += 1
                next_restart += plan.restart_every_minutes * 60
            if now >= next_sample:
                samples.append((now, sample(run, cluster)))
                next_sample += plan.sample_every_s
            readable = int((now - start - LAG_READ_AFTER_S) // plan.window_s)
            if lags_read < min(readable, plan.windows):
                lags.update(webhook_lag_windows(plan, start, [lags_read]))
                lags_read += 1
            time.sleep(max(0.0, min(1.0, end - time.time())))
        samples.append((end - 0.001, sample(run, cluster)))  # the last window's end
        txn.halt.set()
        txn.join(15)
        cancelled = load.cancel_running()
        run.log("soak over", campaigns=len(load.all), cancelled=cancelled)
        _wait_settled(cluster, numbers)
        wait_webhooks_applied(run, cluster, sim, load.all)
        unread = list(range(lags_read, plan.windows))
        if unread:
            lags.update(webhook_lag_windows(plan, start, unread))
        report = _report(plan, run, sim, load, numbers, txn, samples, start, lags)
        report["worker_restarts"] = restarts
        report["process_restarts_unplanned"] = dict(run.restarts)
        report["campaigns_cancelled_at_end"] = cancelled
    finally:
        cluster.stop()
        run.redis.stop()
        run.pg.stop()
    return report


def _wait_settled(cluster: Cluster, numbers: list[NumberLoad], timeout: float = 180.0) -> None:
    """Until no row of the soak's numbers is pending, in flight or in doubt."""
    ids = [n.number.pk for n in numbers]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cluster.supervise()
        open_rows = sql_rows(
            "SELECT count(*) FROM delivery_message WHERE phone_number_id = ANY(%s)"
            " AND status = ANY(%s)",
            [ids, list(OPEN)],
        )[0][0]
        if open_rows == 0:
            return
        time.sleep(1)
    raise RuntimeError(f"{open_rows} rows still open {timeout:.0f}s after the soak")


# Turnovers of the callback table (one retention's worth of rows replaced) before its
# indexes hold their size. The unique index on the body's hash takes its keys in random
# order while the purge deletes in arrival order: its pages lose fill until splits and the
# space vacuums free balance. bench/callback_index.py replays that churn in accelerated time
# (350,000 rows, the soak's vacuum thresholds): indexes +18 % in the second turnover, +4 %
# in the third, then +2 % and falling below 0.5 % a turnover by the tenth (61 -> 81 MB).
SETTLED_TURNOVERS = 3


def pruned_tables(plan: SoakPlan) -> dict[str, int]:
    """The callback table, with the first window in which it has settled: the one after
    the window in which it has turned over SETTLED_TURNOVERS times. Before that it fills,
    then its free space (from deletes, reused after a vacuum) and its indexes' fill have
    yet to reach the level they hold."""
    settled_after = SETTLED_TURNOVERS * plan.webhook_retention_minutes
    return {"webhooks_webhookevent": math.ceil(settled_after / plan.window_minutes)}


def _report(
    plan: SoakPlan,
    run: Run,
    sim: RemoteSimulator,
    load: CampaignLoad,
    numbers: list[NumberLoad],
    txn: TransactionalLoad,
    samples: list[tuple[float, dict[str, float]]],
    start: float,
    lags: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    import redis as redis_lib

    records = sim.rows()
    checks = verify(run, sim, load.all, None, records)
    accepted = [r for r in records if r["outcome"] in ACCEPTED_OUTCOMES]
    rates = {n.number.phone_number_id: n.number.rate_per_second for n in numbers}
    # Transactional: every call answered 202 reached the simulator exactly once.
    answered = {c["to"]: c for c in txn.calls if c["status"] == 202}
    txn_received: dict[str, list[float]] = {}
    for r in accepted:
        if r["to"].startswith(TXN_PREFIX):
            txn_received.setdefault(r["to"], []).append(r["wall"])
    span = {"start": start, "window_s": plan.window_s, "windows": plan.windows}
    sends = [
        (
            r["wall"],
            r["phone_number_id"],
            "transactional" if r["to"].startswith(TXN_PREFIX) else "campaign",
        )
        for r in accepted
    ]
    targets = {n.number.phone_number_id: n.share_per_s for n in numbers}
    windows = soak_report.window_rows(
        gauges=soak_report.gauge_windows(samples, **span),
        sends=soak_report.send_windows(sends, targets, **span),
        api_s=soak_report.event_windows(((c["at"], c["s"]) for c in answered.values()), **span),
        txn_to_sim_s=soak_report.event_windows(
            (
                (c["at"], min(txn_received[to]) - c["at"])
                for to, c in answered.items()
                if to in txn_received
            ),
            **span,
        ),  # fmt: skip
        lags=lags,
        window_s=plan.window_s,
    )
    rules = soak_report.soak_rules(
        windows, flat_pct=plan.flat_pct, kept_rows=KEPT_ROWS, pruned=pruned_tables(plan)
    )
    judged = soak_report.verdicts(windows, rules)
    for number in checks["numbers"]:
        number.pop("per_second", None)
    return {
        "scenario": "soak",
        "plan": asdict(plan),
        "windows": windows,
        "verdicts": judged,
        "summary": soak_report.summary(judged),
        "checks": checks,
        "campaigns": len(load.all),
        "transactional": {
            "calls": len(txn.calls),
            "answered_202": len(answered),
            "refused": dict(Counter(str(c["status"]) for c in txn.calls if c["status"] != 202)),
            "lost": sum(1 for to in answered if to not in txn_received),
            "duplicates": sum(1 for to in answered if len(txn_received.get(to, ())) > 1),
        },
        "rate_bounds": {number: rate_bound(rate) for number, rate in rates.items()},
        "seconds_over_rate": over_rate_seconds(accepted, rates, start),
        "grants": grants_report(accepted, rates, run.base_dir / "grants"),
        "redis_by_prefix": {
            prefix: {"keys": keys, "mb": round(size / 1e6, 3)}
            for prefix, (keys, size) in redis_memory_by_prefix(
                redis_lib.Redis.from_url(run.redis.url)
            ).items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=_env_float("WHATSBLAST_SOAK_MINUTES", 60))
    parser.add_argument(
        "--window-minutes", type=float, default=_env_float("WHATSBLAST_SOAK_WINDOW_MINUTES", 5)
    )
    parser.add_argument(
        "--restart-every-minutes",
        type=float,
        default=_env_float("WHATSBLAST_SOAK_RESTART_MINUTES", 10),
    )
    parser.add_argument("--rates", type=lambda s: tuple(int(x) for x in s.split(",")))
    parser.add_argument("--tps", type=float, default=10.0)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--campaign-seconds", type=float, default=120.0)
    parser.add_argument("--read-fraction", type=float, default=0.2)
    parser.add_argument("--flat-pct", type=float, default=10.0)
    parser.add_argument("--webhook-retention-minutes", type=float, default=7.0)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (kept)")
    args = parser.parse_args()
    plan = SoakPlan(
        minutes=args.minutes,
        window_minutes=args.window_minutes,
        restart_every_minutes=args.restart_every_minutes,
        tps=args.tps,
        concurrent=args.concurrent,
        campaign_seconds=args.campaign_seconds,
        read_fraction=args.read_fraction,
        flat_pct=args.flat_pct,
        webhook_retention_minutes=args.webhook_retention_minutes,
    )
    if args.rates:
        plan.rates = args.rates
    # A SIGTERM (an operator stopping the run) unwinds like Ctrl-C, so the cluster's
    # processes and private servers are stopped by the run's finally blocks, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = soak(plan, args.dir or short_tmpdir("wbs-"))
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
