"""Recurring campaigns: a campaign launched again on a schedule, each run its own.

A journey whose entry is a ``schedule`` repeats a campaign (its model: any campaign of
one's own, usually a draft kept for it): daily, on chosen weekdays, or monthly, at a time
of day in a zone. When a run is due the model is copied into a new campaign (its audience,
exclusions, cap, window, languages, mapping; named after the journey and the run's date),
which is launched as the admin launches one (validated, then the insert as a job). Each
run is a campaign with its own report; the segments are read at each launch, so each run
reaches who fits then. ``only_new`` leaves out everyone an earlier run reached. The cap,
checked as rows are claimed, holds across the runs, other campaigns and journeys.

A run happens once: ``JourneyRun`` is unique per (journey, time), whichever of the ticks
on whichever workers sees it due first. Runs missed while nothing ran (the scheduler down,
the journey paused) are recorded as missed with the reason, and only the latest due one is
launched, if it is not late past the journey's lateness limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.drafts import campaign_copy
from campaigns.models import Campaign, CampaignKind
from delivery.campaigns.launch import LaunchError
from delivery.campaigns.launch_queue import campaign_launch
from journeys.definition import ScheduleEntry
from journeys.models import JourneyRun
from journeys.running import RunningJourney, running_journeys
from journeys.timing import local_instant

MISSED = "missed: a later run was due by the time the schedule was checked"


@dataclass
class RunsReport:
    launched: int = 0
    missed: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"launched": self.launched, "missed": self.missed, "failed": self.failed}


def schedule_times(entry: ScheduleEntry, *, after: datetime, until: datetime) -> list[datetime]:
    """The schedule's instants in (``after``, ``until``], oldest first."""
    zone = ZoneInfo(entry.zone)
    day = after.astimezone(zone).date()
    last = until.astimezone(zone).date()
    times = []
    while day <= last:
        if _runs_on(entry, day.weekday(), day.day):
            instant = local_instant(day, entry.at, entry.zone)
            if after < instant <= until:
                times.append(instant)
        day += timedelta(days=1)
    return times


def _runs_on(entry: ScheduleEntry, weekday: int, day_of_month: int) -> bool:
    if entry.every == "week":
        return weekday in entry.weekdays
    if entry.every == "month":
        return day_of_month == entry.day_of_month
    return True


def next_run_times(entry: ScheduleEntry, *, now: datetime, count: int = 5) -> list[datetime]:
    """The next ``count`` runs after ``now`` (what the admin shows)."""
    horizon = {"day": 1, "week": 7, "month": 31}[entry.every] * (count + 1)
    return schedule_times(entry, after=now, until=now + timedelta(days=horizon))[:count]


def recurring_runs(*, now: datetime | None = None) -> RunsReport:
    """Launch every run that is due (see the module's docstring)."""
    now = now or timezone.now()
    report = RunsReport()
    for journey in running_journeys().values():
        entry = journey.definition.entry
        if isinstance(entry, ScheduleEntry):
            _journey_runs(journey, entry, now, report)
    return report


def _journey_runs(
    journey: RunningJourney, entry: ScheduleEntry, now: datetime, report: RunsReport
) -> None:
    last = JourneyRun.objects.filter(journey_id=journey.id).order_by("-scheduled_for").first()
    since = journey.journey.live_since or now
    if last is not None and last.scheduled_for > since:
        since = last.scheduled_for
    due = schedule_times(entry, after=since, until=now)
    if not due:
        return
    for missed in due[:-1]:
        if _run_create(journey, missed, error=MISSED) is not None:
            report.missed += 1
    latest = due[-1]
    late = (now - latest).total_seconds()
    if late > journey.definition.lateness_s:
        error = f"late: due {latest:%Y-%m-%d %H:%M} UTC, past the lateness limit; not launched"
        if _run_create(journey, latest, error=error) is not None:
            report.missed += 1
        return
    outcome = _launch(journey, entry, latest)
    if outcome == "launched":
        report.launched += 1
    elif outcome == "failed":
        report.failed += 1


def _run_create(journey: RunningJourney, at: datetime, *, error: str = "") -> JourneyRun | None:
    try:
        with transaction.atomic():
            return JourneyRun.objects.create(journey_id=journey.id, scheduled_for=at, error=error)
    except IntegrityError:
        return None  # another tick made it


def _launch(journey: RunningJourney, entry: ScheduleEntry, at: datetime) -> str:
    with transaction.atomic():
        run = _run_create(journey, at)
        if run is None:
            return "taken"
        model = Campaign.objects.filter(pk=entry.campaign_id).first()
        if model is None:
            run.error = f"the campaign it repeats (id {entry.campaign_id}) is gone"
            run.save(update_fields=["error"])
            return "failed"
        local = at.astimezone(ZoneInfo(entry.zone))
        campaign = campaign_copy(
            model=model,
            name=f"{journey.journey.name} · {local:%Y-%m-%d %H:%M}",
            kind=CampaignKind.RECURRING_RUN,
        )
        if entry.only_new:
            earlier = JourneyRun.objects.filter(
                journey_id=journey.id, campaign__isnull=False
            ).values_list("campaign_id", flat=True)
            campaign.exclude_reached_campaigns.add(*earlier)
        run.campaign = campaign
        run.save(update_fields=["campaign"])
        try:
            with transaction.atomic():
                campaign_launch(
                    campaign=campaign, actor=f"recurring campaign {journey.journey.name}"
                )
        except LaunchError as exc:
            run.error = f"not launched: {exc}"[:500]
            run.save(update_fields=["error"])
            Campaign.objects.filter(pk=campaign.pk).update(status_reason=run.error[:500])
            return "failed"
    return "launched"
