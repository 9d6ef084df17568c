"""API v1's journeys: which a key may see, and how a journey reads as JSON.

A key sees the journeys of its phone numbers (every journey for a key on all numbers); a
journey on another number is a 404, as a missing one. The answer's figures are the admin
report's (journeys.reports).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from delivery.api.errors import ApiProblem, invalid_fields
from delivery.models import ApiKey
from journeys.definition import ScheduleEntry
from journeys.models import Journey, JourneyStatus, JourneyVersion
from journeys.recurring import next_run_times
from journeys.reports import journey_figures
from journeys.running import definition_of


def journeys_of_key(api_key: ApiKey) -> QuerySet[Journey]:
    journeys = Journey.objects.select_related("phone_number")
    if not api_key.all_numbers:
        journeys = journeys.filter(phone_number__in=api_key.phone_numbers.all())
    return journeys


def journey_of_key(*, api_key: ApiKey, journey_id: int) -> Journey:
    journey = journeys_of_key(api_key).filter(pk=journey_id).first()
    if journey is None:
        raise ApiProblem(404, "not_found", "No such journey.")
    return journey


def journey_status_filter(raw: str | None) -> str | None:
    if raw is None:
        return None
    if raw not in JourneyStatus.values:
        raise invalid_fields({"status": f"One of {', '.join(JourneyStatus.values)}."})
    return raw


def journey_render(journey: Journey, *, url: str, figures: bool = False) -> dict[str, Any]:
    """A journey as the API shows it; ``figures`` adds the report (GET of one journey)."""
    definition = definition_of(journey.pk, journey.version)
    body: dict[str, Any] = {
        "id": journey.pk,
        "name": journey.name,
        "status": journey.status,
        "status_reason": journey.status_reason,
        "version": journey.version,
        "phone_number_id": journey.phone_number.phone_number_id,
        "entry": definition.entry.type,
        "live_since": journey.live_since.isoformat() if journey.live_since else None,
        "created_at": journey.created_at.isoformat(),
        "url": url,
    }
    if figures:
        body["definition"] = JourneyVersion.objects.get(
            journey=journey, number=journey.version
        ).definition
        body["figures"] = journey_figures(journey).as_dict()
        entry = definition.entry
        body["next_runs"] = (
            [t.isoformat() for t in next_run_times(entry, now=timezone.now())]
            if isinstance(entry, ScheduleEntry) and journey.status == JourneyStatus.LIVE
            else []
        )
    return body
