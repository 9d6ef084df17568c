"""Moving instances through their steps until each waits, is deferred, or leaves.

Instances advance together, one step a round: every round reads once what its steps need
(the contacts, their zones, their open windows, the templates as they are now, Meta's
holds, each branch's condition over all who reach it) and then decides each instance in
Python. A step changes the instance and writes its history into the batch's ``Work``;
nothing reaches the database before ``Work.flush``, in the caller's transaction, so a
crash mid-batch leaves every instance where it was, to be taken again.

A wait that is reached starts: its due time is set (a delay from now, the next local time
of day in the person's zone, a timeout) and the instance parks. A wait whose due time has
come is over: a delay goes on to its next step, a wait for an event or a reply that timed
out goes to ``on_timeout``. (Events and replies end waits early: journeys.routing.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from campaigns.models import Contact
from delivery.marketing_holds import marketing_holds_until
from delivery.models import Message, ServiceWindow
from delivery.service_windows import SERVICE_WINDOW
from journeys.conditions import ConditionBatch, condition_text
from journeys.definition import (
    END,
    BranchStep,
    EmitStep,
    ExitStep,
    SendStep,
    SplitStep,
    Step,
    WaitStep,
    WindowCondition,
)
from journeys.models import ExitKind, HistoryKind
from journeys.running import RunningJourney
from journeys.sends import Fired, SendFacts, send_fire
from journeys.step_campaigns import step_template
from journeys.timing import draw, duration_text, local_text, next_local_time, person_zone
from journeys.work import Instance, Work

# A journey has at most this many steps and no cycle: no instance takes more rounds.
MAX_ROUNDS = 60


@dataclass
class AdvanceReport:
    steps: int = 0
    sent: int = 0
    parked: int = 0
    left: int = 0
    by_type: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def advance(
    instances: Sequence[Instance], journeys: dict[int, RunningJourney], work: Work
) -> AdvanceReport:
    """Run each active instance from its current step on (see the module's docstring)."""
    report = AdvanceReport()
    pending = [i for i in instances if i.active and i.journey_id in journeys]
    for _ in range(MAX_ROUNDS):
        if not pending:
            break
        facts = _facts(pending, journeys, work.now)
        branches = _branch_batches(pending, journeys, facts)
        moved: list[Instance] = []
        for instance in pending:
            journey = journeys[instance.journey_id]
            step = journey.definition.step(instance.step)
            if step is None:
                work.exit(
                    instance,
                    ExitKind.ERROR,
                    f"step {instance.step!r} is not in version {journey.version}",
                )
                report.left += 1
                continue
            report.steps += 1
            report.by_type[step.type] += 1
            outcome = _execute(step, instance, journey, facts, branches, work)
            if outcome is Fired.MOVED and instance.active:
                moved.append(instance)
            elif outcome is Fired.PARKED:
                report.parked += 1
            else:
                report.left += 1
        pending = moved
    for instance in pending:  # pragma: no cover - the definition's graph check forbids it
        work.exit(instance, ExitKind.ERROR, "took more steps than a journey has")
    report.sent = len(work.sends)
    return report


def _execute(
    step: Step,
    instance: Instance,
    journey: RunningJourney,
    facts: SendFacts,
    branches: dict[tuple[int, str], ConditionBatch],
    work: Work,
) -> Fired:
    if isinstance(step, SendStep):
        fired = send_fire(step=step, instance=instance, journey=journey, facts=facts, work=work)
        if fired is Fired.MOVED:
            return step_to(instance, step.next, work)
        return fired
    if isinstance(step, WaitStep):
        return _wait(step, instance, facts, journey, work)
    if isinstance(step, BranchStep):
        holds = branches[(journey.id, step.id)].holds(instance)
        target = step.then if holds else step.otherwise
        work.log(
            instance,
            HistoryKind.BRANCHED,
            f"{condition_text(step.condition)}: {'yes' if holds else 'no'} → {target}",
        )
        return step_to(instance, target, work)
    if isinstance(step, SplitStep):
        arm = split_arm(step, draw(instance.journey_id, instance.id, step.id) % 100)
        percent, target = step.arms[arm]
        work.log(
            instance, HistoryKind.BRANCHED, f"random split: arm {arm + 1} ({percent} %) → {target}"
        )
        return step_to(instance, target, work)
    if isinstance(step, EmitStep):
        work.log(instance, HistoryKind.EMITTED, step.event_type, event_type=step.event_type)
        return step_to(instance, step.next, work)
    assert isinstance(step, ExitStep)
    work.exit(instance, ExitKind.EXIT_STEP, step.reason)
    return Fired.LEFT


def split_arm(step: SplitStep, roll: int) -> int:
    """The arm a roll of 0-99 falls in: the arms' percents laid end to end."""
    total = 0
    for arm, (percent, _) in enumerate(step.arms):
        total += percent
        if roll < total:
            return arm
    return len(step.arms) - 1


def step_to(instance: Instance, target: str, work: Work) -> Fired:
    """On to ``target``, due now; the end of the journey when it is ``end``."""
    if target == END:
        instance.step = END
        work.exit(instance, ExitKind.COMPLETED, "completed")
        return Fired.LEFT
    instance.step = target
    instance.due_at = work.now
    instance.step_due_at = work.now
    instance.waiting_since = None
    instance.resumed.pop("deferred", None)
    work.touch(instance)
    return Fired.MOVED


def _wait(
    step: WaitStep, instance: Instance, facts: SendFacts, journey: RunningJourney, work: Work
) -> Fired:
    now = work.now
    if instance.waiting_since is None:
        zone = facts.zones.get(instance.contact_id, "UTC")
        due = wait_due(step, since=now, zone=zone)
        instance.waiting_since = now
        instance.due_at = due
        instance.step_due_at = due
        work.log(instance, HistoryKind.WAITING, wait_text(step, due, zone))
        return Fired.PARKED
    if step.waits_for_something:
        what = f"event {step.event}" if step.event else "reply"
        instance.resumed = {"how": "timeout", "at": now.isoformat()}
        work.log(
            instance,
            HistoryKind.RESUMED,
            f"no {what} within {duration_text(step.timeout_s)}: timed out",
        )
        return step_to(instance, step.on_timeout or step.next, work)
    work.log(instance, HistoryKind.RESUMED, "waited")
    return step_to(instance, step.next, work)


def wait_due(step: WaitStep, *, since: datetime, zone: str) -> datetime:
    """When a wait reached (or restarted) at ``since`` is over (or times out)."""
    if step.until is not None:
        return next_local_time(now=since, at=step.until, zone=zone, weekdays=step.until_weekdays)
    if step.waits_for_something:
        return since + timedelta(seconds=step.timeout_s)
    return since + timedelta(seconds=step.delay_s)


def wait_text(step: WaitStep, due: datetime, zone: str) -> str:
    if step.until is not None:
        return f"until {step.until:%H:%M} local: {local_text(due, zone)}"
    if step.waits_for_something:
        what = f"event {step.event}" if step.event else "a reply"
        return (
            f"for {what}, at most {duration_text(step.timeout_s)} (until {local_text(due, zone)})"  # noqa: E501
        )
    return f"{duration_text(step.delay_s)}, until {local_text(due, zone)}"


# --- what a round reads ----------------------------------------------------------------------


def _facts(
    instances: Sequence[Instance], journeys: dict[int, RunningJourney], now: datetime
) -> SendFacts:
    contact_ids = sorted({i.contact_id for i in instances})
    contacts = {
        c.pk: c
        for c in Contact.objects.filter(pk__in=contact_ids).only(
            "id", "phone", "user_id", "name", "attributes", "opted_out_at"
        )
    }
    zones: dict[int, str] = {}
    for instance in instances:
        contact = contacts.get(instance.contact_id)
        if contact is None or instance.contact_id in zones:
            continue
        definition = journeys[instance.journey_id].definition
        zones[instance.contact_id] = person_zone(
            phone=contact.phone,
            attributes=contact.attributes or {},
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )
    sending = [i for i in instances if isinstance(_step(i, journeys), SendStep)]
    templates = {}
    for journey_id, step_id in {(i.journey_id, i.step) for i in sending}:
        journey = journeys[journey_id]
        step = journey.definition.step(step_id)
        assert isinstance(step, SendStep)
        templates[(journey_id, step_id)] = step_template(journey.journey, step)
    return SendFacts(
        contacts=contacts,
        holds=marketing_holds_until((i.contact_id for i in sending), now=now),
        windows_open=_windows_open(instances, journeys, contacts, now),
        zones=zones,
        templates=templates,
        already=_messages_of([i.id for i in sending if i.id is not None]),
    )


def _messages_of(instance_ids: list[int]) -> dict[tuple[int, str], int]:
    """The messages these instances have, by (instance, step): through the unique
    (journey_instance_id, journey_step) index."""
    if not instance_ids:
        return {}
    rows = Message.objects.filter(journey_instance_id__in=instance_ids).values_list(
        "journey_instance_id", "journey_step", "id"
    )
    return {(int(i), str(step)): int(m) for i, step, m in rows if i is not None}


def _step(instance: Instance, journeys: dict[int, RunningJourney]) -> Step | None:
    return journeys[instance.journey_id].definition.step(instance.step)


def _needs_window(step: Step | None) -> bool:
    if isinstance(step, SendStep):
        return bool(step.window_text)
    return isinstance(step, BranchStep) and isinstance(step.condition, WindowCondition)


def _windows_open(
    instances: Sequence[Instance],
    journeys: dict[int, RunningJourney],
    contacts: dict[int, Contact],
    now: datetime,
) -> set[int]:
    """Contacts whose 24-hour window with their journey's number is open now."""
    by_number: dict[int, dict[str, int]] = defaultdict(dict)
    for instance in instances:
        contact = contacts.get(instance.contact_id)
        if contact is None or not _needs_window(_step(instance, journeys)):
            continue
        number = int(journeys[instance.journey_id].journey.phone_number_id)
        for user in (contact.phone, contact.user_id):
            if user:
                by_number[number][user] = contact.pk
    found: set[int] = set()
    for number, users in by_number.items():
        rows = ServiceWindow.objects.filter(
            phone_number_id=number, user__in=list(users), last_inbound_at__gte=now - SERVICE_WINDOW
        ).values_list("user", flat=True)
        found.update(users[user] for user in rows)
    return found


def _branch_batches(
    instances: Sequence[Instance], journeys: dict[int, RunningJourney], facts: SendFacts
) -> dict[tuple[int, str], ConditionBatch]:
    at_branch: dict[tuple[int, str], list[Instance]] = defaultdict(list)
    for instance in instances:
        if isinstance(_step(instance, journeys), BranchStep):
            at_branch[(instance.journey_id, instance.step)].append(instance)
    batches = {}
    for (journey_id, step_id), members in at_branch.items():
        step = journeys[journey_id].definition.step(step_id)
        assert isinstance(step, BranchStep)
        batches[(journey_id, step_id)] = ConditionBatch(
            step.condition, members, windows_open=facts.windows_open
        )
    return batches
