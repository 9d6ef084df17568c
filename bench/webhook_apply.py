"""Statuses/s the webhook applier settles: batched (the real applier) vs one row at a time.

Inserts ``--messages`` N messages (with wamids) and N×3 statuses (sent, delivered, read for
each, shuffled so reads often come before delivered) stored as events of ``--per-event``
statuses, the shape Meta batches in. Half the statuses carry our callback data, half only
the wamid. ``--start sent`` leaves the rows as the engine's settlement does once Meta has
accepted the send (`sent`, ``sent_at`` set), which is how nearly every callback finds
them; ``--start sending`` (the default, as every figure before 4 Dec 2026, evening, was
taken) as if every callback raced the settlement. ``--pricing`` puts Meta's ``pricing``
object on each `sent` and on the `delivered` status, as v24 sends it (cloud-api.md 5.1).
``--sends-per-second`` stamps the messages as a campaign at that rate would be stamped (Meta
stamps whole seconds; the default, 1, gives every message a second of its own, as every
figure before 4 Dec 2026, evening). The report gives the share of the drain's row updates
that were HOT. Then:

- batched: ``webhooks.applier.events_drain`` (SKIP LOCKED batches, one guarded
  ``UPDATE … FROM unnest`` per batch), timed end to end including parsing; with
  ``--appliers N``, N drains at once in their own processes, as N RQ workers run them;
- one row at a time: the same events re-parsed, each status written by its own guarded
  UPDATE and commit (what a naive handler does per webhook), on a ``--baseline-fraction``
  of the events to keep it short.

Prints one JSON object. Everything the run inserted is deleted afterwards; run it against a
scratch database:

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/webhook_apply.py [--messages 20000]

``--profile FILE`` writes the batched drain's cProfile stats (``python -m pstats FILE``),
with the profiler's own overhead in the figures of that run.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import multiprocessing
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
django.setup()

from django.db import connection, connections, transaction  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402
from harness import hot_tables_vacuum  # noqa: E402

from campaigns.models import BusinessAccount, PhoneNumber  # noqa: E402
from delivery.messages import status_updates_apply  # noqa: E402
from delivery.models import Message  # noqa: E402
from webhooks.applier import events_drain  # noqa: E402
from webhooks.models import WebhookEvent  # noqa: E402
from webhooks.payloads import body_parse  # noqa: E402
from webhooks.statuses import statuses_reduce, statuses_resolve  # noqa: E402

KINDS = ("sent", "delivered", "read")


def messages_insert(number: PhoneNumber, count: int, tag: str, start: str) -> list[int]:
    """N messages in ``start`` (`sending` or `sent`), with wamids."""
    now = timezone.now()
    rows = [
        Message(
            phone_number=number,
            to=f"+1555{n:07d}",
            status=start,
            attempt=1,
            next_attempt_at=now,
            claimed_at=now,
            sent_at=now if start == "sent" else None,
            wamid=f"wamid.{tag}.{n}",
        )
        for n in range(1, count + 1)
    ]
    return [m.pk for m in Message.objects.bulk_create(rows, batch_size=5000)]


def events_insert(bodies: list[bytes]) -> None:
    """Stored as the endpoint stores them (pending), without waking an applier job."""
    WebhookEvent.objects.bulk_create(
        [WebhookEvent(body=b, body_sha256=hashlib.sha256(b).hexdigest()) for b in bodies],
        batch_size=500,
    )


PRICING = {"billable": True, "pricing_model": "PMP", "type": "regular", "category": "marketing"}


def events_build(
    ids: list[int],
    tag: str,
    per_event: int,
    seed: int,
    *,
    pricing: bool = False,
    sends_per_second: int = 1,
) -> list[bytes]:
    rng = random.Random(seed)
    items = []
    for n, message_id in enumerate(ids, start=1):
        base = 1_750_000_000 + n // sends_per_second
        for offset, kind in enumerate(KINDS):
            item = {
                "id": f"wamid.{tag}.{n}",
                "status": kind,
                "timestamp": str(base + offset * 5),
                "recipient_id": f"1555{n:07d}",
            }
            if n % 2:
                item["biz_opaque_callback_data"] = f"wb:{message_id}"
            if pricing and kind != "read":
                item["pricing"] = PRICING
            items.append(item)
    rng.shuffle(items)
    bodies = []
    for start in range(0, len(items), per_event):
        payload = {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "bench-waba",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {"phone_number_id": "bench-number"},
                                "statuses": items[start : start + per_event],
                            },
                        }
                    ],
                }
            ],
        }
        bodies.append(json.dumps(payload, separators=(",", ":")).encode())
    return bodies


def message_updates() -> tuple[int, int]:
    """delivery_message's (updates, HOT updates) so far, this backend's own flushed first
    (pending statistics reach the views only when a backend goes idle)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
            " WHERE relname = 'delivery_message'"
        )
        updates, hot = cursor.fetchone()
    return int(updates), int(hot)


