"""What a three-card carousel costs to send, against a one-parameter text template.

Starts the simulator (``--latency-ms``, default 250, checking every body as Meta does),
``--workers`` RQ workers and the ticker as real processes, and one number at ``--rate``
msg/s. Then, ``--rounds`` times in turn, launches a campaign of ``--recipients`` to a
one-parameter text template and one to pywa's published media-card carousel (three cards,
each with an image, a quick reply and a URL suffix read from the contact, plus three body
parameters), and waits for each to complete before the next starts. Prints one JSON
object, per kind:

* the workers' CPU (user + system, children included) over each campaign's life, idle
  polling included, per accepted send, and the ratio carousel / text from the same run;
* the launch's wall time (the params rendered in SQL for every recipient);
* each campaign's wall time from launch to its last send, and the worst of the rounds;
* sends the simulator refused (must be 0) and sends it counted twice (must be 0).

    .venv/bin/python bench/formats.py --recipients 4000 --rate 200 --rounds 2

Uses the database and Redis from DATABASE_URL/REDIS_URL (or the embedded ones) and leaves
its rows behind under campaign names starting with "bench-formats".
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from harness import django_setup, hot_tables_vacuum, process_env, sim_accepted_records

django_setup()

import psutil  # noqa: E402
import requests  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from campaigns.catalogue.components import components_parse  # noqa: E402
from campaigns.models import (  # noqa: E402
    BusinessAccount,
    Campaign,
    Contact,
    ContactList,
    ListMembership,
    PhoneNumber,
    Template,
)
from delivery.campaigns.launch import campaign_start  # noqa: E402
from whatsblast.core.processes import ProcessGroup, free_port, wait_for_http  # noqa: E402

LISTING = Path(__file__).resolve().parent.parent / "tests/fixtures/real/templates_listing"
CAROUSEL = json.loads((LISTING / "pywa_carousel_media_cards.json").read_text())
TEXT = [{"type": "BODY", "text": "Hello {{1}}, our sale starts today."}]
MAPPINGS: dict[str, dict[str, Any]] = {
    "text": {"body": {"1": {"field": "name"}}},
    "carousel": {
        "body": {"1": {"field": "name"}, "2": {"value": "30%"}, "3": {"field": "coupon"}},
        "cards": [
            {
                "header": {"value": f"https://cdn.example/plant-{n}.jpg"},
                "buttons": {"0": {"value": f"more-{n}"}, "1": {"field": f"sku{n}"}},
            }
            for n in range(3)
        ],
    },
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipients", type=int, default=4000)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=250)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    hot_tables_vacuum()
    run = uuid.uuid4().hex[:8]
    sim_port = free_port()
    sim = f"http://127.0.0.1:{sim_port}"
    group = ProcessGroup(settings.DATA_DIR / "bench-logs" / run, process_env())
    runs: dict[str, list[dict[str, float]]] = {"text": [], "carousel": []}
    try:
        group.manage(
            "simulator", "simulator", "--port", str(sim_port),
            "--latency-ms", str(args.latency_ms), "--jitter-ms", str(args.latency_ms / 5),
            "--no-pair-limit", "--record-bodies", "0",
        )  # fmt: skip
        wait_for_http(f"{sim}/_sim/health")
        number = _number(run, args, sim)
        templates = {kind: _template(number, kind, sim) for kind in MAPPINGS}
        for index in range(args.workers):
            group.manage(f"worker-{index}", "rqworker", "transactional", "campaigns", "maintenance")
        group.manage("ticker", "ticker", "--every", "1")
        time.sleep(3)  # workers up before the clock starts
        for round_ in range(args.rounds):
            for kind in MAPPINGS:
                runs[kind].append(_one(run, round_, kind, number, templates[kind], args, group))
        records = sim_accepted_records(sim)
        stats = requests.get(f"{sim}/_sim/stats", timeout=10).json()
        duplicates = requests.get(f"{sim}/_sim/duplicates", timeout=30).json()
    finally:
        group.stop()
    print(json.dumps(_report(runs, args, records, stats, duplicates), indent=2))


def _number(run: str, args: argparse.Namespace, sim: str) -> PhoneNumber:
    account = BusinessAccount.objects.create(
        waba_id=f"bench-formats-{run}", messaging_limit_tier="TIER_UNLIMITED"
    )
    number = PhoneNumber.objects.create(
        phone_number_id=f"bench-formats-{run}",
        display_phone_number="+15550000001",
        account=account,
        access_token="bench-token",  # noqa: S106 - simulator token
        rate_per_second=args.rate,
        transactional_reserve=0.0,
        api_base_url=sim,
    )
    requests.post(
        f"{sim}/_sim/numbers",
        json={"phone_number_id": number.phone_number_id, "access_token": "bench-token",
              "rate": args.rate},
        timeout=5,
    ).raise_for_status()  # fmt: skip
    return number


def _template(number: PhoneNumber, kind: str, sim: str) -> Template:
    components = CAROUSEL["components"] if kind == "carousel" else TEXT
    parsed = components_parse(components)
    name = f"bench_{kind}"
    requests.post(
        f"{sim}/_sim/templates",
        json={"name": name, "language": "en_US", "components": components},
        timeout=5,
    ).raise_for_status()
    return Template.objects.create(
        account=number.account, name=name, language="en_US", category="MARKETING",
        components=components, body_text=parsed.body_text,
        body_param_count=parsed.body_param_count, buttons=parsed.buttons, cards=parsed.cards,
    )  # fmt: skip


def _one(
    run: str,
    round_: int,
    kind: str,
    number: PhoneNumber,
    template: Template,
    args: argparse.Namespace,
    group: ProcessGroup,
) -> dict[str, float]:
    name = f"bench-formats-{run}-{kind}-{round_}"
    contact_list = ContactList.objects.create(name=name)
    first = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        (
            Contact(
                phone=f"+4930{first + i:010d}",
                name=f"B{i}",
                attributes={"coupon": f"C{i:06d}", **{f"sku{n}": f"S{i}-{n}" for n in range(3)}},
            )
            for i in range(args.recipients)
        ),
        batch_size=5000,
    )
    ListMembership.objects.bulk_create(
        (ListMembership(contact_list=contact_list, contact=c) for c in contacts), batch_size=5000
    )
    campaign = Campaign.objects.create(
        name=name, phone_number=number, template=template, param_mapping=MAPPINGS[kind]
    )
    campaign.lists.set([contact_list])
    cpu_before = _workers_cpu(group)
    started = time.time()
    campaign_start(campaign=campaign)
    launch_s = time.time() - started
    deadline = time.monotonic() + args.recipients / args.rate * 6 + 120
    while not Campaign.objects.filter(pk=campaign.pk, status="completed").exists():
        group.check()
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} did not complete in time")
        time.sleep(0.2)
    wall_s = time.time() - started
    sent = campaign.messages.filter(status="sent").count()  # type: ignore[attr-defined]
    return {
        "launch_s": launch_s,
        "wall_s": wall_s,
        "sent": sent,
        "workers_cpu_s": _workers_cpu(group) - cpu_before,
    }


def _workers_cpu(group: ProcessGroup) -> float:
    used = 0.0
    for child in group.children:
        if not child.name.startswith("worker"):
            continue
        try:
            proc = psutil.Process(child.process.pid)
            times = [p.cpu_times() for p in [proc, *proc.children(recursive=True)]]
        except psutil.Error:
            continue
        used += sum(t.user + t.system for t in times)
    return used


def _report(
    runs: dict[str, list[dict[str, float]]],
    args: argparse.Namespace,
    records: list[dict[str, Any]],
    stats: dict[str, Any],
    duplicates: Any,
) -> dict[str, Any]:
    kinds: dict[str, Any] = {}
    for kind, rounds in runs.items():
        sent = sum(r["sent"] for r in rounds)
        cpu = sum(r["workers_cpu_s"] for r in rounds)
        kinds[kind] = {
            "sent": sent,
            "workers_cpu_ms_per_send": round(1000 * cpu / sent, 3) if sent else None,
            "launch_s_worst": round(max(r["launch_s"] for r in rounds), 3),
            "wall_s_total": round(sum(r["wall_s"] for r in rounds), 1),
            "wall_s_worst": round(max(r["wall_s"] for r in rounds), 1),
            "ideal_wall_s": round(args.recipients / args.rate, 1),
        }
    text, carousel = (
        kinds["text"]["workers_cpu_ms_per_send"],
        kinds["carousel"]["workers_cpu_ms_per_send"],
    )
    refused = {
        k: v
        for k, v in (stats.get("by_outcome") or {}).items()
        if not str(k).startswith("accepted")
    }
    return {
        "scenario": "formats",
        "recipients_per_campaign": args.recipients,
        "rounds": args.rounds,
        "rate": args.rate,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "kinds": kinds,
        "carousel_over_text_cpu": round(carousel / text, 3) if text and carousel else None,
        "simulator_accepted": len(records),
        "simulator_refused": refused,
        "duplicates": sum(len(v) for v in duplicates.values())
        if isinstance(duplicates, dict)
        else duplicates,
    }


if __name__ == "__main__":
    main()
