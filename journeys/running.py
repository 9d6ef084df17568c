"""Journeys as they run now: each one's current definition, read once per version.

A definition never changes once stored (an edit adds a version), so a parsed one is kept
per (journey, version) for the life of the process; only the journeys' rows (status,
current version) are read each pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from journeys.definition import Definition, EmitStep, definition_parse
from journeys.models import Journey, JourneyStatus, JourneyStepCampaign, JourneyVersion


@dataclass(frozen=True)
class RunningJourney:
    journey: Journey
    definition: Definition
    # The campaign each send step sends through (journeys.step_campaigns).
    step_campaigns: dict[str, int]

    @property
    def id(self) -> int:
        return int(self.journey.pk)

    @property
    def version(self) -> int:
        return int(self.journey.version)


@lru_cache(maxsize=512)
def _definition(journey_id: int, number: int) -> Definition:
    version = JourneyVersion.objects.get(journey_id=journey_id, number=number)
    return definition_parse(version.definition)


def definition_of(journey_id: int, number: int) -> Definition:
    """Version ``number`` of the journey, parsed (cached: versions never change)."""
    return _definition(journey_id, number)


def running_journeys(
    statuses: Iterable[str] = (JourneyStatus.LIVE,), *, ids: Iterable[int] | None = None
) -> dict[int, RunningJourney]:
    """The journeys in these statuses (all of them, or those of ``ids``), by id."""
    query = Journey.objects.filter(status__in=list(statuses)).select_related(
        "phone_number__account"
    )
    if ids is not None:
        query = query.filter(pk__in=list(ids))
    journeys = list(query)
    campaigns: dict[int, dict[str, int]] = {}
    for journey_id, step, campaign_id in JourneyStepCampaign.objects.filter(
        journey_id__in=[j.pk for j in journeys]
    ).values_list("journey_id", "step", "campaign_id"):
        campaigns.setdefault(journey_id, {})[step] = campaign_id
    return {
        int(j.pk): RunningJourney(
            j, definition_of(int(j.pk), int(j.version)), campaigns.get(int(j.pk), {})
        )
        for j in journeys
    }


def emitted_event_types() -> dict[str, str]:
    """The event types journeys' emit steps send out (their current versions, archived
    journeys aside), each with the journeys that send it: what a subscription can ask
    for beside whatsblast's own."""
    found: dict[str, list[str]] = {}
    for journey in Journey.objects.exclude(status=JourneyStatus.ARCHIVED).only(
        "id", "name", "version"
    ):
        definition = definition_of(int(journey.pk), int(journey.version))
        for step in definition.steps:
            if isinstance(step, EmitStep):
                found.setdefault(step.event_type, []).append(journey.name)
    return {
        name: f"sent out by the journey {', '.join(sorted(set(journeys)))}"
        for name, journeys in sorted(found.items())
    }