def one_row_at_a_time(bodies: list[bytes]) -> tuple[int, float]:
    """What a per-webhook handler does: the same guarded UPDATE, one status per commit."""
    started = time.perf_counter()
    count = 0
    for body in bodies:
        for status in body_parse(json.loads(body)).statuses:
            with transaction.atomic():
                resolution = statuses_resolve([status])
                status_updates_apply(statuses_reduce(resolution.matched))
            count += 1
    return count, time.perf_counter() - started


def _drain_child(batch_events: int | None, results: Any) -> None:
    results.put(events_drain(budget_seconds=3600, batch_events=batch_events).messages_updated)


def drains_in_parallel(appliers: int, batch_events: int | None) -> int:
    """``appliers`` drains at once, each in its own process, as that many RQ workers each
    running an applier job take the events (SKIP LOCKED); messages updated by them all.

    The clock is the caller's: from before the first process starts to after the last
    has ended, so start-up and the slowest drain are in the figure.
    """
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    connections.close_all()  # each child opens its own
    children = [
        context.Process(target=_drain_child, args=(batch_events, results)) for _ in range(appliers)
    ]
    for child in children:
        child.start()
    updated = sum(results.get(timeout=3600) for _ in children)
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"an applier process exited {child.exitcode}")
    return updated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--per-event", type=int, default=100)
    parser.add_argument("--batch-events", type=int, default=None)
    parser.add_argument(
        "--appliers",
        type=int,
        default=1,
        help="drains running at once, each in its own process (as RQ workers run them)",
    )
    parser.add_argument(
        "--start",
        choices=("sending", "sent"),
        default="sending",
        help="the rows' status when the callbacks arrive (sent: settled by the engine first)",
    )
    parser.add_argument(
        "--pricing", action="store_true", help="Meta's pricing on sent and delivered"
    )
    parser.add_argument(
        "--sends-per-second",
        type=int,
        default=1,
        help="messages sent per second of Meta's timestamps (its statuses share that second)",
    )
    parser.add_argument("--baseline-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="profile the batched drain (cProfile) and write its stats to FILE",
    )
    args = parser.parse_args()
    hot_tables_vacuum()

    tag = f"bench{int(time.time())}"
    account = BusinessAccount.objects.create(waba_id=f"{tag}-waba")
    number = PhoneNumber.objects.create(
        phone_number_id=f"{tag}-number",
        display_phone_number="+15550000000",
        account=account,
        access_token="bench",
    )
    first_event = WebhookEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    try:
        ids = messages_insert(number, args.messages, tag, args.start)
        bodies = events_build(
            ids,
            tag,
            args.per_event,
            args.seed,
            pricing=args.pricing,
            sends_per_second=args.sends_per_second,
        )
        statuses = 3 * len(ids)
        events_insert(bodies)

        profiler = cProfile.Profile() if args.profile else None
        updates_before = message_updates()
        started = time.perf_counter()
        if args.appliers > 1:
            updated = drains_in_parallel(args.appliers, args.batch_events)
        else:
            if profiler is not None:
                profiler.enable()
            drained = events_drain(budget_seconds=3600, batch_events=args.batch_events)
            updated = drained.messages_updated
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.profile)
        batched_s = time.perf_counter() - started
        updates_after = message_updates()
        updates = updates_after[0] - updates_before[0]
        hot = updates_after[1] - updates_before[1]
        hot_fraction = round(hot / updates, 3) if updates else None
        counts = dict(
            WebhookEvent.objects.filter(id__gt=first_event)
            .values_list("status")
            .annotate(n=Count("id"))
        )
        final = dict(number.messages.values_list("status").annotate(n=Count("id")))

        # The baseline on fresh rows: back to the start, receipts and pricing cleared.
        number.messages.update(
            status=args.start,
            sent_at=timezone.now() if args.start == "sent" else None,
            delivered_at=None,
            read_at=None,
            pricing_category="",
            billable=None,
            pricing_model="",
            pricing_type="",
        )
        sample = bodies[: max(1, int(len(bodies) * args.baseline_fraction))]
        one_row_count, one_row_s = one_row_at_a_time(sample)

        batched_rate = statuses / batched_s
        one_row_rate = one_row_count / one_row_s
        print(
            json.dumps(
                {
                    "messages": len(ids),
                    "statuses": statuses,
                    "events": len(bodies),
                    "statuses_per_event": args.per_event,
                    "start": args.start,
                    "pricing": args.pricing,
                    "sends_per_second": args.sends_per_second,
                    "hot_updates": hot_fraction,
                    "batched": {
                        "seconds": round(batched_s, 3),
                        "statuses_per_s": round(batched_rate),
                        "appliers": args.appliers,
                        "messages_updated": updated,
                        "events": counts,
                        "final_statuses": final,
                    },
                    "one_row_at_a_time": {
                        "statuses": one_row_count,
                        "seconds": round(one_row_s, 3),
                        "statuses_per_s": round(one_row_rate),
                    },
                    "speedup": round(batched_rate / one_row_rate, 1),
                }
            )
        )
    finally:
        WebhookEvent.objects.filter(id__gt=first_event).delete()
        number.messages.all().delete()
        number.delete()
        account.delete()


if __name__ == "__main__":
    main()
