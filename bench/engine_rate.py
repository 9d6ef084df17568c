"""The engine's real pace, measured at the simulator over the whole life of each campaign.

Starts the simulator (``--latency-ms``, default 250), ``--workers`` RQ workers and the
ticker as real processes, creates ``--numbers`` phone numbers at ``--rate`` msg/s each
(transactional reserve ``--reserve``, default 0), ``--campaigns`` campaigns per number
(weights ``--weights``, the later ones started ``--stagger-s`` apart), or one campaign over
a pool of all the numbers (``--pool``, with ``--pause-one-at`` pausing one number of the
pool for ``--pause-s`` seconds mid-run), launches them (the campaigns due at one moment
together in one commit, as the admin's "Launch the selected drafts together" does;
``--one-by-one`` launches each on its own) and reads every accepted send from
the simulator's records. Prints one JSON object. Every figure covers whole lives, idle
seconds included:

* per number: sends / (last send - first send), against its campaign share;
* per campaign: its wall time (launch to last send) against the ideal (recipients / share);
* the whole run: total sends / (last - first) against the sum of the numbers' shares, and
  its wall time against the ideal;
* the busiest calendar second and the busiest sliding one-second window of any number,
  and how many calendar seconds went over the number's rate;
* the same seconds counted at the grants (``grants``: when the send log counted each send, from
  the workers' send trace, ``delivery.engine.send_trace``) and the delay from a grant to the
  simulator's stamp: a simulator second over the rate whose grants were not comes from the
  way to the receiver, not from the pacing;
* the CPU seconds each process of the run used (simulator, workers, ticker);
* with several campaigns on a number: each one's share of the sends while all ran, against
  its weight, and how long a campaign started later took to reach its share.

    .venv/bin/python bench/engine_rate.py --numbers 10 --rate 80 --workers 2
    .venv/bin/python bench/engine_rate.py --numbers 1 --rate 80 --campaigns 3 --weights 1,2,3
    .venv/bin/python bench/engine_rate.py --numbers 4 --rate 80 --pool --pause-one-at 10

Uses the database and Redis from DATABASE_URL/REDIS_URL (or the embedded ones) and leaves
its rows behind under campaign names starting with "bench-rate".
"""

from __future__ import annotations

