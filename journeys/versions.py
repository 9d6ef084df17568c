"""Building and running a journey: create, edit (a new version), go live, pause, resume,
archive.

A definition is checked twice: by its contract (journeys.definition) and against the
database here (the templates exist on the number's account and can be sent with the
mapping, the segment and the campaign named exist, a branch's rules compile), every
problem named by its path at once.

A draft is edited in place. Once a journey has been live an edit is a new version: the
journey moves to it in one transaction with every active instance (journeys.migrate:
people at a step that still exists go on in the new version, re-timed when their wait
changed; people at a removed step leave, saying so), and the send steps' campaigns follow
(a removed step's campaign is cancelled). The journey's row is locked throughout, so two
edits queue rather than interleave.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from campaigns.catalogue.params import (
    ParamMappingError,
    mapping_has_click,
    mapping_validate,
    mapping_with_properties,
    property_source_errors,
)
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import Campaign, CampaignKind, PhoneNumber, Segment, Template
from delivery.campaigns.tracked_links import tracked_link_errors
from delivery.segments.rules import RuleError
from delivery.segments.services import segment_compile
from journeys.definition import (
    BranchStep,
    ContactCondition,
    Definition,
    DefinitionError,
    Entry,
    ScheduleEntry,
    SegmentEntry,
    SendStep,
    Step,
    definition_parse,
    definition_parts,
)
from journeys.migrate import instances_migrate
from journeys.models import ExitKind, Journey, JourneyStatus, JourneyVersion
from journeys.running import RunningJourney, definition_of
from journeys.step_campaigns import step_campaigns_status, step_campaigns_sync
from journeys.work import INSTANCE_COLUMNS, Work, instances_from

MIGRATE_BATCH = 2000


class JourneyStateError(ValueError):
    """The transition does not apply to the journey as it is."""


def definition_check(number: PhoneNumber, data: object) -> Definition:
    """The definition of ``data``, checked against the database for ``number``'s journey;
    ``DefinitionError`` with every problem otherwise."""
    parts = definition_parts(data)
    problems = dict(parts.problems)
    # The parts that read are checked against the database too: every problem at once.
    for at, what in _database_problems(number, parts.entry, parts.steps, data).items():
        problems.setdefault(at, what)
    if problems:
        raise DefinitionError(problems)
    return definition_parse(data)


def _database_problems(
    number: PhoneNumber, entry: Entry | None, steps: tuple[Step, ...], data: Any
) -> dict[str, str]:
    problems: dict[str, str] = {}
    if isinstance(entry, SegmentEntry) and not Segment.objects.filter(pk=entry.segment_id).exists():
        problems["entry.segment"] = f"no segment has the id {entry.segment_id}"
    if isinstance(entry, ScheduleEntry):
        model = Campaign.objects.filter(pk=entry.campaign_id).first()
        if model is None:
            problems["entry.campaign"] = f"no campaign has the id {entry.campaign_id}"
        elif model.kind != CampaignKind.CAMPAIGN:
            problems["entry.campaign"] = "a recurring campaign repeats a campaign of its own"
    written = data.get("steps") if isinstance(data, dict) else None
    index = {
        str(item.get("id")): i
        for i, item in enumerate(written if isinstance(written, list) else [])
        if isinstance(item, dict)
    }
    for step in steps:
        path = f"steps[{index.get(step.id, 0)}]"
        if isinstance(step, SendStep):
            problems.update(_send_problems(number, step, path))
        elif isinstance(step, BranchStep) and isinstance(step.condition, ContactCondition):
            try:
                segment_compile(step.condition.rules, prefix="b")
            except RuleError as exc:
                for at, what in exc.problems.items():
                    problems[f"{path}.if.contact{at.removeprefix('rules')}"] = what
    return problems


def _send_problems(number: PhoneNumber, step: SendStep, path: str) -> dict[str, str]:
    candidates = list(Template.objects.filter(account_id=number.account_id, name=step.template))
    if step.language:
        candidates = [t for t in candidates if t.language == step.language]
    if not candidates:
        where = f" in {step.language}" if step.language else ""
        return {f"{path}.template": f"no template {step.template!r}{where} on {number}'s account"}
    if len(candidates) > 1:
        languages = ", ".join(sorted(t.language for t in candidates))
        return {f"{path}.language": f"{step.template!r} exists in {languages}: choose one"}
    template = candidates[0]
    unusable = template_unusable_reasons(template)
    if unusable:
        return {f"{path}.template": f"{template} cannot be sent: {'; '.join(unusable)}"}
    errors = property_source_errors(step.mapping)
    if errors:
        return {f"{path}.mapping": "; ".join(errors)}
    try:
        mapping_validate(template, mapping_with_properties(step.mapping, None))
    except ParamMappingError as exc:
        return {f"{path}.mapping": str(exc)}
    if mapping_has_click(step.mapping):
        link_errors = tracked_link_errors(
            Campaign(link_destination=step.link), [(template, step.mapping)]
        )
        if link_errors:
            return {f"{path}.link": "; ".join(link_errors)}
    return {}


# --- creating and editing ---------------------------------------------------------------------


def journey_create(
    *,
    name: str,
    phone_number: PhoneNumber,
    definition: object,
    description: str = "",
    created_by: Any = None,
) -> Journey:
    """A draft journey with its first version (``DefinitionError`` when it cannot run)."""
    if not name.strip():
        raise DefinitionError({"name": "a journey needs a name"})
    if Journey.objects.filter(name=name.strip()).exists():
        raise DefinitionError({"name": f"a journey is already named {name.strip()!r}"})
    definition_check(phone_number, definition)
    with transaction.atomic():
        journey = Journey.objects.create(
            name=name.strip(),
            description=description,
            phone_number=phone_number,
            created_by=created_by,
        )
        JourneyVersion.objects.create(
            journey=journey, number=1, definition=definition, created_by=created_by
        )
    return journey


def journey_describe(*, journey: Journey, name: str, description: str) -> Journey:
    """Rename a journey or change its description (neither is versioned)."""
    name = name.strip()
    if not name:
        raise DefinitionError({"name": "a journey needs a name"})
    if Journey.objects.filter(name=name).exclude(pk=journey.pk).exists():
        raise DefinitionError({"name": f"a journey is already named {name!r}"})
    journey.name, journey.description = name, description
    journey.save(update_fields=["name", "description", "updated_at"])
    return journey


def journey_edit(
    *,
    journey: Journey,
    definition: object,
    note: str = "",
    edited_by: Any = None,
    now: datetime | None = None,
) -> JourneyVersion:
    """Change the definition: in place while it has never been live, else as a new
    version everyone active moves to (see the module's docstring). ``now`` is the
    journeys' clock (a changed wait whose new end has passed is due then)."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = (
            Journey.objects.select_for_update().select_related("phone_number").get(pk=journey.pk)
        )
        if locked.status == JourneyStatus.ARCHIVED:
            raise JourneyStateError("an archived journey cannot be edited")
        checked = definition_check(locked.phone_number, definition)
        if locked.live_since is None:
            version = JourneyVersion.objects.get(journey=locked, number=locked.version)
            version.definition = definition
            version.note = note
            version.save(update_fields=["definition", "note"])
            _refresh(journey, locked)
            return version
        version = JourneyVersion.objects.create(
            journey=locked,
            number=locked.version + 1,
            definition=definition,
            note=note,
            created_by=edited_by,
        )
        locked.version = version.number
        locked.save(update_fields=["version", "updated_at"])
        campaigns = step_campaigns_sync(locked, checked)
        running = RunningJourney(locked, definition_of(locked.pk, version.number), campaigns)
        for instances in _active_batches(locked.pk):
            work = Work(now=now)
            instances_migrate(instances, running, work)
            work.flush()
    _refresh(journey, locked)
    return version


