"""Helpers for the journeys' tests: a journey from a definition, events in, time moved."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from campaigns.catalogue.components import components_parse
from campaigns.models import PhoneNumber, Template
from journeys.events_in import events_record
from journeys.models import HistoryKind, Journey, JourneyHistory, JourneyInstance
from journeys.routing import events_route
from journeys.sweep import journeys_sweep
from journeys.versions import journey_create, journey_go_live

_names = itertools.count(1)


BODY = [{"type": "BODY", "text": "Hi {{1}}", "example": {"body_text": [["Ana"]]}}]


def template_on(
    number: PhoneNumber,
    name: str,
    *,
    sim: Any = None,
    components: list[dict[str, Any]] | None = None,
    category: str = "MARKETING",
    language: str = "en_US",
    status: str = "APPROVED",
) -> Template:
    """A template on the number's account as the catalogue sync stores it from Meta's
    ``components`` (a one-parameter body by default), and on the simulator when given."""
    components = components or BODY
    parsed = components_parse(components)
    template = Template.objects.create(
        account=number.account,
        name=name,
        language=language,
        category=category,
        status=status,
        components=components,
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_param_names=parsed.body_param_names,
        body_examples=parsed.body_examples,
        header_format=parsed.header_format,
        header_text=parsed.header_text,
        header_param=parsed.header_param,
        header_example=parsed.header_example,
        buttons=parsed.buttons,
    )
    if sim is not None:
        sim.add_template(
            name=name,
            language=language,
            components=components,
            waba_id=number.account.waba_id,
            category=category,
        )
    return template


def sends(sim: Any, phone_number_id: str) -> Counter[tuple[str, str]]:
    """Accepted sends at the simulator, by (recipient, template)."""
    return Counter(
        (row["to"], row["template"] or "")
        for row in sim.records()
        if row["phone_number_id"] == phone_number_id and row["wamid"]
    )


def journey_live(number: PhoneNumber, definition: dict[str, Any], name: str = "") -> Journey:
    journey = journey_create(
        name=name or f"journey {next(_names)}", phone_number=number, definition=definition
    )
    return journey_go_live(journey=journey)


def post(events: list[dict[str, Any]], *, now: datetime | None = None) -> dict[str, Any]:
    """Store events as the API does (no key), in batches of 1,000; the summed answer."""
    totals = {"stored": 0, "duplicates": 0, "rejected": 0}
    for start in range(0, len(events), 1000):
        result = events_record(
            api_key_id=None, items=events[start : start + 1000], idempotency_key=None, now=now
        )
        for key in totals:
            totals[key] += getattr(result, key)
    return totals


def run(now: datetime | None = None) -> None:
    """Route every stored event and fire every due step, at the journeys' clock ``now``."""
    events_route(now=now)
    journeys_sweep(now=now)


def history(instance: JourneyInstance) -> list[tuple[str, str, str]]:
    return [
        (h.kind, h.step, h.detail)
        for h in JourneyHistory.objects.filter(instance=instance).order_by("id")
    ]


def sent_history(journey: Journey, step: str) -> list[JourneyHistory]:
    return list(
        JourneyHistory.objects.filter(journey_id=journey.pk, step=step, kind=HistoryKind.SENT)
    )


# Every timestamp the journeys and their sends keep: moved back together, so the real
# clock reads as if that much time had passed ("travel"), for tests with real processes
# whose clock cannot be passed in.
_SHIFTED = {
    "journeys_journeyinstance": (
        "due_at", "step_due_at", "waiting_since", "entered_at", "exited_at",
    ),
    "journeys_journeyhistory": ("at",),
    "journeys_contactevent": ("occurred_at", "received_at", "routed_at"),
    "journeys_journey": ("live_since", "paused_at", "entry_checked_at"),
    "journeys_journeyrun": ("scheduled_for",),
    "delivery_message": (
        "next_attempt_at", "created_at", "sent_at", "delivered_at", "read_at", "failed_at",
        "claimed_at",
    ),
    "delivery_servicewindow": ("last_inbound_at",),
    "delivery_marketinghold": ("until", "since"),
    "campaigns_campaign": ("started_at", "completed_at", "first_completed_at", "scheduled_at"),
}  # fmt: skip


def travel(delta: timedelta) -> None:
    """Move every stored time back by ``delta``: now is ``delta`` later for all of them."""
    with connection.cursor() as cursor:
        for table, columns in _SHIFTED.items():
            sets = ", ".join(f"{c} = {c} - %(d)s" for c in columns)
            cursor.execute(f"UPDATE {table} SET {sets}", {"d": delta})


def now_plus(**kwargs: float) -> datetime:
    return timezone.now() + timedelta(**kwargs)
