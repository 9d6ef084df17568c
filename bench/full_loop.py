"""The whole loop at Meta's pace: sends out, one status per POST back, applied.

Starts, as real processes: the Cloud API simulator (``--latency-ms``, one status per
webhook POST as Meta mostly sends them, ``--read-fraction`` of messages also read, up to
``--webhook-concurrency`` POSTs in flight, retrying a 503 as Meta does), the web process as
deploy/ runs it (gunicorn with deploy/gunicorn.conf.py, DEBUG off, JSON logs, group commit),
``--workers`` RQ workers (every queue: sends, the applier, maintenance) and the ticker. One
number at ``--rate`` sends a campaign of ``rate x --seconds`` recipients.

Prints one JSON object, every figure over wall-clock time:

* send rate: accepted sends / (last send - first send), and the wall time against the ideal;
* webhook POSTs: stored / (last - first), the busiest second, and how many were shed (503);
* status lag, per stored status: Meta's timestamp -> applied (whole seconds, as Meta stamps
  them) and received -> applied, p50 / p99 / max;
* backlog: messages accepted by Meta but without their `delivered` yet, at the last send
  and at its peak; time from the last send until every status is applied (drain);
* CPU per process kind (cores used over the run) and the load average.

    .venv/bin/python bench/full_loop.py --rate 500 [--seconds 30] [--workers 2]

Uses the database and Redis from DATABASE_URL/REDIS_URL (or the embedded ones) and leaves
its rows behind under names starting with "bench-loop".
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
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

django_setup()

import psutil  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    PhoneNumber,
    Template,
)
from delivery.campaigns.launch import campaign_start  # noqa: E402
from webhooks.models import WebhookEvent  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402

AWAITING = ("sending", "sent")  # accepted (or on its way) but not yet delivered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--web-threads", type=int, default=16)
    parser.add_argument("--read-fraction", type=float, default=0.5)
    parser.add_argument("--webhook-concurrency", type=int, default=64)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    hot_tables_vacuum()

    run = uuid.uuid4().hex[:8]
    secret = secrets.token_urlsafe(24)
    sim_port, web_port = free_port(), free_port()
    sim, web = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{web_port}"
    logs = Path(settings.DATA_DIR) / "bench-logs" / f"loop-{run}"
    env = process_env(WHATSAPP_APP_SECRET=secret)
    group = ProcessGroup(logs, env)
    # The web process as production runs it: DEBUG off, its own secret key, JSON logs.
    web_group = ProcessGroup(
        logs,
        {
            **env,
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1",
            "GUNICORN_BIND": f"127.0.0.1:{web_port}",
            "GUNICORN_WORKERS": str(args.web_workers),
            "GUNICORN_THREADS": str(args.web_threads),
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "WARNING",
            "PROMETHEUS_MULTIPROC_DIR": str(logs / "prometheus"),
        },
    )
    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
            "--callback-url", f"{web}/webhooks/whatsapp", f"--app-secret={secret}",
            "--webhook-batch-size", "1", "--read-fraction", str(args.read_fraction),
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        requests.post(
            f"{sim}/_sim/config", json={"webhook_concurrency": args.webhook_concurrency}, timeout=5
        ).raise_for_status()
        web_group.start("web", _gunicorn_args(), python=False)
        wait_for_http(f"{web}/healthz")
        campaign = _campaign(run, args, sim)
        for index in range(args.workers):
            group.manage(f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the clock starts
        result = _run(campaign, [group, web_group], args, sim, first_event)
    finally:
        group.stop()
        web_group.stop()
    print(json.dumps(result, indent=2))


def _gunicorn_args() -> list[str]:
    return [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "-c", str(ROOT / "deploy" / "gunicorn.conf.py"), "whatsblast.asgi",
    ]  # fmt: skip


def _campaign(run: str, args: argparse.Namespace, sim: str) -> Campaign:
    pnid = f"bench-loop-{run}"
    account = BusinessAccount.objects.create(
        waba_id=f"bench-loop-{run}", messaging_limit_tier="TIER_UNLIMITED"
    )
    number = PhoneNumber.objects.create(
        phone_number_id=pnid,
        display_phone_number="+15550001000",
        account=account,
        access_token="bench-token",  # noqa: S106 - simulator token
        rate_per_second=args.rate,
        transactional_reserve=0,
        api_base_url=sim,
    )
    for path, body in (
        ("numbers", {"phone_number_id": pnid, "access_token": "bench-token", "rate": args.rate}),
        ("templates", {"name": "bench_promo", "language": "en_US", "body_params": 1}),
    ):
        requests.post(f"{sim}/_sim/{path}", json=body, timeout=5).raise_for_status()
    template = Template.objects.create(
        account=account, name="bench_promo", language="en_US", body_param_count=1
    )
    size = int(args.rate * args.seconds)
    contact_list = bench_audience(f"bench-loop-{run}", size, phone_prefix="+4930", name_prefix="L")
    campaign = Campaign.objects.create(
        name=f"bench-loop-{run}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([contact_list])
    return campaign


def _run(
    campaign: Campaign,
    groups: list[ProcessGroup],
    args: argparse.Namespace,
    sim: str,
    first_event: int,
) -> dict[str, Any]:
    recipients = int(args.rate * args.seconds)
    cpu_start = _cpu(groups)
    load_start = os.getloadavg()[0]
    started = time.time()
    campaign_start(campaign=campaign)
    samples: list[tuple[float, int, int, int]] = []  # (t, accepted, awaiting, pending events)
    last_send_at: float | None = None
    drained_at: float | None = None
    deadline = time.monotonic() + args.seconds * 8 + 180
    while time.monotonic() < deadline:
        for group in groups:
            group.check()
        stats = requests.get(f"{sim}/_sim/stats", timeout=10).json()
        accepted = sum(int(v.get("accepted", 0)) for v in stats.get("per_number", {}).values())
        awaiting = campaign.messages.filter(status__in=AWAITING).count()
        pending = WebhookEvent.objects.filter(id__gt=first_event, status="pending").count()
        now = time.time()
        samples.append((now, accepted, awaiting, pending))
        if last_send_at is None and accepted >= recipients:
            last_send_at = now
        if (
            last_send_at is not None
            and awaiting == 0
            and pending == 0
            and int(stats["webhooks"].get("pending", 0)) == 0
        ):
            drained_at = now
            break
        time.sleep(0.5)
    if drained_at is None:
        raise SystemExit(
            "the loop did not drain in time: (t, accepted, awaiting, pending events) last "
            f"{samples[-1] if samples else None}, simulator {stats.get('webhooks')}"
        )
    cpu = {
        k: round(v / (drained_at - started), 2) for k, v in _cpu_delta(cpu_start, groups).items()
    }
    return _report(campaign, args, sim, first_event, samples, started, drained_at, cpu, load_start)


def _report(
    campaign: Campaign,
    args: argparse.Namespace,
    sim: str,
    first_event: int,
    samples: list[tuple[float, int, int, int]],
    started: float,
    drained_at: float,
    cpu: dict[str, float],
    load_start: float,
) -> dict[str, Any]:
    sends = sorted(r["wall"] for r in sim_accepted_records(sim))
    first_send, last_send = sends[0], sends[-1]
    events = list(
        WebhookEvent.objects.filter(id__gt=first_event).values_list(
            "received_at", "processed_at", "body"
        )
    )
    received = sorted(r.timestamp() for r, _, _ in events)
    meta_lag: list[float] = []
    ingest_lag: list[float] = []
    for received_at, processed_at, body in events:
        if processed_at is None:
            continue
        ingest_lag.append((processed_at - received_at).total_seconds())
        for entry in json.loads(bytes(body)).get("entry", []):
            for change in entry.get("changes", []):
                for status in change.get("value", {}).get("statuses", []):
                    stamp = datetime.fromtimestamp(int(status["timestamp"]), tz=UTC)
                    meta_lag.append((processed_at - stamp).total_seconds())
    stats = requests.get(f"{sim}/_sim/stats", timeout=10).json()["webhooks"]
    at_last_send = min(samples, key=lambda s: abs(s[0] - last_send))
    per_second = Counter(int(t) for t in received)
    final = Counter(campaign.messages.values_list("status", flat=True))
    return {
        "scenario": "full_loop",
        "rate": args.rate,
        "recipients": len(sends),
        "workers": args.workers,
        "web": f"{args.web_workers} gunicorn asgi (+{args.web_threads} threads for Django)",
        "latency_ms": args.latency_ms,
        "read_fraction": args.read_fraction,
        "send_rate": round((len(sends) - 1) / (last_send - first_send), 1),
        "send_wall_s": round(last_send - started, 2),
        "send_ideal_s": round(len(sends) / args.rate, 2),
        "webhook_posts": len(received),
        "webhook_posts_per_s": round(len(received) / (received[-1] - received[0]), 1),
        "webhook_busiest_second": max(per_second.values()),
        "webhook_posts_shed_503_or_failed": int(stats.get("posts_failed", 0)),
        "status_lag_meta_to_applied_s": _percentiles(meta_lag),
        "status_lag_received_to_applied_s": _percentiles(ingest_lag),
        "backlog_at_last_send": at_last_send[2],
        "pending_events_at_last_send": at_last_send[3],
        "backlog_peak": max(s[2] for s in samples),
        "drain_after_last_send_s": round(drained_at - last_send, 2),
        "final_statuses": dict(final),
        "cpu_cores": cpu,
        "load_average_1m": {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)},
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50": round(cut[49], 3),
        "p99": round(cut[98], 3),
        "max": round(ordered[-1], 3),
        "n": len(ordered),
    }


def _kind(child_name: str) -> str:
    return "worker" if child_name.startswith("worker") else child_name


def _cpu(groups: list[ProcessGroup]) -> dict[str, float]:
    """CPU seconds so far, per process kind (children included) and for PostgreSQL."""
    totals: Counter[str] = Counter()
    for child in (c for g in groups for c in g.children):
        try:
            proc = psutil.Process(child.process.pid)
            for p in [proc, *proc.children(recursive=True)]:
                t = p.cpu_times()
                totals[_kind(child.name)] += t.user + t.system
        except psutil.Error:
            continue
    for p in psutil.process_iter(["name"]):
        if (p.info["name"] or "").startswith(("postgres", "redis-server", "valkey-server")):
            try:
                t = p.cpu_times()
                key = "postgres" if p.info["name"].startswith("postgres") else "redis"
                totals[key] += t.user + t.system
            except psutil.Error:
                continue
    return dict(totals)


def _cpu_delta(before: dict[str, float], groups: list[ProcessGroup]) -> dict[str, float]:
    after = _cpu(groups)
    return {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in after}


if __name__ == "__main__":
    main()