def _active_batches(journey_id: int) -> Iterator[list[Any]]:
    """The journey's active instances, locked, a batch at a time in id order."""
    last = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {INSTANCE_COLUMNS} FROM journeys_journeyinstance"  # noqa: S608
                " WHERE journey_id = %s AND state = 'active' AND id > %s"
                " ORDER BY id LIMIT %s FOR NO KEY UPDATE",
                [journey_id, last, MIGRATE_BATCH],
            )
            instances = instances_from(cursor.fetchall())
        if not instances:
            return
        yield instances
        last = int(instances[-1].id or 0)


def _refresh(journey: Journey, locked: Journey) -> None:
    for field in ("version", "status", "status_reason", "live_since", "paused_at"):
        setattr(journey, field, getattr(locked, field))


# --- status -----------------------------------------------------------------------------------


def journey_go_live(*, journey: Journey) -> Journey:
    """Draft (or paused) → live: entries are taken and steps fire from now."""
    with transaction.atomic():
        locked = (
            Journey.objects.select_for_update().select_related("phone_number").get(pk=journey.pk)
        )
        if locked.status == JourneyStatus.LIVE:
            return locked
        if locked.status == JourneyStatus.ARCHIVED:
            raise JourneyStateError("an archived journey cannot go live again")
        stored = JourneyVersion.objects.get(journey=locked, number=locked.version)
        # Checked again: a template or segment may have gone since it was written.
        definition = definition_check(locked.phone_number, stored.definition)
        now = timezone.now()
        locked.status = JourneyStatus.LIVE
        locked.status_reason = ""
        locked.live_since = locked.live_since or now
        locked.paused_at = None
        locked.save()
        step_campaigns_sync(locked, definition)
        step_campaigns_status(locked)
    _refresh(journey, locked)
    return locked


