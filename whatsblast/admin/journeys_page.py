"""A journey's page: its status, versions, figures, steps, test contacts and dry runs.

The figures are ``journeys.reports.journey_figures``: how many entered (and were held out),
are in it now, left and why, the entries refused and why; per step, who waits there now,
what it sent, skipped (with the reasons) and deferred, and its messages by status with a
link to the step campaign's report; conversions against the holdout with the lift and its
interval when the journey has a goal. Test contacts are entered by hand and their waits
skipped through ``journeys.dry_run``; a dry run walks a sample through the journey without
writing anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse

from campaigns.models import Contact, ContactList
from delivery.campaigns.progress import outcome_counts
from journeys.definition import DateEntry, Definition, ScheduleEntry, Step
from journeys.dry_run import DRY_RUN_SAMPLE, DryPerson
from journeys.models import (
    InstanceState,
    Journey,
    JourneyInstance,
    JourneyStepCampaign,
    JourneyVersion,
)
from journeys.reports import JourneyFigures, StepFigures
from whatsblast.admin.customer_links import customer_url
from whatsblast.admin.journeys_text import settings_text, step_text
from whatsblast.figures import percent_of

VERSIONS_SHOWN = 20
# The message figures a step's row shows, in the words of the campaign pages.
MESSAGE_FIGURES = ("sent", "delivered", "read", "failed")

SAMPLE_TEST = "test"
SAMPLE_LIST = "list"
SAMPLE_FIRST = "first"
SAMPLE_UPCOMING = "upcoming"


@dataclass
class StepRow:
    index: int
    step: Step
    text: str
    figures: StepFigures
    messages: dict[str, int] = field(default_factory=dict)
    campaign_id: int | None = None
    waiting_url: str = ""

    @property
    def skip_reasons(self) -> list[tuple[str, int]]:
        return sorted(self.figures.skip_reasons.items(), key=lambda item: -item[1])


def step_rows(
    journey: Journey, definition: Definition, figures: JourneyFigures, *, instances_url: str
) -> list[StepRow]:
    campaigns = dict(
        JourneyStepCampaign.objects.filter(journey=journey).values_list("step", "campaign_id")
    )
    by_step = {f.step: f for f in figures.steps}
    rows = []
    for index, step in enumerate(definition.steps):
        step_figures = by_step.get(step.id) or StepFigures(step.id, step.type)
        counts = outcome_counts(counts=step_figures.messages)
        rows.append(
            StepRow(
                index=index,
                step=step,
                text=step_text(step),
                figures=step_figures,
                messages={k: counts[k] for k in MESSAGE_FIGURES} if step.type == "send" else {},
                campaign_id=campaigns.get(step.id),
                waiting_url=(
                    f"{instances_url}?journey__id__exact={journey.pk}&state__exact=active"
                    f"&step={step.id}"
                    if instances_url
                    else ""
                ),
            )
        )
    return rows


@dataclass(frozen=True)
class Conversions:
    event: str
    days: int
    treated: int
    treated_won: int
    held_out: int
    held_out_won: int
    lift: Any

    @property
    def treated_rate(self) -> float | None:
        return percent_of(self.treated_won, self.treated)

    @property
    def held_out_rate(self) -> float | None:
        return percent_of(self.held_out_won, self.held_out)

    @property
    def difference_text(self) -> str:
        if self.lift is None:
            return ""
        return _points(self.lift.difference)

    @property
    def interval_text(self) -> str:
        if self.lift is None:
            return ""
        low, high = self.lift.interval.low, self.lift.interval.high
        return f"{_points(low)} to {_points(high)}"

    @property
    def relative_text(self) -> str:
        if self.lift is None or self.lift.relative_lift is None:
            return ""
        return f"{self.lift.relative_lift * 100:+.0f} %"


def _points(value: float) -> str:
    return f"{value * 100:+.1f} points"


def conversions(definition: Definition, figures: JourneyFigures) -> Conversions | None:
    if not figures.goal_event:
        return None
    return Conversions(
        event=figures.goal_event,
        days=definition.goal_days,
        treated=figures.entered - figures.held_out,
        treated_won=figures.converted,
        held_out=figures.held_out,
        held_out_won=figures.converted_held_out,
        lift=figures.lift,
    )


def versions(journey: Journey) -> list[JourneyVersion]:
    return list(
        JourneyVersion.objects.filter(journey=journey)
        .select_related("created_by")
        .order_by("-number")[:VERSIONS_SHOWN]
    )


def figures_context(
    journey: Journey, definition: Definition, figures: JourneyFigures, *, instances_url: str
) -> dict[str, Any]:
    left = sum(figures.exited.values())
    return {
        "figures": figures,
        "left": left,
        "exited": sorted(figures.exited.items(), key=lambda item: -item[1]),
        "refused": sorted(figures.refused.items(), key=lambda item: -item[1]),
        "refused_total": sum(figures.refused.values()),
        "steps": step_rows(journey, definition, figures, instances_url=instances_url),
        "conversions": conversions(definition, figures),
        "settings": settings_text(definition),
    }


# --- test contacts --------------------------------------------------------------------------


@dataclass
class TestContactRow:
    contact: Contact
    instance: JourneyInstance | None

    @property
    def waiting(self) -> bool:
        return self.instance is not None and self.instance.waiting_since is not None


def test_contact_rows(journey: Journey) -> list[TestContactRow]:
    contacts = list(journey.test_contacts.order_by("name", "pk"))
    active = {
        i.contact_id: i
        for i in JourneyInstance.objects.filter(
            journey=journey,
            contact_id__in=[c.pk for c in contacts],
            state=InstanceState.ACTIVE,
            test=True,
        ).order_by("entered_at")
    }
    return [TestContactRow(c, active.get(c.pk)) for c in contacts]


EXAMPLE_PROPERTIES_HELP = (
    'The event\'s properties, as JSON: {"cart_id": "c-1", "cart_path": "c/1"}.'
)


def properties_parse(raw: str) -> dict[str, Any]:
    """Example properties typed as JSON (an object; blank: none); ValueError saying why."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"the example properties are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError('the example properties are a JSON object, such as {"cart_id": "c-1"}')
    return value


