"""Events routed to journeys, in the order they were stored: entries, resets, exits, and
the waits they end.

One router at a time (a transaction-scoped advisory lock; a second one finds it taken and
leaves), so the events of one contact are applied in the order they came, whatever the
number of workers. A batch locks the active instances of the batch's contacts in the
journeys that care about its events (``FOR NO KEY UPDATE``, in id order: the sweep skips
them meanwhile, and one of its batches holding one makes the router wait for it, never the
other way round), applies every event in memory in order, and writes it all with the
events marked routed, in one transaction. For each event and each journey:

1. an **exit** event (``exits``) ends the contact's active instances, those of the
   event's key when the journey is keyed and the event carries the key (all of the
   contact's otherwise); their unsent messages are skipped;
2. a **wait for this event** (``for_event``) ends, early: the instance goes on to
   ``on_event``; a reply (``whatsapp.reply``, written by webhooks.inbound for each
   message a person sends) ends a wait for a reply on the journey's number, and keeps
   what was said for a branch;
3. the **entry** event: an active instance of the same key is reset (its properties are
   the new event's, its current wait starts over: a cart updated twice is reminded an
   hour after the last update), else a new instance starts at the first step, due now,
   unless the re-entry rule refuses it (``once``, ``after_days``), the journey is paused,
   or a keyed journey's event lacks the key: each refusal is counted on the journey.

One active instance per (journey, contact, key) is also a database constraint.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import Contact
from delivery.messages import journey_pending_skip
from journeys.advance import step_to, wait_due, wait_text
from journeys.definition import REPLY_EVENT, Definition, EventEntry, WaitStep
from journeys.migrate import instances_migrate
from journeys.models import ExitKind, HistoryKind, Journey, JourneyStatus
from journeys.running import RunningJourney, running_journeys
from journeys.timing import draw, person_zone
from journeys.work import INSTANCE_COLUMNS, Instance, Work, instances_from
from whatsblast.core.db import jsonb_value

ROUTE_BATCH = 1000
_ROUTER_LOCK = 0x57_42_4A_52  # "WBJR": one router at a time

_EVENTS_SQL = """
SELECT id, contact_id, name, properties, occurred_at
  FROM journeys_contactevent
 WHERE routed_at IS NULL
 ORDER BY id
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
"""

# The batch's contacts' active instances, and their past entries (for re-entry rules):
# selected by contact alone, the journeys picked out in Python. A journey that is new, or
# grew since PostgreSQL last counted the table, looks a few rows big to the planner: with
# ``AND journey_id = ANY(...)`` beside the contacts it read every row of the journey for
# each batch (0.2 s a batch at 64,000 rows: events came in at 5,000 a second and were
# routed at a few hundred); by contact it reads the batch's rows through
# journey_instance_contact_idx (tests/journeys/test_router_plans.py). Every active
# instance is in a live or paused journey, so nothing much is locked beyond the batch's.
_INSTANCES_SQL = f"""
SELECT {INSTANCE_COLUMNS}
  FROM journeys_journeyinstance
 WHERE state = 'active' AND contact_id = ANY(%(contacts)s)
 ORDER BY id
   FOR NO KEY UPDATE
"""  # noqa: S608 - constants only

_PAST_SQL = """
SELECT journey_id, contact_id, key, max(entered_at)
  FROM journeys_journeyinstance
 WHERE contact_id = ANY(%(contacts)s)
 GROUP BY journey_id, contact_id, key
