"""Recurring campaigns in the admin: a draft campaign launched again on a schedule.

A recurring campaign is a journey whose entry is a ``schedule`` (journeys.recurring): the
form here chooses the draft it repeats, the schedule (every day, chosen weekdays, or a day
of the month, at a time in a zone) and whether each run leaves out everyone an earlier run
reached, and saves it through ``journey_create`` / ``journey_edit`` like any journey. Its
page shows the next five runs (in the viewer's zone and the schedule's) and every past run
with its campaign's figures, a link to that run's report, and its error if it had one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from campaigns.models import Campaign, CampaignKind, CampaignStatus
from campaigns.windows.zones import zone_valid
from delivery.campaigns.launch_queue import launch_queued
from journeys.definition import WEEKDAYS, DefinitionError, ScheduleEntry
from journeys.models import Journey, JourneyRun, JourneyStatus, JourneyVersion
from journeys.recurring import next_run_times
from journeys.running import definition_of
from journeys.versions import (
    JourneyStateError,
    journey_create,
    journey_describe,
    journey_edit,
)
from whatsblast.admin.journeys_text import DAY_NAMES, schedule_text
from whatsblast.figures import campaigns_figures

NEXT_RUNS = 5
PAST_RUNS = 50

EVERY_CHOICES = (
    ("day", "Every day"),
    ("week", "On chosen days of the week"),
    ("month", "Once a month, on a day"),
)
# The form's fields each problem path of a schedule entry names.
ENTRY_FIELDS = {
    "entry.campaign": "campaign",
    "entry.every": "every",
    "entry.weekdays": "weekdays",
    "entry.day_of_month": "day_of_month",
    "entry.at": "at",
    "entry.zone": "zone",
    "entry.only_new": "only_new",
    "name": "name",
}


class CampaignChoiceField(forms.ModelChoiceField[Campaign]):
    def label_from_instance(self, obj: Campaign) -> str:
        return f"{obj.name} (#{obj.pk}, {obj.template} from {obj.phone_number})"


class RecurringForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        widget=forms.TextInput(attrs={"size": 50}),
        help_text="Each run is a campaign of its own, named after this and its date.",
    )
    description = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 80})
    )
    campaign = CampaignChoiceField(
        queryset=Campaign.objects.none(),
        label="Campaign to repeat",
        help_text="A draft kept for this: each run copies its template, audience, "
        "exclusions, cap and window. Its lists and segments are read at each run.",
    )
    every = forms.ChoiceField(choices=EVERY_CHOICES, widget=forms.RadioSelect, initial="week")
    weekdays = forms.MultipleChoiceField(
        choices=list(zip(WEEKDAYS, DAY_NAMES, strict=True)),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="On",
    )
    day_of_month = forms.IntegerField(
        min_value=1,
        max_value=28,
        required=False,
        initial=1,
        label="Day of the month",
        help_text="1 to 28, so that every month has it.",
    )
    at = forms.TimeField(
        label="At",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        initial=time(10, 0),
    )
    zone = forms.CharField(
        max_length=64,
        label="Time zone",
        widget=forms.TextInput(attrs={"list": "wb-zones", "size": 30}),
        help_text="The zone the time is read in, such as America/Sao_Paulo.",
    )
    only_new = forms.BooleanField(
        required=False,
        label="Only people no earlier run reached",
        help_text="Each run leaves out everyone an earlier run of this sent to.",
    )
    note = forms.CharField(
        required=False,
        max_length=500,
        label="What changed",
        widget=forms.TextInput(attrs={"size": 60}),
    )

    def __init__(self, *args: Any, journey: Journey | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.journey = journey
        drafts = Q(kind=CampaignKind.CAMPAIGN, status=CampaignStatus.DRAFT)
        if journey is not None:
            entry = _entry_of(journey)
            if entry is not None:
                drafts |= Q(pk=entry.campaign_id)
            drafts &= Q(phone_number_id=journey.phone_number_id)
        else:
            del self.fields["note"]
        self.fields["campaign"].queryset = (  # type: ignore[attr-defined]
            Campaign.objects.filter(drafts)
            .select_related("template", "phone_number")
            .order_by("name", "pk")
        )

    def clean_name(self) -> str:
        name = str(self.cleaned_data.get("name") or "").strip()
        taken = Journey.objects.filter(name=name)
        if self.journey is not None:
            taken = taken.exclude(pk=self.journey.pk)
        if taken.exists():
            raise ValidationError(f"A journey is already named {name!r}.")
        return name

    def clean_zone(self) -> str:
        value = str(self.cleaned_data.get("zone") or "").strip()
        zone = zone_valid(value)
        if zone is None:
            raise ValidationError(f"Unknown time zone {value!r}: use an IANA name such as UTC.")
        return zone

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if cleaned.get("every") == "week" and not cleaned.get("weekdays"):
            self.add_error("weekdays", "Choose the days of the week it runs on.")
        if cleaned.get("every") == "month" and not cleaned.get("day_of_month"):
            self.add_error("day_of_month", "Choose the day of the month it runs on.")
        return cleaned

    def definition(self) -> dict[str, Any]:
        data = self.cleaned_data
        entry: dict[str, Any] = {
            "type": "schedule",
            "campaign": data["campaign"].pk,
            "every": data["every"],
            "at": f"{data['at']:%H:%M}",
            "zone": data["zone"],
            "only_new": bool(data["only_new"]),
        }
        if data["every"] == "week":
            entry["weekdays"] = [d for d in WEEKDAYS if d in data["weekdays"]]
        if data["every"] == "month":
            entry["day_of_month"] = data["day_of_month"]
        return {"entry": entry}

    def problems_add(self, problems: dict[str, str]) -> None:
        """Each problem by path on the field it names (the others on the form)."""
        for path, what in problems.items():
            name = ENTRY_FIELDS.get(path)
            if name is not None and name in self.fields:
                self.add_error(name, what)
            else:
                self.add_error(None, f"{path}: {what}")


def _entry_of(journey: Journey) -> ScheduleEntry | None:
    entry = definition_of(journey.pk, journey.version).entry
    return entry if isinstance(entry, ScheduleEntry) else None


def initial_of(journey: Journey) -> dict[str, Any]:
    """The form's values for a recurring campaign as it is."""
    entry = _entry_of(journey)
    initial: dict[str, Any] = {"name": journey.name, "description": journey.description}
    if entry is not None:
        initial.update(
            {
                "campaign": entry.campaign_id,
                "every": entry.every,
                "weekdays": [WEEKDAYS[d] for d in entry.weekdays],
                "day_of_month": entry.day_of_month,
                "at": entry.at,
                "zone": entry.zone,
                "only_new": entry.only_new,
            }
        )
    return initial


