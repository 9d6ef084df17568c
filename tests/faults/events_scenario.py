"""Events out under faults: a campaign with a subscription, its receiver down for 60 s.

The issue's must-show scenario, run like the fault suite's others (``tests.faults.runner``:
its own PostgreSQL and Redis, the simulator, gunicorn taking the status webhooks, two RQ
send workers, the ticker) plus two ``manage.py events`` workers and a receiver (a thread of
this process, on a local port) that records every POST's raw body, signature header and
answer. A subscription to it for every event type is made before launch.

    .venv/bin/python -m tests.faults.events_scenario [--recipients 3000] [--rate 40]

The timeline (CI sizes: 3,000 recipients at 40 msg/s, about 75 s of sending, so the
campaign runs on both sides of the outage; the simulator reports sent, delivered and, for
half of them, read, each in its own webhook, so a message has two or three events):

1. At 10 % sent, the receiver's socket is closed (connection refused) for 30 s. In the
   middle of that, the send worker holding the campaign's slot is SIGKILLed (restarted 2 s
   later, as systemd would): its rows in flight go through lease expiry and settling, whose
   status changes are events too.
2. Then it answers 500 to every POST for 30 s (bodies and signatures still recorded).
3. Then it is healthy. Its first POST after that (the head of the backlog, a full batch) is
   held unanswered; the events worker that sent it is found by the connection's port and
   SIGKILLed, then the POST is answered 204 to nobody. That is the hardest moment for
   at-least-once: the receiver has the batch, the cursor has not moved, so the batch must
   come again, with the same event ids, from the other worker (a replacement starts 2 s
   later). A kill while the receiver is down would only interrupt a backoff.

The workers run with EVENTS_BACKOFF_MAX_S=2 (recovery within seconds of the receiver coming
back) and EVENTS_PAUSE_AFTER_S=900 (60 s of failures must not pause the subscription).

After the campaign completes, its webhooks are applied and the events drained (the
outbox empty and the cursor at max(seq)), it checks what the receiver got against
``delivery_event`` and the messages, and prints one JSON report (see ``events_check``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.faults.runner import (  # noqa: E402
    Cluster,
    Plan,
    Run,
    _start_workers,
    _stop_services,
    _wait_complete,
    _wait_progress,
    busy_campaign_worker,
    create_campaign,
    sql_rows,
    start_simulator,
    verify,
    wait_webhooks_applied,
)
from tests.faults.services import short_tmpdir  # noqa: E402

FAULT = "events_out"
EVENTS_WORKERS = ("events-0", "events-1")
DOWN_REFUSED_S = 30.0
DOWN_500_S = 30.0
# Sent/delivered/read as separate webhooks (Meta sends them seconds apart): each message
# has its own run of events, whose order is checked.
SIM_DELAYS = {"sent_delay_ms": 10, "delivered_delay_ms": 600, "read_delay_ms": 1500}
READ_FRACTION = 0.5
MESSAGE_RANK = {"message.sent": 1, "message.delivered": 2, "message.read": 3}
SIGNATURE_TOLERANCE_S = 3600


# --------------------------------------------------------------------------------------
# The receiver
# --------------------------------------------------------------------------------------


@dataclass
class Post:
    at: float  # time.monotonic() when its body was read
    body: bytes
    signature: str
    client_port: int
    status: int  # what it was answered: 204, 500 (0 while held)
    held: bool = False  # answered only after its sender was killed


@dataclass
class EventsReceiver:
    """Records every POST; ``mode`` is "ok" (204), "error" (500) or "down" (socket closed:
    connection refused). ``hold_next()`` holds the next POST unanswered until released."""

    port: int = 0
    mode: str = "ok"
    posts: list[Post] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _hold_armed: bool = False
    _held: Post | None = None
    _held_event: threading.Event = field(default_factory=threading.Event)
    _release: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self, mode: str = "ok") -> EventsReceiver:
        from delivery.events.signing import SIGNATURE_HEADER

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                post = Post(
                    at=time.monotonic(),
                    body=body,
                    signature=self.headers.get(SIGNATURE_HEADER, ""),
                    client_port=int(self.client_address[1]),
                    status=500 if receiver.mode == "error" else 204,
                )
                hold = False
                with receiver._lock:
                    receiver.posts.append(post)
                    if receiver._hold_armed and post.status == 204:
                        receiver._hold_armed = False
                        receiver._held = post
                        post.held, post.status, hold = True, 0, True
                if hold:
                    receiver._held_event.set()
                    receiver._release.wait(15)
                    post.status = 204
                try:
                    self.send_response(post.status)
                    self.end_headers()
                    if post.status >= 300:
                        self.wfile.write(b"receiver failing")
                except OSError:
                    pass  # the sender is gone (killed while its POST was held)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.mode = mode
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def down(self) -> None:
        """Close the socket: POSTs get connection refused until ``start`` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.mode = "down"

    def hold_next(self) -> None:
        with self._lock:
            self._hold_armed = True
            self._held = None
        self._held_event.clear()
        self._release.clear()

    def wait_held(self, timeout: float) -> Post | None:
        return self._held if self._held_event.wait(timeout) else None

    def release(self) -> None:
        self._release.set()

    def snapshot(self) -> list[Post]:
        with self._lock:
            return list(self.posts)