"""

_ROUTED_SQL = "UPDATE journeys_contactevent SET routed_at = %s WHERE id = ANY(%s::bigint[])"


@dataclass(frozen=True)
class StoredEvent:
    id: int
    contact_id: int
    name: str
    properties: dict[str, Any]
    occurred_at: datetime


@dataclass
class RouteReport:
    events: int = 0
    entered: int = 0
    reset: int = 0
    exited: int = 0
    resumed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    left_over: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "events": self.events,
            "entered": self.entered,
            "reset": self.reset,
            "exited": self.exited,
            "resumed": self.resumed,
            "refused": dict(self.refused),
        }


def events_route(
    *,
    now: datetime | None = None,
    limit: int = ROUTE_BATCH,
    budget_s: float | None = None,
    step_aside: Callable[[], bool] | None = None,
) -> RouteReport:
    """Route stored events until none is left (or the budget is spent, or ``step_aside``
    says more urgent work waits; ``report.left_over`` then)."""
    report = RouteReport()
    started = time.monotonic()
    while True:
        taken = _batch(now or timezone.now(), limit, report)
        if taken < limit:
            return report
        out_of_time = budget_s is not None and time.monotonic() - started > budget_s
        if out_of_time or (step_aside is not None and step_aside()):
            report.left_over = True
            return report


def _batch(now: datetime, limit: int, report: RouteReport) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_ROUTER_LOCK])
        if not cursor.fetchone()[0]:
            return 0  # another router is at it
        cursor.execute(_EVENTS_SQL, {"limit": limit})
        events = [
            StoredEvent(int(i), int(c), str(n), _json(p), at)
            for i, c, n, p, at in cursor.fetchall()
        ]
        if not events:
            return 0
        journeys = running_journeys((JourneyStatus.LIVE, JourneyStatus.PAUSED))
        router = _Router(journeys, now)
        relevant = [e for e in events if router.cares(e.name)]
        if relevant:
            router.load(cursor, sorted({e.contact_id for e in relevant}))
            for event in relevant:
                router.apply(event)
            router.work.flush()
            router.late_exits_apply(cursor)
            router.refusals_save()
        cursor.execute(_ROUTED_SQL, [now, [e.id for e in events]])
    report.events += len(events)
    report.entered += router.entered
    report.reset += router.reset
    report.exited += router.exited
    report.resumed += router.resumed
    report.refused.update(router.refused_total)
    return len(events)


def _json(value: Any) -> dict[str, Any]:
    decoded = jsonb_value(value)
    return decoded if isinstance(decoded, dict) else {}


class _Router:
    """One batch's journeys, instances and changes."""

    def __init__(self, journeys: dict[int, RunningJourney], now: datetime) -> None:
        self.journeys = journeys
        self.now = now
        self.work = Work(now=now)
        self.entered = self.reset = self.exited = self.resumed = 0
        self.refused: dict[int, Counter[str]] = defaultdict(Counter)
        self.refused_total: Counter[str] = Counter()
        self.active: dict[tuple[int, int, str], Instance] = {}
        self.by_contact: dict[tuple[int, int], list[Instance]] = defaultdict(list)
        self.past: dict[tuple[int, int, str], datetime] = {}
        self.contacts: dict[int, Contact] = {}
        self.tests: dict[int, set[int]] = {}
        # Exit events, for instances that completed with a message still unsent.
        self.late_exits: list[tuple[int, int, str | None, str]] = []
        self._names = self._interest()

    def _interest(self) -> set[str]:
        names: set[str] = set()
        for journey in self.journeys.values():
            names |= _names(journey.definition)
        return names

    def cares(self, name: str) -> bool:
        return name in self._names

    def load(self, cursor: Any, contacts: list[int]) -> None:
        ids = sorted(self.journeys)
        cursor.execute(_INSTANCES_SQL, {"contacts": contacts})
        instances = [i for i in instances_from(cursor.fetchall()) if i.journey_id in self.journeys]
        if any(i.version > self.journeys[i.journey_id].version for i in instances):
            self.journeys = running_journeys((JourneyStatus.LIVE, JourneyStatus.PAUSED))
        for journey_id in {i.journey_id for i in instances}:
            mine = [i for i in instances if i.journey_id == journey_id]
            instances_migrate(mine, self.journeys[journey_id], self.work)
        for instance in instances:
            if instance.active:
                self._index(instance)
        entering = [j for j in ids if isinstance(self.journeys[j].definition.entry, EventEntry)]
        if entering:
            cursor.execute(_PAST_SQL, {"contacts": contacts})
            wanted = set(entering)
            self.past = {
                (int(j), int(c), str(k)): at for j, c, k, at in cursor.fetchall() if j in wanted
            }
            for journey in Journey.objects.filter(pk__in=entering).prefetch_related(
                "test_contacts"
            ):
                self.tests[journey.pk] = {c.pk for c in journey.test_contacts.all()}
        self.contacts = {
            c.pk: c
            for c in Contact.objects.filter(pk__in=contacts).only("id", "phone", "attributes")
        }

    def _index(self, instance: Instance) -> None:
        self.active[(instance.journey_id, instance.contact_id, instance.key)] = instance
        self.by_contact[(instance.journey_id, instance.contact_id)].append(instance)

    def _unindex(self, instance: Instance) -> None:
        self.active.pop((instance.journey_id, instance.contact_id, instance.key), None)
        siblings = self.by_contact[(instance.journey_id, instance.contact_id)]
        if instance in siblings:
            siblings.remove(instance)

    # --- one event ------------------------------------------------------------------------

    def apply(self, event: StoredEvent) -> None:
        for journey in self.journeys.values():
            definition = journey.definition
            if event.name not in _names(definition):
                continue
            key = _key_of(definition, event)
            mine = list(self.by_contact.get((journey.id, event.contact_id), ()))
            reasons = definition.exit_reasons(event.name)
            if reasons:
                for instance in mine:
                    if key is None or instance.key == key:
                        self._exit(instance, f"{reasons[0]} (event {event.name})")
                mine = list(self.by_contact.get((journey.id, event.contact_id), ()))
                self.late_exits.append(
                    (journey.id, event.contact_id, key, f"{reasons[0]} (event {event.name})")
                )
            for instance in mine:
                if key is None or not definition.key or instance.key == key:
                    self._maybe_resume(journey, instance, event)
            if isinstance(definition.entry, EventEntry) and definition.entry.event == event.name:
                self._enter(journey, event, key)

    def _exit(self, instance: Instance, reason: str) -> None:
        self.work.exit(instance, ExitKind.EXIT_EVENT, reason, skip_unsent=True)
        self._unindex(instance)
        self.exited += 1

    def _maybe_resume(
        self, journey: RunningJourney, instance: Instance, event: StoredEvent
    ) -> None:
        step = journey.definition.step(instance.step)
        if not isinstance(step, WaitStep) or instance.waiting_since is None:
            return
        if step.event and step.event == event.name:
            how: dict[str, Any] = {"how": "event", "event": event.name}
            detail = f"event {event.name} came"
        elif step.reply and event.name == REPLY_EVENT and _same_number(journey, event):
            how = {
                "how": "reply",
                "text": str(event.properties.get("text") or ""),
                "button": str(event.properties.get("button") or ""),
                "payload": str(event.properties.get("payload") or ""),
            }
            said = how["button"] or how["text"]
            detail = f"replied: {said[:100]!r}" if said else "replied"
        else:
            return
        how["at"] = self.now.isoformat()
        instance.resumed = how
        self.work.log(instance, HistoryKind.RESUMED, detail)
        step_to(instance, step.on_event or step.next, self.work)
        if not instance.active:
            self._unindex(instance)
        self.resumed += 1

    def _enter(self, journey: RunningJourney, event: StoredEvent, key: str | None) -> None:
        definition = journey.definition
        if journey.journey.status != JourneyStatus.LIVE:
            self._refuse(journey, "paused")
            return
        if definition.key and key is None:
            self._refuse(journey, "no key")
            return
        key = key or ""
        existing = self.active.get((journey.id, event.contact_id, key))
        if existing is not None:
            self._reset(journey, existing, event)
            return
        last = self.past.get((journey.id, event.contact_id, key))
        if last is not None and definition.re_entry == "once":
            self._refuse(journey, "once")
            return
        if (
            last is not None
            and definition.re_entry == "after_days"
            and self.now < last + timedelta(days=definition.re_entry_days)
        ):
            self._refuse(journey, "after_days")
            return
        test = event.contact_id in self.tests.get(journey.id, set())
        holdout = not test and draw(journey.id, event.contact_id) < round(
            definition.holdout_percent * 100
        )
        instance = Instance(
            id=None,
            journey_id=journey.id,
            contact_id=event.contact_id,
            version=journey.version,
            key=key,
            step=definition.first,
            entered_at=self.now,
            due_at=self.now,
            step_due_at=self.now,
            properties=dict(event.properties),
            holdout=holdout,
            test=test,
        )
        self.work.new.append(instance)
        note = " (held out: it sends nothing)" if holdout else ""
        self.work.log(instance, HistoryKind.ENTERED, f"event {event.name}{_key_text(key)}{note}")
        self._index(instance)
        self.past[(journey.id, event.contact_id, key)] = self.now
        self.entered += 1

    def _reset(self, journey: RunningJourney, instance: Instance, event: StoredEvent) -> None:
        instance.properties = dict(event.properties)
        step = journey.definition.step(instance.step)
        detail = f"event {event.name} again{_key_text(instance.key)}: its properties updated"
        if isinstance(step, WaitStep) and instance.waiting_since is not None:
            zone = self._zone(journey.definition, instance.contact_id)
            due = wait_due(step, since=self.now, zone=zone)
            instance.waiting_since = self.now
            instance.due_at = due
            instance.step_due_at = due
            detail += f"; the wait starts over: {wait_text(step, due, zone)}"
        self.work.log(instance, HistoryKind.RESET, detail)
        self.reset += 1

    def _zone(self, definition: Definition, contact_id: int) -> str:
        contact = self.contacts.get(contact_id)
        return person_zone(
            phone=contact.phone if contact else None,
            attributes=(contact.attributes or {}) if contact else {},
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )

    def _refuse(self, journey: RunningJourney, why: str) -> None:
        self.refused[journey.id][why] += 1
        self.refused_total[why] += 1

    def late_exits_apply(self, cursor: Any) -> None:
        """An exit event after an instance's last step: its messages not sent yet (waiting
        for the send window, a hold, the engine's queue) are skipped, as an active one's
        are: a reminder of a cart bought meanwhile does not go."""
        if not self.late_exits:
            return
        journeys, contacts, keys, reasons = zip(*self.late_exits, strict=True)
        cursor.execute(
            _COMPLETED_SQL,
            [list(journeys), list(contacts), list(keys), list(reasons)],
        )
        by_reason: dict[str, list[int]] = defaultdict(list)
        for instance_id, reason in cursor.fetchall():
            by_reason[str(reason)].append(int(instance_id))
        for reason, ids in by_reason.items():
            journey_pending_skip(instance_ids=ids, reason=f"{reason} before it was sent")

    def refusals_save(self) -> None:
        """Add this batch's refused entries to each journey's counts (one statement each)."""
        with connection.cursor() as cursor:
            for journey_id, counts in self.refused.items():
                for why, n in counts.items():
                    cursor.execute(_REFUSED_SQL, {"id": journey_id, "why": why, "n": n})