# --- dry runs -------------------------------------------------------------------------------


def dry_run_sample(
    journey: Journey, definition: Definition, sample: str, list_id: int | None
) -> tuple[list[Contact], str]:
    """The contacts a dry run walks, and in words who they are ([] for a date entry's
    upcoming occurrences: the service finds them)."""
    contacts: QuerySet[Contact]
    if sample == SAMPLE_UPCOMING:
        return [], "who has an occurrence in the next 7 days"
    if sample == SAMPLE_LIST and list_id is not None:
        found = ContactList.objects.filter(pk=list_id).first()
        if found is not None:
            contacts = Contact.objects.filter(lists=found).order_by("pk")
            return list(contacts[:DRY_RUN_SAMPLE]), f"the first {DRY_RUN_SAMPLE} of {found.name}"
    if sample == SAMPLE_FIRST or (sample == SAMPLE_LIST and list_id is None):
        contacts = Contact.objects.order_by("pk")
        return list(contacts[:DRY_RUN_SAMPLE]), f"the first {DRY_RUN_SAMPLE} contacts"
    return list(journey.test_contacts.order_by("name", "pk")), "the test contacts"


def dry_run_options(journey: Journey, definition: Definition) -> dict[str, Any]:
    return {
        "lists": list(ContactList.objects.order_by("name").values_list("pk", "name")[:500]),
        "date_entry": isinstance(definition.entry, DateEntry),
        "sample_size": DRY_RUN_SAMPLE,
    }


@dataclass(frozen=True)
class DryRow:
    person: DryPerson
    customer_url: str


def dry_rows(people: list[DryPerson]) -> list[DryRow]:
    return [DryRow(p, customer_url(p.contact.recipient)) for p in people]


def is_recurring(definition: Definition) -> bool:
    return isinstance(definition.entry, ScheduleEntry)


def journey_url(journey_id: int) -> str:
    return reverse("admin:journeys_journey_change", args=[journey_id])