# --------------------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------------------


def build_plan(*, recipients: int | None, rate: int | None, long: bool) -> Plan:
    plan = Plan.build(FAULT, recipients=recipients, rate=rate, long=long)
    # Sending lasts longer than the outage (from 10 %, 60 s), so events are made before,
    # during and after it: 3,000 at 40 msg/s is about 75 s; --long, 50,000 at 200 msg/s.
    plan.rate = rate or (200 if long else 40)
    plan.recipients = recipients or (50_000 if long else 3000)
    plan.timeout_s_total = 1800.0 if long else 300.0
    plan.extra_env.update(
        {
            "EVENTS_BACKOFF_BASE_S": "0.5",
            "EVENTS_BACKOFF_MAX_S": "2",
            "EVENTS_PAUSE_AFTER_S": "900",
            "EVENTS_TIMEOUT_S": "5",
            # The receiver listens on this machine.
            "EVENTS_ALLOW_PRIVATE_URLS": "1",
        }
    )
    return plan


def _owner_of_port(cluster: Cluster, names: tuple[str, ...], port: int) -> str | None:
    """Which of the children ``names`` has a TCP connection from local port ``port``."""
    import psutil

    for name in names:
        child = cluster.child(name)
        if child is None or not child.alive():
            continue
        try:
            connections = psutil.Process(child.process.pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.laddr and c.laddr.port == port for c in connections):
            return name
    return None


def _sleep_supervised(cluster: Cluster, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        cluster.supervise()
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))


def _kill_send_worker(run: Run, cluster: Cluster, campaign: Any) -> dict[str, Any]:
    """SIGKILL the send worker holding the campaign's slot; start it again 2 s later."""
    deadline = time.monotonic() + 30
    victim = None
    while victim is None and time.monotonic() < deadline:
        victim = busy_campaign_worker(run.redis.url, cluster)
        if victim is None:
            time.sleep(0.05)
    if victim is None:
        raise RuntimeError("no send worker was running the campaign to kill")
    in_flight = sql_rows(
        "SELECT count(*) FROM delivery_message WHERE campaign_id = %s AND status = 'sending'",
        [campaign.pk],
    )[0][0]
    cluster.kill(victim, signal.SIGKILL)
    run.log("SIGKILL send worker", worker=victim, rows_sending=in_flight)
    time.sleep(2)  # systemd's RestartSec
    cluster.start(victim, *cluster.specs[victim][1])
    return {"worker": victim, "rows_sending_at_kill": in_flight}


def _kill_events_worker_mid_post(
    run: Run, cluster: Cluster, receiver: EventsReceiver
) -> dict[str, Any]:
    """Hold the next accepted POST, SIGKILL the events worker that sent it, answer it."""
    receiver.hold_next()
    held = receiver.wait_held(timeout=30)
    if held is None:
        raise RuntimeError("no events POST reached the receiver to hold")
    victim = None
    deadline = time.monotonic() + 3
    while victim is None and time.monotonic() < deadline:
        victim = _owner_of_port(cluster, EVENTS_WORKERS, held.client_port)
        if victim is None:
            time.sleep(0.02)
    if victim is None:
        receiver.release()
        raise RuntimeError(f"no events worker owns the held POST's port {held.client_port}")
    cluster.kill(victim, signal.SIGKILL)
    events_in_post = len(json.loads(held.body)["events"])
    run.log("SIGKILL events worker", worker=victim, events_in_held_post=events_in_post)
    receiver.release()  # answered 204 to a dead socket: received, never acknowledged
    # Its log, kept: the replacement's would overwrite it.
    log = run.base_dir / "logs" / "host-a" / f"{victim}.log"
    if log.exists():
        log.rename(log.with_suffix(".killed.log"))
    time.sleep(2)  # systemd's RestartSec
    cluster.start(victim, "events")
    return {"worker": victim, "events_in_held_post": events_in_post}