# Instances of the exit events' (journey, contact[, key]) that completed: the ones whose
# last message may still be waiting to go.
_COMPLETED_SQL = f"""
SELECT i.id, x.reason
  FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[])
       AS x(journey, contact, key, reason)
  JOIN journeys_journeyinstance AS i
    ON i.journey_id = x.journey AND i.contact_id = x.contact AND (x.key IS NULL OR i.key = x.key)
 WHERE i.state = 'exited' AND i.exit_kind = '{ExitKind.COMPLETED}'
"""  # noqa: S608 - a constant

_REFUSED_SQL = """
UPDATE journeys_journey
   SET entries_refused = jsonb_set(
           entries_refused, ARRAY[%(why)s],
           to_jsonb(coalesce((entries_refused ->> %(why)s)::bigint, 0) + %(n)s))
 WHERE id = %(id)s
"""


def _names(definition: Definition) -> set[str]:
    """The event names a journey reacts to."""
    names = {e.event for e in definition.exits}
    if isinstance(definition.entry, EventEntry):
        names.add(definition.entry.event)
    for step in definition.steps:
        if isinstance(step, WaitStep):
            if step.event:
                names.add(step.event)
            if step.reply:
                names.add(REPLY_EVENT)
    return names


def _key_of(definition: Definition, event: StoredEvent) -> str | None:
    """The event's value of the journey's key (as text), None when unkeyed or absent."""
    if not definition.key or definition.key not in event.properties:
        return None
    value = event.properties[definition.key]
    return (value if isinstance(value, str) else str(value))[:200]


def _key_text(key: str) -> str:
    return f" ({key})" if key else ""


def _same_number(journey: RunningJourney, event: StoredEvent) -> bool:
    """A reply counts for a journey when it came to the journey's number (or says none)."""
    number = event.properties.get("phone_number_id")
    return number is None or str(number) == str(journey.journey.phone_number.phone_number_id)
