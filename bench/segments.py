"""Segments, exclusions and the frequency cap at a million: what a marketer waits for.

Builds ``--contacts`` contacts with uploaded attributes (city, plan, total spent, a join
date) in set-based statements, a staff list of 1 %, and an earlier marketing campaign sent
to all of them in the last three days (launched, then its rows set delivered, read, failed
or sent, as webhooks leave them). Then, timed with wall clocks:

* the live count of a three-rule segment (city, a numeric attribute, not on a list), as
  the segment builder asks it, ``--repeat`` times: every run and the worst;
* an engagement rule (the earlier campaign's "delivered but not read") over its million
  messages, the same way;
* launches side by side in one run: a plain launch to the whole list, then a launch to
  the list ∪ a segment − the staff list with the cap, then the plain one again, each into
  the same table. The ratio is the featured launch over the mean of the two plain ones;
* the claim-time cap's cost: claiming 500-row batches of each launched campaign with and
  without the cap check, ms per 1,000 rows (every contact was sent in the last three
  days, so every check finds a send and skips: the cap's heaviest case).

Targets (issue 37): count ≤ 1 s, engagement ≤ 2 s, featured launch ≤ 1.5 × plain. Prints
one JSON object, with the machine's loop time (docs/performance.md).

    DATABASE_URL=postgres://…/wb_bench_segments .venv/bin/python bench/segments.py \
        [--contacts 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from typing import Any

from harness import django_setup

django_setup()

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
from delivery.campaigns.launch import campaign_start  # noqa: E402
from delivery.engine.frequency_cap import FrequencyCapGuard  # noqa: E402
from delivery.messages import claim_campaign_batch  # noqa: E402
from delivery.segments.services import segment_match, segment_save  # noqa: E402

CITIES = ["São Paulo", "Rio de Janeiro", "Belo Horizonte", "Curitiba", "Recife"] + [
    f"City {i}" for i in range(15)
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contacts", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--claim-batches", type=int, default=20)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    result: dict[str, Any] = {"scenario": "segments", "contacts": args.contacts}
    result["machine_loop_s"] = _machine_loop()
    run = uuid.uuid4().hex[:8]

    started = time.perf_counter()
    world = _setup(run, args.contacts)
    result["setup_s"] = round(time.perf_counter() - started, 1)

    three_rules = {
        "all": [
            {"field": "city", "op": "eq", "value": "São Paulo"},
            {"field": "total_spent", "op": "gte", "value": 500},
            {"not": {"list": world["staff"].name}},
        ]
    }
    engagement = {"campaign": world["earlier"].pk, "outcome": "delivered_not_read"}
    result["count_three_rules"] = _timed_counts(three_rules, args.repeat)
    result["count_engagement"] = _timed_counts(engagement, args.repeat)

    segment = segment_save(name=f"gold-{run}", rules={"field": "plan", "op": "eq", "value": "gold"})
    launches: dict[str, list[float]] = {"plain": [], "featured": []}
    campaigns: dict[str, Campaign] = {}
    for kind in ("plain", "featured", "plain"):
        campaign = _campaign(world, f"{kind}-{len(launches[kind])}-{run}")
        if kind == "featured":
            campaign.segments.set([segment])
            campaign.exclude_lists.set([world["staff"]])
            campaign.frequency_cap = "1/7d"
            campaign.save(update_fields=["frequency_cap"])
        started = time.perf_counter()
        summary = campaign_start(campaign=campaign)
        launches[kind].append(time.perf_counter() - started)
        campaigns.setdefault(kind, campaign)
        result.setdefault(f"{kind}_launch_rows", summary.recipients)
        result.setdefault(f"{kind}_launch_skipped", summary.skipped)
    plain = statistics.mean(launches["plain"])
    result["launch_s"] = {k: [round(v, 1) for v in vs] for k, vs in launches.items()}
    result["launch_ratio"] = round(launches["featured"][0] / plain, 3)
    result["cap_check"] = _claim_costs(campaigns, args.claim_batches)
    result["targets"] = {
        "count_three_rules_worst_le_1s": result["count_three_rules"]["worst_s"] <= 1.0,
        "count_engagement_worst_le_2s": result["count_engagement"]["worst_s"] <= 2.0,
        "launch_ratio_le_1_5": result["launch_ratio"] <= 1.5,
    }
    print(json.dumps(result, indent=2))


def _machine_loop() -> float:
    started = time.perf_counter()
    x = 0
    for i in range(20_000_000):
        x += i
    return round(time.perf_counter() - started, 2)


def _timed_counts(rules: dict[str, Any], repeat: int) -> dict[str, Any]:
    times, count = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        match = segment_match(rules, sample=10)
        times.append(time.perf_counter() - started)
        count = match.count
    return {
        "matched": count,
        "runs_s": [round(t, 3) for t in times],
        "worst_s": round(max(times), 3),
    }


def _setup(run: str, contacts: int) -> dict[str, Any]:
    account = BusinessAccount.objects.create(
        waba_id=f"segments-{run}", messaging_limit_tier="TIER_UNLIMITED"
    )
    number = PhoneNumber.objects.create(
        phone_number_id=f"segments-{run}",
        display_phone_number="+15550000000",
        account=account,
        access_token="bench-token",  # noqa: S106 - never sent: the bench only launches
        rate_per_second=1000,
        transactional_reserve=0.0,
        api_base_url="http://127.0.0.1:9",
    )
    template = Template.objects.create(
        account=account, name="bench_promo", language="en_US", body_param_count=1
    )
    everyone = ContactList.objects.create(name=f"everyone-{run}")
    staff = ContactList.objects.create(name=f"staff-{run}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM campaigns_contact")
        offset = cursor.fetchone()[0]
        # Attributes as an upload stores them: text values, numbers and dates included.
        cursor.execute(
            """
            INSERT INTO campaigns_contact (phone, name, attributes, created_at, updated_at)
            SELECT '+5511' || lpad((%(offset)s + g)::text, 9, '0'), 'S' || g,
                   jsonb_build_object(
                       'city', (%(cities)s::text[])[1 + (g * 7) %% 20],
                       'plan', (ARRAY['gold', 'silver', 'bronze'])[1 + g %% 3],
                       'total_spent', ((g::bigint * 7919) %% 1000)::text,
                       'joined', (date '2024-01-01' + (g %% 700))::text),
                   now(), now()
              FROM generate_series(1, %(n)s) AS g
            ON CONFLICT (phone) DO NOTHING
            """,
            {"offset": offset, "n": contacts, "cities": CITIES},
        )
        cursor.execute(
            """
            INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
            SELECT %(list)s, id, now() FROM campaigns_contact WHERE id > %(offset)s
            """,
            {"list": everyone.pk, "offset": offset},
        )
        cursor.execute(
            """
            INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
            SELECT %(list)s, id, now() FROM campaigns_contact
             WHERE id > %(offset)s AND id %% 100 = 0
            """,
            {"list": staff.pk, "offset": offset},
        )
    world = {"number": number, "template": template, "everyone": everyone, "staff": staff}
    earlier = _campaign(world, f"earlier-{run}")
    campaign_start(campaign=earlier)
    with connection.cursor() as cursor:
        # As the webhooks leave a sent campaign: 40 % delivered, 40 % read, 5 % failed,
        # the rest sent; all in the last three days.
        cursor.execute(
            """
            UPDATE delivery_message
               SET status = CASE WHEN id %% 20 < 8 THEN 'delivered'
                                 WHEN id %% 20 < 16 THEN 'read'
                                 WHEN id %% 20 = 16 THEN 'failed'
                                 ELSE 'sent' END,
                   sent_at = now() - (id %% 72) * interval '1 hour'
             WHERE campaign_id = %s
            """,
            [earlier.pk],
        )
        cursor.execute("ANALYZE delivery_message")
        cursor.execute("ANALYZE campaigns_contact")
        cursor.execute("ANALYZE campaigns_listmembership")
    Campaign.objects.filter(pk=earlier.pk).update(status=CampaignStatus.COMPLETED)
    world["earlier"] = earlier
    return world


def _campaign(world: dict[str, Any], name: str) -> Campaign:
    campaign = Campaign.objects.create(
        name=name,
        phone_number=world["number"],
        template=world["template"],
        param_mapping={"body": {"1": {"field": "name"}}},
    )
    campaign.lists.set([world["everyone"]])
    return campaign


def _claim_costs(campaigns: dict[str, Campaign], batches: int) -> dict[str, Any]:
    """ms per 1,000 claimed rows: the plain campaign's claim alone, the featured one's claim
    and cap check (which skips every row: each contact was sent in the last three days)."""
    out: dict[str, Any] = {}
    for kind, campaign in campaigns.items():
        guard = FrequencyCapGuard.for_campaign(campaign) if kind == "featured" else None
        rows = 0
        started = time.perf_counter()
        for _ in range(batches):
            claimed = claim_campaign_batch(campaign_id=campaign.pk, limit=500)
            rows += len(claimed)
            if guard is not None:
                guard.admit(claimed)
        elapsed = time.perf_counter() - started
        out[kind] = {
            "rows": rows,
            "capped": guard.capped if guard else 0,
            "ms_per_1000_rows": round(elapsed * 1000 / max(1, rows) * 1000, 1),
        }
    return out


if __name__ == "__main__":
    main()