import argparse
import bisect
import json
import time
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness import (
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
from django.utils import timezone  # noqa: E402

from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    ContactList,
    PhoneNumber,
    Template,
)
from delivery.campaigns.launch import campaign_start, campaigns_start_together  # noqa: E402
from delivery.engine.send_trace import (  # noqa: E402
    grant_seconds,
    grant_to_stamp,
    grants_read,
    percentiles_ms,
)
from delivery.models import Message  # noqa: E402
from delivery.numbers import phone_number_pause, phone_number_resume  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=80)
    parser.add_argument("--numbers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20, help="each campaign's ideal length")
    parser.add_argument("--campaigns", type=int, default=1, help="campaigns per number")
    parser.add_argument("--weights", default="", help="comma-separated, one per campaign")
    parser.add_argument("--stagger-s", type=float, default=0.0)
    parser.add_argument("--pool", action="store_true", help="one campaign over all numbers")
    parser.add_argument("--pause-one-at", type=float, default=0.0)
    parser.add_argument("--pause-s", type=float, default=5.0)
    parser.add_argument("--reserve", type=float, default=0.0)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dump", default="", help="write the accepted sends (JSON) here")
    parser.add_argument(
        "--one-by-one",
        action="store_true",
        help="launch each campaign on its own (default: the ones due at once, together)",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    hot_tables_vacuum()

    run = uuid.uuid4().hex[:8]
    sim_port = free_port()
    sim = f"http://127.0.0.1:{sim_port}"
    logs = settings.DATA_DIR / "bench-logs" / run
    group = ProcessGroup(logs, process_env(WHATSBLAST_SEND_TRACE_DIR=str(logs / "grants")))
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        numbers = [_number(run, index, args, sim) for index in range(args.numbers)]
        plan = _campaigns(run, numbers, args)
        for index in range(args.workers):
            group.manage(f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the clock starts
        launch_started = time.time()
        launched = _launch(plan, args, numbers)
        launch_s = max(launched.values()) - launch_started - (args.campaigns - 1) * args.stagger_s
        peak_rss = _wait([c for c, _ in plan], group, args, numbers, launched)
        cpu = _cpu_seconds(group)
        result = _report(sim, plan, numbers, args, launched, peak_rss, launch_s)
        result["grants"] = _grants_report(sim_accepted_records(sim), numbers, logs / "grants")
        result["cpu_s"] = cpu
    finally:
        group.stop()
    print(json.dumps(result, indent=2))


def _share(number: PhoneNumber) -> float:
    return number.rate_per_second * (1 - number.transactional_reserve)


def _number(run: str, index: int, args: argparse.Namespace, sim: str) -> PhoneNumber:
    pnid = f"bench-{run}-{index}"
    waba = f"bench-{run}" if args.pool else f"bench-{run}-{index}"
    account, _ = BusinessAccount.objects.get_or_create(
        waba_id=waba, defaults={"messaging_limit_tier": "TIER_UNLIMITED"}
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
    return number


def _audience(name: str, size: int) -> ContactList:
    contact_list: ContactList = bench_audience(name, size, phone_prefix="+4930", name_prefix="B")
    return contact_list


def _campaigns(
    run: str, numbers: list[PhoneNumber], args: argparse.Namespace
) -> list[tuple[Campaign, float]]:
    """(campaign, its ideal share in msg/s) for every campaign of the run."""
    weights = [int(w) for w in args.weights.split(",") if w] or [1] * args.campaigns
    plan: list[tuple[Campaign, float]] = []
    if args.pool:
        share = sum(_share(n) for n in numbers)
        campaign = _campaign(run, "pool", numbers[0], int(share * args.seconds), 1)
        campaign.pool_numbers.set(numbers[1:])
        return [(campaign, share)]
    for number in numbers:
        total_weight = sum(weights[: args.campaigns])
        for index in range(args.campaigns):
            weight = weights[index]
            share = _share(number) * weight / total_weight
            size = int(share * args.seconds)
            campaign = _campaign(run, f"{number.pk}-{index}", number, size, weight)
            plan.append((campaign, share))
    return plan


def _campaign(run: str, tag: str, number: PhoneNumber, size: int, weight: int) -> Campaign:
    template, _ = Template.objects.get_or_create(
        account=number.account,
        name="bench_promo",
        language="en_US",
        defaults={"body_param_count": 1},
    )
    campaign = Campaign.objects.create(
        name=f"bench-rate-{run}-{tag}",
        phone_number=number,
        template=template,
        param_mapping={"body": {"1": {"field": "name"}}},
        share_weight=weight,
    )
    campaign.lists.set([_audience(f"bench-rate-{run}-{tag}", size)])
    return campaign


def _launch(
    plan: list[tuple[Campaign, float]], args: argparse.Namespace, numbers: list[PhoneNumber]
) -> dict[int, float]:
    """Launch every campaign (staggered per number when asked); wall time of each launch."""
    launched: dict[int, float] = {}
    by_slot: dict[int, list[Campaign]] = defaultdict(list)
    for index, (campaign, _) in enumerate(plan):
        by_slot[index % max(1, args.campaigns)].append(campaign)
    started = time.time()
    for slot in sorted(by_slot):
        wait = started + slot * args.stagger_s - time.time()
        if wait > 0:
            time.sleep(wait)
        group = by_slot[slot]
        if args.one_by_one or len(group) == 1:
            for campaign in group:
                campaign_start(campaign=campaign)
                launched[campaign.pk] = time.time()
        else:
            # As the admin's "Launch the selected drafts together": one commit starts them.
            campaigns_start_together(campaigns=group)
            at = time.time()
            launched.update({campaign.pk: at for campaign in group})
    return launched


def _wait(
    campaigns: list[Campaign],
    group: ProcessGroup,
    args: argparse.Namespace,
    numbers: list[PhoneNumber],
    launched: dict[int, float],
) -> float:
    deadline = time.monotonic() + args.seconds * 6 + 120
    peak = 0.0
    paused = resumed = False
    first = min(launched.values())
    while time.monotonic() < deadline:
        group.check()
        if args.pause_one_at and not paused and time.time() - first >= args.pause_one_at:
            until = timezone.now() + timedelta(seconds=args.pause_s)
            phone_number_pause(phone_number=numbers[-1], until=until, reason="bench pause")
            paused = True
        if paused and not resumed and time.time() - first >= args.pause_one_at + args.pause_s:
            phone_number_resume(phone_number=numbers[-1])
            resumed = True
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


def _cpu_seconds(group: ProcessGroup) -> dict[str, float]:
    """CPU (user + system) each process of the run has used so far, its children included."""
    used: dict[str, float] = {}
    for child in group.children:
        try:
            proc = psutil.Process(child.process.pid)
            times = [p.cpu_times() for p in [proc, *proc.children(recursive=True)]]
        except psutil.Error:
            continue
        used[child.name] = round(sum(t.user + t.system for t in times), 1)
    return used


def _busiest_window(times: list[float]) -> int:
    """Most sends in any sliding one-second window (times sorted)."""
    best = 0
    for i, t in enumerate(times):
        best = max(best, bisect.bisect_left(times, t + 1.0, lo=i) - i)
    return best


def _grants_report(
    rows: list[dict[str, Any]], numbers: list[PhoneNumber], directory: Path
) -> dict[str, Any]:
    """The seconds counted at the grants (when the send log counted each send) instead of at
    the simulator, and the delay from a grant to the simulator's stamp.

    A simulator second over the rate whose grants were not is the way to the receiver (the
    worker's loop, the network, the simulator's own loop on the same cores), not the pacing.
    """
    grants = grants_read(directory)
    per_number = grant_seconds(grants, {n.phone_number_id: n.rate_per_second for n in numbers})
    delays = grant_to_stamp(grants, ((r.get("callback_data") or "", r["wall"]) for r in rows))
    return {
        "grants": len(grants),
        "matched": len(delays),
        "max_second": max(n["max_second"] for n in per_number.values()),
        "seconds_over_rate": sum(n["seconds_over_rate"] for n in per_number.values()),
        "to_stamp_ms": percentiles_ms(delays, (0.5, 0.99, 1.0)),
    }


def _report(
    sim: str,
    plan: list[tuple[Campaign, float]],
    numbers: list[PhoneNumber],
    args: argparse.Namespace,
    launched: dict[int, float],
    peak_rss: float,
    launch_s: float,
) -> dict[str, Any]:
    rows = sim_accepted_records(sim)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(rows, f)
    campaign_of = dict(
        Message.objects.filter(campaign__in=[c for c, _ in plan]).values_list("pk", "campaign_id")
    )
    per_number: dict[str, list[float]] = defaultdict(list)
    per_campaign: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        per_number[row["phone_number_id"]].append(row["wall"])
        callback = row.get("callback_data") or ""
        if callback.startswith("wb:"):
            campaign_id = campaign_of.get(int(callback[3:]))
            if campaign_id is not None:
                per_campaign[campaign_id].append(row["wall"])
    numbers_report = []
    for number in numbers:
        times = sorted(per_number[number.phone_number_id])
        span = (times[-1] - times[0]) if len(times) > 1 else 0.0
        seconds = Counter(int(t) for t in times)
        share = _share(number)
        if args.pause_one_at and number is numbers[-1]:
            span -= args.pause_s  # the number was paused on purpose for this long
        achieved = (len(times) - 1) / span if span > 0 else 0.0
        numbers_report.append(
            {
                "phone_number_id": number.phone_number_id,
                "sends": len(times),
                "achieved": round(achieved, 1),
                "accuracy": round(achieved / share, 4) if share else None,
                "max_second": max(seconds.values(), default=0),
                "max_sliding_second": _busiest_window(times),
                "seconds_over_rate": sum(1 for n in seconds.values() if n > number.rate_per_second),
            }
        )
    campaigns_report = []
    for campaign, share in plan:
        times = sorted(per_campaign[campaign.pk])
        size = campaign.messages.count()
        wall = (times[-1] - launched[campaign.pk]) if times else 0.0
        campaigns_report.append(
            {
                "campaign": campaign.pk,
                "weight": campaign.share_weight,
                "recipients": size,
                "sent": len(times),
                "wall_s": round(wall, 2),
                "ideal_s": round(size / share, 2),
                "wall_vs_ideal": round(wall / (size / share), 4) if size else None,
                "first_send_after_s": round(times[0] - launched[campaign.pk], 2) if times else None,
            }
        )
    all_times = sorted(t for ts in per_number.values() for t in ts)
    total_share = sum(_share(n) for n in numbers)
    total_span = all_times[-1] - all_times[0] if len(all_times) > 1 else 0.0
    first_launch = min(launched.values())
    ideal_total = max(c["ideal_s"] for c in campaigns_report)
    result: dict[str, Any] = {
        "scenario": "engine_rate",
        "rate": args.rate,
        "numbers": args.numbers,
        "campaigns_per_number": args.campaigns,
        "pool": args.pool,
        "workers": args.workers,
        "latency_ms": args.latency_ms,
        "sends": len(all_times),
        "duplicates": _duplicates(sim),
        # Every answer the simulator gave, by outcome: a 130429 (throttled) is Meta refusing
        # a send the engine thought the rate allowed.
        "sim_outcomes": requests.get(f"{sim}/_sim/stats", timeout=10).json()["by_outcome"],
        "total_achieved": round((len(all_times) - 1) / total_span, 1) if total_span else 0.0,
        "total_share": total_share,
        "total_accuracy": round((len(all_times) - 1) / total_span / total_share, 4)
        if total_span
        else None,
        "wall_s": round(all_times[-1] - first_launch, 2) if all_times else None,
        # With --one-by-one the campaigns are launched one after another: the last launch's
        # end, after the first's (each launch inserts its audience's rows), is part of wall_s.
        # Launched together (the default) they start in one commit, and the time that
        # launch took is reported apart (launch_s) and is not part of wall_s.
        "launch_spread_s": round(max(launched.values()) - first_launch, 2),
        "launch_s": round(launch_s, 2),
        "ideal_wall_s": round(ideal_total + (args.campaigns - 1) * args.stagger_s, 2),
        "accuracy_min_number": min(n["accuracy"] or 0 for n in numbers_report),
        "max_second": max(n["max_second"] for n in numbers_report),
        "max_sliding_second": max(n["max_sliding_second"] for n in numbers_report),
        "seconds_over_rate": sum(n["seconds_over_rate"] for n in numbers_report),
        "worker_peak_rss_mb": round(peak_rss, 1),
        "per_number": numbers_report,
        "per_campaign": campaigns_report,
    }
    result["wall_vs_ideal"] = (
        round(result["wall_s"] / result["ideal_wall_s"], 4) if result["wall_s"] else None
    )
    if args.campaigns > 1:
        result["shares"] = _shares(plan, per_campaign, launched, args)
    if args.pool:
        result["pool_sticky"] = _sticky(rows, plan[0][0])
    return result


def _shares(
    plan: list[tuple[Campaign, float]],
    per_campaign: dict[int, list[float]],
    launched: dict[int, float],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """While every campaign of the number was sending: each one's share against its weight."""
    campaigns = [c for c, _ in plan[: args.campaigns]]
    starts = [min(per_campaign[c.pk]) for c in campaigns]
    ends = [max(per_campaign[c.pk]) for c in campaigns]
    lo, hi = max(starts) + 1.0, min(ends) - 1.0
    counts = {c.pk: sum(1 for t in per_campaign[c.pk] if lo <= t < hi) for c in campaigns}
    total = sum(counts.values()) or 1
    weights = sum(c.share_weight for c in campaigns)
    report: dict[str, Any] = {"window_s": round(max(0.0, hi - lo), 2), "campaigns": []}
    for campaign in campaigns:
        wanted = campaign.share_weight / weights
        got = counts[campaign.pk] / total
        # How long a campaign took to reach 90 % of its share (in one-second steps).
        times = per_campaign[campaign.pk]
        first = launched[campaign.pk]
        reached = None
        share_rate = plan[campaigns.index(campaign)][1]
        for second in range(0, 30):
            n = sum(1 for t in times if first + second <= t < first + second + 1)
            if n >= 0.9 * share_rate:
                reached = second + 1
                break
        report["campaigns"].append(
            {
                "campaign": campaign.pk,
                "weight": campaign.share_weight,
                "wanted": round(wanted, 4),
                "got": round(got, 4),
                "off_by": round(got / wanted - 1, 4),
                "share_reached_within_s": reached,
            }
        )
    return report


def _sticky(rows: list[dict[str, Any]], campaign: Campaign) -> dict[str, Any]:
    expected = dict(campaign.messages.values_list("to", "phone_number__phone_number_id"))
    sent_from: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        sent_from[row["to"]].add(row["phone_number_id"])
    wrong = sum(1 for to, froms in sent_from.items() if froms != {expected.get(to)})
    return {
        "recipients": len(expected),
        "reached": len(sent_from),
        "from_another_number": wrong,
        "from_two_numbers": sum(1 for f in sent_from.values() if len(f) > 1),
    }


def _duplicates(sim: str) -> int:
    duplicates = requests.get(f"{sim}/_sim/duplicates", timeout=30).json()
    return sum(len(v) for v in duplicates.values()) if isinstance(duplicates, dict) else 0


if __name__ == "__main__":
    main()
