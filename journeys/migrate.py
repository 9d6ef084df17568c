"""Instances of an older version moved onto the journey's current one.

Run over every active instance when a live journey is edited (journeys.versions), and on
any instance the sweep or the router finds behind (an edit that committed while they
worked). The rules, so that nobody fires twice and nobody is stranded:

* an instance at a step the new version still has goes on there, in the new version;
* one waiting at a wait whose duration or kind changed is re-timed from when its wait
  began (a 24 h wait shortened to 1 h, begun 3 h ago, is over now): waiting people get
  the new timing, not only new entrants;
* one at a step the new version removed leaves the journey, saying so;
* steps already fired stay fired: a send step fires once per instance (its message is
  unique per instance and step), whichever version reaches it again.
"""

from __future__ import annotations

from collections.abc import Sequence

from campaigns.models import Contact
from journeys.advance import wait_due, wait_text
from journeys.definition import WaitStep
from journeys.models import ExitKind, HistoryKind
from journeys.running import RunningJourney, definition_of
from journeys.timing import person_zone
from journeys.work import Instance, Work


def instances_migrate(instances: Sequence[Instance], journey: RunningJourney, work: Work) -> int:
    """Move the instances behind ``journey``'s version onto it; how many moved."""
    behind = [i for i in instances if i.active and i.version < journey.version]
    if not behind:
        return 0
    definition = journey.definition
    zones = _zones(behind, journey)
    for instance in behind:
        old_version = instance.version
        old = definition_of(journey.id, old_version)
        step = definition.step(instance.step)
        instance.version = journey.version
        if step is None:
            work.exit(
                instance,
                ExitKind.STEP_REMOVED,
                f"its step {instance.step!r} was removed in version {journey.version}",
            )
            continue
        detail = f"version {old_version} → {journey.version}, at step {instance.step}"
        old_step = old.step(instance.step)
        if isinstance(step, WaitStep) and instance.waiting_since is not None:
            if old_step != step:
                zone = zones.get(instance.contact_id, "UTC")
                due = wait_due(step, since=instance.waiting_since, zone=zone)
                # Past already (a wait shortened below the time waited): over now.
                instance.due_at = max(due, work.now)
                instance.step_due_at = instance.due_at
                detail += f"; the wait changed: {wait_text(step, due, zone)}"
        elif instance.waiting_since is not None:
            # Was waiting at a step that is now no wait: the step is due now.
            instance.waiting_since = None
            instance.due_at = work.now
            instance.step_due_at = work.now
            detail += f"; the step is now a {step.type}, due now"
        work.log(instance, HistoryKind.MIGRATED, detail)
    return len(behind)


def _zones(instances: Sequence[Instance], journey: RunningJourney) -> dict[int, str]:
    definition = journey.definition
    contacts = Contact.objects.filter(pk__in={i.contact_id for i in instances}).only(
        "id", "phone", "attributes"
    )
    return {
        c.pk: person_zone(
            phone=c.phone,
            attributes=c.attributes or {},
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )
        for c in contacts
    }
