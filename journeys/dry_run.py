"""Trying a journey before it goes live, and without waiting days.

**A dry run** walks a sample of contacts through the journey as if each entered now, in
their own zone: when each wait would end, when each send would go (a closed send window
moves it to the opening, a held person to the hold's end), which branch each would take
(a contact rule is decided for real; an event property from the example properties given;
what is only known later, a reply, an event, a message's fate, is shown as the path taken
when it does not happen). Nothing is written. For a date entry the sample is who has an
occurrence in the next days, each at their own instant.

**Test contacts** (``Journey.test_contacts``) can be entered by hand, whatever the entry
and the re-entry rule, and their waits skipped from the admin: the step after the wait
fires at the next pass, as it would at the wait's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from campaigns.models import Contact
from delivery.marketing_holds import marketing_holds_until
from journeys.advance import split_arm, wait_due
from journeys.conditions import condition_text, contacts_matching, property_matches
from journeys.definition import (
    END,
    BranchStep,
    ContactCondition,
    DateEntry,
    Definition,
    EmitStep,
    ExitStep,
    PropertyCondition,
    SendStep,
    SplitStep,
    WaitStep,
)
from journeys.entries import occurrences
from journeys.models import ExitKind, HistoryKind, InstanceState, Journey, JourneyInstance
from journeys.running import definition_of
from journeys.timing import draw, local_instant, local_text, person_zone, window_opening
from journeys.work import Instance, Work, instances_from

DRY_RUN_SAMPLE = 20


@dataclass(frozen=True)
class DryStep:
    step: str
    what: str
    at: datetime | None
    local: str
    note: str = ""


@dataclass
class DryPerson:
    contact: Contact
    zone: str
    enters_at: datetime
    steps: list[DryStep] = field(default_factory=list)


def journey_dry_run(
    journey: Journey,
    *,
    contacts: Sequence[Contact] = (),
    properties: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> list[DryPerson]:
    """Each contact's way through the journey's current version (see the module)."""
    now = now or timezone.now()
    definition = definition_of(journey.pk, journey.version)
    arrivals: list[tuple[Contact, datetime]] = [(c, now) for c in contacts]
    if isinstance(definition.entry, DateEntry) and not contacts:
        arrivals = _date_sample(definition, now)
    if not arrivals:
        return []
    ids = [c.pk for c, _ in arrivals]
    matching = {
        step.id: contacts_matching(step.condition.rules, ids)
        for step in definition.steps
        if isinstance(step, BranchStep) and isinstance(step.condition, ContactCondition)
    }
    holds = marketing_holds_until(ids, now=now)
    people = []
    for contact, enters_at in arrivals:
        zone = person_zone(
            phone=contact.phone,
            attributes=contact.attributes or {},
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )
        person = DryPerson(contact, zone, enters_at)
        _walk(journey, definition, person, properties or {}, matching, holds)
        people.append(person)
    return people


def _walk(
    journey: Journey,
    definition: Definition,
    person: DryPerson,
    properties: dict[str, Any],
    matching: dict[str, set[int]],
    holds: dict[int, datetime],
) -> None:
    at = person.enters_at
    step_id = definition.first
    zone = person.zone
    for _ in range(len(definition.steps) + 1):
        if step_id == END:
            person.steps.append(DryStep(END, "completes", at, local_text(at, zone)))
            return
        step = definition.step(step_id)
        if step is None:  # pragma: no cover - a checked definition names only its steps
            return
        if isinstance(step, WaitStep):
            due = wait_due(step, since=at, zone=zone)
            what = "waits"
            note = ""
            if step.waits_for_something:
                what = f"waits for {'event ' + step.event if step.event else 'a reply'}"
                note = f"if it comes: {step.on_event or step.next}; shown: no answer"
                step_id = step.on_timeout or step.next
            else:
                step_id = step.next
            person.steps.append(DryStep(step.id, what, due, local_text(due, zone), note))
            at = due
        elif isinstance(step, SendStep):
            opening = window_opening(definition.window, zone, at)
            held = holds.get(person.contact.pk)
            note = ""
            if held is not None and held > opening:
                opening, note = held, "held by Meta's per-user marketing limit (131049)"
            elif opening > at:
                note = f"outside the window {definition.window}: at its opening"
            if person.contact.opted_out_at is not None:
                person.steps.append(
                    DryStep(step.id, "skipped: opted out", at, local_text(at, zone))
                )
                return
            person.steps.append(
                DryStep(step.id, f"sends {step.template}", opening, local_text(opening, zone), note)
            )
            at = opening
            step_id = step.next
        elif isinstance(step, BranchStep):
            condition = step.condition
            if isinstance(condition, ContactCondition):
                holds_now, note = person.contact.pk in matching.get(step.id, set()), ""
            elif isinstance(condition, PropertyCondition):
                holds_now, note = property_matches(condition, properties), "from the example"
            else:
                holds_now, note = False, "known only then: shown as no"
            step_id = step.then if holds_now else step.otherwise
            answer = "yes" if holds_now else "no"
            person.steps.append(
                DryStep(
                    step.id,
                    f"{condition_text(condition)}: {answer} → {step_id}",
                    at,
                    local_text(at, zone),
                    note,
                )  # noqa: E501
            )
        elif isinstance(step, SplitStep):
            arm = split_arm(step, draw(journey.pk, person.contact.pk, step.id) % 100)
            step_id = step.arms[arm][1]
            person.steps.append(
                DryStep(step.id, f"split: arm {arm + 1} → {step_id}", at, local_text(at, zone))
            )  # noqa: E501
        elif isinstance(step, EmitStep):
            person.steps.append(
                DryStep(step.id, f"sends out {step.event_type}", at, local_text(at, zone))
            )  # noqa: E501
            step_id = step.next
        else:
            assert isinstance(step, ExitStep)
            person.steps.append(DryStep(step.id, f"exits: {step.reason}", at, local_text(at, zone)))
            return


def _date_sample(definition: Definition, now: datetime) -> list[tuple[Contact, datetime]]:
    """Who a date entry would enter over the next days, at their instants."""
    entry = definition.entry
    assert isinstance(entry, DateEntry)
    found: list[tuple[Contact, datetime]] = []
    horizon = now + timedelta(days=7)
    for contact in Contact.objects.filter(**{f"attributes__{entry.field}__isnull": False}).order_by(
        "pk"
    )[:5000]:
        zone = person_zone(
            phone=contact.phone,
            attributes=contact.attributes or {},
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )
        for day in occurrences((contact.attributes or {}).get(entry.field), entry, now.date()):
            instant = local_instant(day, entry.at, zone)
            if now <= instant < horizon:
                found.append((contact, instant))
        if len(found) >= DRY_RUN_SAMPLE:
            break
    return sorted(found, key=lambda pair: pair[1])[:DRY_RUN_SAMPLE]


# --- test contacts ----------------------------------------------------------------------------


class TestContactError(ValueError):
    """Only a journey's test contacts are entered by hand and have their waits skipped."""

    __test__ = False  # a name pytest would otherwise collect