def recurring_save(request: HttpRequest, form: RecurringForm) -> Journey | None:
    """Create or change the recurring campaign; None (and the form's errors) when it
    cannot run."""
    if not form.is_valid():
        return None
    definition = form.definition()
    campaign: Campaign = form.cleaned_data["campaign"]
    journey = form.journey
    try:
        if journey is None:
            return journey_create(
                name=form.cleaned_data["name"],
                phone_number=campaign.phone_number,
                definition=definition,
                description=form.cleaned_data["description"],
                created_by=request.user,
            )
        stored = JourneyVersion.objects.get(journey=journey, number=journey.version).definition
        with transaction.atomic():
            if definition != stored:
                journey_edit(
                    journey=journey,
                    definition=definition,
                    note=form.cleaned_data.get("note", ""),
                    edited_by=request.user,
                )
            journey_describe(
                journey=journey,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
            )
        return journey
    except DefinitionError as exc:
        form.problems_add(exc.problems)
    except JourneyStateError as exc:
        form.add_error(None, str(exc))
    return None


# --- its page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NextRun:
    at: datetime  # UTC; the page shows it in the viewer's zone
    local: str  # in the schedule's zone


def next_runs(entry: ScheduleEntry, *, after: datetime) -> list[NextRun]:
    """The next runs after ``after`` (now, or the latest run when that is later)."""
    zone = ZoneInfo(entry.zone)
    return [
        NextRun(at, f"{at.astimezone(zone):%a %Y-%m-%d %H:%M} {entry.zone}")
        for at in next_run_times(entry, now=after, count=NEXT_RUNS)
    ]


def runs_context(journey: Journey, entry: ScheduleEntry) -> dict[str, Any]:
    runs = list(
        JourneyRun.objects.filter(journey=journey)
        .select_related("campaign")
        .order_by("-scheduled_for")[:PAST_RUNS]
    )
    figures = campaigns_figures(campaign_ids=[r.campaign_id for r in runs if r.campaign_id])
    campaign = Campaign.objects.filter(pk=entry.campaign_id).select_related("template").first()
    after = max([timezone.now(), *(r.scheduled_for for r in runs[:1])])
    return {
        "schedule": entry,
        "schedule_text": schedule_text(entry),
        "repeats": campaign,
        "next_runs": next_runs(entry, after=after),
        "runs_live": journey.status == JourneyStatus.LIVE,
        "runs": [
            {
                "run": run,
                "figures": figures.get(run.campaign_id or 0, {}),
                "launching": run.campaign is not None and launch_queued(run.campaign),
            }
            for run in runs
        ],
        "run_count": JourneyRun.objects.filter(journey=journey).count(),
    }