def journey_pause(*, journey: Journey, reason: str = "paused by user") -> Journey:
    """Nothing fires and nobody enters until resumed; exits and resets still apply, so a
    person who bought meanwhile is not reminded when it resumes."""
    with transaction.atomic():
        locked = Journey.objects.select_for_update().get(pk=journey.pk)
        if locked.status != JourneyStatus.LIVE:
            raise JourneyStateError(f"the journey is {locked.status}, it cannot be paused")
        locked.status = JourneyStatus.PAUSED
        locked.status_reason = reason[:500]
        locked.paused_at = timezone.now()
        locked.save(update_fields=["status", "status_reason", "paused_at", "updated_at"])
        step_campaigns_status(locked)
    _refresh(journey, locked)
    return locked


def journey_resume(*, journey: Journey) -> Journey:
    """Paused → live; steps that came due meanwhile fire now, those late past the journey's
    lateness limit are skipped with the reason."""
    if Journey.objects.filter(pk=journey.pk, status=JourneyStatus.PAUSED).exists():
        return journey_go_live(journey=journey)
    raise JourneyStateError(f"the journey is {journey.status}, it cannot be resumed")


def journey_archive(*, journey: Journey) -> int:
    """End the journey: everyone in it leaves (their unsent messages skipped), its step
    campaigns are cancelled. How many people left."""
    left = 0
    with transaction.atomic():
        locked = Journey.objects.select_for_update().get(pk=journey.pk)
        if locked.status == JourneyStatus.ARCHIVED:
            return 0
        locked.status = JourneyStatus.ARCHIVED
        locked.status_reason = "archived"
        locked.save(update_fields=["status", "status_reason", "updated_at"])
        for instances in _active_batches(locked.pk):
            work = Work(now=timezone.now())
            for instance in instances:
                work.exit(instance, ExitKind.ARCHIVED, "the journey was archived", skip_unsent=True)
            work.flush()
            left += len(instances)
        step_campaigns_status(locked)
    _refresh(journey, locked)
    return left