def journey_test_contact_add(*, journey: Journey, contact: Contact) -> None:
    """Make ``contact`` one of the journey's test contacts."""
    journey.test_contacts.add(contact)


def journey_test_contact_remove(*, journey: Journey, contact: Contact) -> None:
    """No longer a test contact: their instances stay what they are (marked test)."""
    journey.test_contacts.remove(contact)


def journey_test_enter(
    *, journey: Journey, contact: Contact, properties: dict[str, Any] | None = None
) -> JourneyInstance:
    """Enter a test contact now, at the first step, with the example properties; an active
    test instance of theirs leaves first (a test can be run again at once)."""
    if not journey.test_contacts.filter(pk=contact.pk).exists():
        raise TestContactError(f"{contact} is not one of this journey's test contacts")
    now = timezone.now()
    definition = definition_of(journey.pk, journey.version)
    with transaction.atomic():
        work = Work(now=now)
        for row in JourneyInstance.objects.select_for_update().filter(
            journey=journey, contact=contact, state=InstanceState.ACTIVE
        ):
            [instance] = instances_from([_row(row)])
            work.exit(
                instance, ExitKind.EXIT_STEP, "entered again by hand (test)", skip_unsent=True
            )
        instance = Instance(
            id=None,
            journey_id=journey.pk,
            contact_id=contact.pk,
            version=journey.version,
            key="",
            step=definition.first,
            entered_at=now,
            due_at=now,
            step_due_at=now,
            properties=dict(properties or {}),
            test=True,
        )
        work.new.append(instance)
        work.log(instance, HistoryKind.ENTERED, "entered by hand (test contact)")
        work.flush()
    if instance.id is None:  # pragma: no cover - the active one was ended in this transaction
        raise TestContactError(f"{contact} is in the journey already")
    return JourneyInstance.objects.get(pk=instance.id)


def instance_wait_skip(*, instance: JourneyInstance) -> bool:
    """A test contact's current wait ends now (the next pass moves them on); False when
    the instance is no test or is not waiting."""
    if not instance.test:
        raise TestContactError("only a test contact's waits can be skipped")
    now = timezone.now()
    with transaction.atomic():
        locked = JourneyInstance.objects.select_for_update().get(pk=instance.pk)
        if locked.state != InstanceState.ACTIVE or locked.waiting_since is None:
            return False
        work = Work(now=now)
        [moved] = instances_from([_row(locked)])
        moved.due_at = moved.step_due_at = now
        work.log(moved, HistoryKind.RESUMED, "wait skipped by hand (test contact)")
        work.flush()
    return True


def _row(row: JourneyInstance) -> tuple[Any, ...]:
    return (
        row.pk, row.journey_id, row.contact_id, row.version, row.key, row.step, row.entered_at,
        row.due_at, row.step_due_at, row.waiting_since, row.state, row.exited_at, row.exit_kind,
        row.exit_reason, row.properties, row.resumed, row.last_message_id, row.holdout, row.test,
    )  # fmt: skip
