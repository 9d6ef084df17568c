"""Which journey a campaign belongs to: a journey's send step sends through a campaign of
its own (kind ``journey_step``), and each run of a recurring campaign is one (kind
``recurring_run``). The campaign pages name that journey and link to it; read here for a
page of campaigns at once (two queries, whatever the page's length)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.urls import reverse

from campaigns.models import Campaign, CampaignKind
from journeys.models import JourneyRun, JourneyStepCampaign

STEP = "step"
RUN = "run"


@dataclass(frozen=True)
class Origin:
    kind: str  # STEP or RUN
    journey_id: int
    journey: str
    step: str = ""
    scheduled_for: datetime | None = None

    @property
    def url(self) -> str:
        return reverse("admin:journeys_journey_change", args=[self.journey_id])

    @property
    def is_step(self) -> bool:
        return self.kind == STEP


def campaign_origins(campaigns: list[Campaign]) -> dict[int, Origin]:
    """The journey each journey-step or recurring-run campaign of ``campaigns`` belongs
    to, by campaign id (none for a campaign of one's own)."""
    steps = [c.pk for c in campaigns if c.kind == CampaignKind.JOURNEY_STEP]
    runs = [c.pk for c in campaigns if c.kind == CampaignKind.RECURRING_RUN]
    found: dict[int, Origin] = {}
    if steps:
        for campaign_id, journey_id, name, step in JourneyStepCampaign.objects.filter(
            campaign_id__in=steps
        ).values_list("campaign_id", "journey_id", "journey__name", "step"):
            found[campaign_id] = Origin(STEP, journey_id, name, step=step)
    if runs:
        for campaign_id, journey_id, name, at in JourneyRun.objects.filter(
            campaign_id__in=runs
        ).values_list("campaign_id", "journey_id", "journey__name", "scheduled_for"):
            found[campaign_id] = Origin(RUN, journey_id, name, scheduled_for=at)
    return found


def campaign_origin(campaign: Campaign) -> Origin | None:
    return campaign_origins([campaign]).get(campaign.pk)


def is_journey_step(campaign: Campaign) -> bool:
    """A journey's step: the journey starts, pauses and stops it, never its own page."""
    return campaign.kind == CampaignKind.JOURNEY_STEP