def _last_error(subscription_id: int) -> str:
    return str(
        sql_rows(
            "SELECT last_error FROM delivery_eventsubscription WHERE id = %s", [subscription_id]
        )[0][0]
    )[:120]


def _failures_logged(base_dir: Path) -> dict[str, Any]:
    """Failed deliveries the events workers logged, by kind (a killed worker's log kept),
    and the first error their loop logged, if any (PostgreSQL is never away here)."""
    counts: dict[str, Any] = Counter()
    first_loop_error = ""
    for log in sorted((base_dir / "logs" / "host-a").glob("events-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "delivery failed (ConnectionError" in line:
                counts["connection_refused"] += "refused" in line
                counts["connection_error"] += 1
            elif "delivery failed (HTTP 500" in line:
                counts["http_500"] += 1
            elif "events worker: database unavailable" in line:
                counts["worker_loop_errors"] += 1
                first_loop_error = first_loop_error or line[:300]
    return {**counts, "first_loop_error": first_loop_error}


def _events_state(subscription_id: int) -> tuple[int, int, int, int]:
    """(outbox rows, max seq, event rows, the subscription's cursor)."""
    row = sql_rows(
        """
        SELECT (SELECT count(*) FROM delivery_eventoutbox),
               (SELECT COALESCE(max(seq), 0) FROM delivery_event),
               (SELECT count(*) FROM delivery_event),
               (SELECT cursor FROM delivery_eventsubscription WHERE id = %s)
        """,
        [subscription_id],
    )[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def _wait_events_drained(
    run: Run, cluster: Cluster, subscription_id: int, *, timeout: float
) -> float:
    """Until the outbox is empty and the cursor is at max(seq), twice in a row; when."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        cluster.supervise()
        outbox, max_seq, _, cursor = _events_state(subscription_id)
        quiet = quiet + 1 if outbox == 0 and cursor == max_seq else 0
        if quiet >= 2:
            run.log("events drained", max_seq=max_seq)
            return time.monotonic()
        time.sleep(0.5)
    outbox, max_seq, _, cursor = _events_state(subscription_id)
    raise RuntimeError(
        f"events not drained after {timeout}s: outbox {outbox}, cursor {cursor} of {max_seq}"
    )


def scenario(plan: Plan, base_dir: Path) -> dict[str, Any]:
    run = Run(plan, base_dir)
    try:
        env = run.start_services()
        run.setup_django()
        cluster = Cluster(run, env)
    except BaseException:
        _stop_services(run)
        raise

    from django.test import override_settings

    from delivery.campaigns.launch import campaign_start
    from delivery.events.subscriptions import subscription_create

    receiver = EventsReceiver().start()
    result: dict[str, Any] = {}
    try:
        web = cluster.start_web()
        sim = start_simulator(cluster, web, webhook_batch_size=50, read_fraction=READ_FRACTION)
        sim.configure(webhook_batch_wait_ms=200, **SIM_DELAYS)
        campaign = create_campaign(
            sim=sim,
            index=0,
            rate=plan.rate,
            recipients=plan.recipients,
            max_attempts=plan.max_attempts,
            tier="TIER_UNLIMITED",
        )
        with override_settings(EVENTS_ALLOW_PRIVATE_URLS=True):  # a receiver on this machine
            subscription, secret = subscription_create(name="fault receiver", url=receiver.url)
        _start_workers(plan, cluster)
        for name in EVENTS_WORKERS:
            cluster.start(name, "events")
        cluster.start("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the clock starts
        run.log("launch", subscription=subscription.pk)
        send_started = time.time()
        campaign_start(campaign=campaign)

        _wait_progress(run, cluster, sim, int(plan.recipients * 0.1))
        outage_started = time.monotonic()
        receiver.down()
        run.log("receiver down (connection refused)", seconds=DOWN_REFUSED_S)
        _sleep_supervised(cluster, DOWN_REFUSED_S / 2)
        send_kill = _kill_send_worker(run, cluster, campaign)
        _sleep_supervised(cluster, outage_started + DOWN_REFUSED_S - time.monotonic())
        receiver.start(mode="error")
        run.log(
            "receiver answers 500",
            seconds=DOWN_500_S,
            last_error=_last_error(subscription.pk),
        )
        _sleep_supervised(cluster, outage_started + DOWN_REFUSED_S + DOWN_500_S - time.monotonic())
        outbox, backlog_seq, _, cursor_at_back = _events_state(subscription.pk)
        receiver.mode = "ok"
        back = time.monotonic()
        run.log(
            "receiver healthy",
            down_s=round(back - outage_started, 1),
            backlog_events=backlog_seq - cursor_at_back,
            outbox=outbox,
            last_error=_last_error(subscription.pk),
        )
        events_kill = _kill_events_worker_mid_post(run, cluster, receiver)

        _wait_complete(run, cluster, [campaign], timeout=plan.timeout_s_total)
        send_s = time.time() - send_started
        wait_webhooks_applied(run, cluster, sim, [campaign])
        drained_at = _wait_events_drained(run, cluster, subscription.pk, timeout=180)
        posts = receiver.snapshot()
        checks = events_check(
            posts,
            subscription_id=subscription.pk,
            secret=secret,
            campaign_id=campaign.pk,
        )
        accepted_at = [(p.at, p) for p in posts if p.status == 204]
        backlog_done = next(
            (
                at
                for at, post in accepted_at
                if at >= back
                and any(e["sequence"] >= backlog_seq for e in json.loads(post.body)["events"])
            ),
            None,
        )
        first_after = next((at for at, _ in accepted_at if at >= back), None)
        sends = verify(run, sim, [campaign], None)
        result = {
            "fault": FAULT,
            "recipients": plan.recipients,
            "rate": plan.rate,
            "send_s": round(send_s, 1),
            "receiver_down_s": round(back - outage_started, 1),
            "backlog_at_recovery": backlog_seq - cursor_at_back,
            # From the receiver's return: until the backlog it had then was taken, and
            # until everything (the rest of the campaign's events too) was.
            "backlog_drained_s": (
                round(backlog_done - back, 1) if backlog_done is not None else None
            ),
            "all_drained_s": round(drained_at - back, 1),
            "first_accepted_after_recovery_s": (
                round(first_after - back, 1) if first_after is not None else None
            ),
            "failures_logged": _failures_logged(run.base_dir),
            "send_worker_kill": send_kill,
            "events_worker_kill": events_kill,
            "events": checks,
            "sends": {k: v for k, v in sends.items() if k != "numbers"},
            "numbers": sends["numbers"],
            "process_restarts": dict(run.restarts),
            "timeline": run.events,
        }
    finally:
        receiver.down()
        receiver.release()
        cluster.stop()
        _stop_services(run)
    return result


# --------------------------------------------------------------------------------------
# The checks: what the receiver got against delivery_event and the messages
# --------------------------------------------------------------------------------------


def events_check(
    posts: list[Post], *, subscription_id: int, secret: str, campaign_id: int
) -> dict[str, Any]:
    """Figures for the test to assert on (each a count of what is wrong, or a total)."""
    from delivery.events.signing import signature_verify

    signatures_invalid = sum(
        1
        for p in posts
        if not signature_verify(
            secret=secret, header=p.signature, body=p.body, tolerance_s=SIGNATURE_TOLERANCE_S
        )
    )
    foreign_posts = sum(
        1 for p in posts if json.loads(p.body)["subscription_id"] != subscription_id
    )
    accepted = [p for p in posts if p.status == 204]
    # Every event received, in the order received; the first copy of each id.
    received: list[dict[str, Any]] = [e for p in accepted for e in json.loads(p.body)["events"]]
    canonical: dict[str, str] = {}
    copies: Counter[str] = Counter()
    conflicting = 0
    first: list[dict[str, Any]] = []
    for event in received:
        text = json.dumps(event, sort_keys=True)
        copies[event["id"]] += 1
        if event["id"] in canonical:
            conflicting += canonical[event["id"]] != text
            continue
        canonical[event["id"]] = text
        first.append(event)

    stored = {
        str(event_id): (seq, event_type, message_id)
        for event_id, seq, event_type, message_id in sql_rows(
            "SELECT event_id, seq, event_type, message_id FROM delivery_event"
        )
    }
    max_seq, seq_count = sql_rows("SELECT COALESCE(max(seq), 0), count(*) FROM delivery_event")[0]
    missing = set(stored) - set(canonical)
    invented = set(canonical) - set(stored)
    mismatched = sum(
        1 for e in first if e["id"] in stored and stored[e["id"]][:2] != (e["sequence"], e["type"])
    )
    sequences = [e["sequence"] for e in first]
    out_of_order = sum(1 for a, b in zip(sequences, sequences[1:], strict=False) if b <= a)

    # Per message: ascending sequence, and sent -> delivered -> read (each at most once).
    by_message: dict[int, list[dict[str, Any]]] = {}
    for event in first:
        if event["message_id"] is not None:
            by_message.setdefault(int(event["message_id"]), []).append(event)
    message_seq_disorder = 0
    message_status_disorder = 0
    for events in by_message.values():
        seqs = [e["sequence"] for e in events]
        message_seq_disorder += seqs != sorted(seqs)
        ranks = [MESSAGE_RANK[e["type"]] for e in events if e["type"] in MESSAGE_RANK]
        message_status_disorder += any(b <= a for a, b in zip(ranks, ranks[1:], strict=False))

    # Against the messages: an event for every message Meta accepted, the last one its
    # final status.
    statuses = dict(
        sql_rows(
            "SELECT id, status FROM delivery_message WHERE campaign_id = %s "
            "AND status IN ('sent', 'delivered', 'read')",
            [campaign_id],
        )
    )
    types = Counter(e["type"] for e in first)
    sent_events = Counter(int(e["message_id"]) for e in first if e["type"] == "message.sent")
    last_status = {
        mid: [e["type"] for e in events if e["type"].startswith("message.")][-1]
        for mid, events in by_message.items()
        if any(e["type"].startswith("message.") for e in events)
    }
    campaign_types = Counter(
        e["type"]
        for e in first
        if e["type"].startswith("campaign.") and e["data"].get("campaign_id") == campaign_id
    )
    return {
        "events_total": len(stored),
        "max_seq": int(max_seq),
        "seq_gaps": int(max_seq) - int(seq_count),
        "posts": len(posts),
        "posts_accepted": len(accepted),
        "posts_answered_500": sum(1 for p in posts if p.status == 500),
        "posts_held": sum(1 for p in posts if p.held),
        "events_received": len(received),
        "unique_events_received": len(canonical),
        "duplicate_events": sum(n - 1 for n in copies.values() if n > 1),
        "duplicated_ids": sum(1 for n in copies.values() if n > 1),
        "duplicates_differing": conflicting,
        "missing": len(missing),
        "missing_sample": sorted(missing)[:5],
        "invented": len(invented),
        "mismatched_with_stored": mismatched,
        "signatures_invalid": signatures_invalid,
        "foreign_posts": foreign_posts,
        "out_of_order": out_of_order,
        "messages_with_events": len(by_message),
        "message_seq_disorder": message_seq_disorder,
        "message_status_disorder": message_status_disorder,
        "messages_sent_or_beyond": len(statuses),
        "message_sent_events": sum(sent_events.values()),
        "messages_sent_twice": sum(1 for n in sent_events.values() if n > 1),
        "accepted_messages_without_sent_event": len(set(statuses) - set(sent_events)),
        "accepted_messages_without_event": len(set(statuses) - set(last_status)),
        "last_event_not_final_status": sum(
            1 for mid, status in statuses.items() if last_status.get(mid) != f"message.{status}"
        ),
        "by_type": dict(sorted(types.items())),
        "campaign_events": dict(campaign_types),
        "dead_letters": sql_rows("SELECT count(*) FROM delivery_eventdeadletter")[0][0],
        "subscription": dict(
            zip(
                ("active", "paused_reason", "cursor", "delivered_total"),
                sql_rows(
                    "SELECT active, paused_reason, cursor, delivered_total "
                    "FROM delivery_eventsubscription WHERE id = %s",
                    [subscription_id],
                )[0],
                strict=True,
            )
        ),
    }


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def run_events_out(
    *, base_dir: Path | None = None, long: bool = False, keep: bool = False
) -> dict[str, Any]:
    """Run the scenario in a fresh Python process; return its report."""
    own_dir = base_dir is None
    directory = base_dir or short_tmpdir()
    argv = [sys.executable, "-m", "tests.faults.events_scenario", "--dir", str(directory)]
    if long:
        argv.append("--long")
    try:
        out = subprocess.run(  # noqa: S603 - our own module
            argv, cwd=ROOT, check=False, stdout=subprocess.PIPE, text=True
        )
        if out.returncode != 0:
            raise RuntimeError(f"events scenario exited {out.returncode}: {out.stdout[-2000:]}")
        report: dict[str, Any] = json.loads(out.stdout)
        return report
    finally:
        if own_dir and not keep:
            shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipients", type=int, default=None)
    parser.add_argument("--rate", type=int, default=None)
    parser.add_argument(
        "--long",
        action="store_true",
        default=os.environ.get("WHATSBLAST_FAULTS_LONG") == "1",
        help="50,000 recipients at 200 msg/s (also WHATSBLAST_FAULTS_LONG=1)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="work directory (kept)")
    args = parser.parse_args()
    plan = build_plan(recipients=args.recipients, rate=args.rate, long=args.long)
    report = scenario(plan, args.dir or short_tmpdir())
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
