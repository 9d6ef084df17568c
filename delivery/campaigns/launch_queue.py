"""Launching from the admin: validated at once, run as a background job, or scheduled.

Turning a million contacts into message rows takes over a minute, far longer than a web
request may take, so "launch now" validates in the request (the person sees at once what
is wrong) and then queues ``campaign_launch_queued`` as a job on the maintenance queue,
whose timeout allows it. The campaign stays a draft until the job's launch commits, marked by its
``status_reason`` so the page can say it is on its way; nothing else starts drafts, so the
job is the only launcher, and ``campaign_start`` makes a second one a no-op anyway.

A schedule is only a status change, done in the request; the existing schedule path
(RQ's scheduler and the maintenance tick) launches it when due.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from campaigns.state import LifecycleError
from delivery.campaigns.launch import (
    LaunchError,
    campaign_start,
    campaign_validate,
    campaigns_start_together,
)
from delivery.campaigns.lifecycle import campaign_resume
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

LAUNCH_QUEUED = "Launch queued"


def launch_queued(campaign: Campaign) -> bool:
    """Whether a launch job for this draft is waiting or running."""
    return campaign.status == CampaignStatus.DRAFT and campaign.status_reason.startswith(
        LAUNCH_QUEUED
    )


def campaign_launch(
    *, campaign: Campaign, at: datetime | None = None, actor: str = "", now: datetime | None = None
) -> str:
    """Launch ``campaign`` in the background now, or schedule it for ``at``.

    Returns ``"queued"`` or ``"scheduled"``; raises ``LaunchError`` with the reason when
    the campaign cannot start as it stands.
    """
    now = now or timezone.now()
    if campaign.status != CampaignStatus.DRAFT:
        raise LaunchError(f"campaign {campaign.pk} is {campaign.status}, not a draft")
    campaign_validate(campaign=campaign)
    if at is not None and at > now:
        campaign_start(campaign=campaign, at=at, now=now)
        return "scheduled"
    reason = _queued_reason(actor, now)
    with transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk, status=CampaignStatus.DRAFT).update(
            status_reason=reason[:500], updated_at=timezone.now()
        )
        queues.after_commit(
            lambda: _launch_enqueue(campaign.pk), what=f"launch of campaign {campaign.pk}"
        )
    campaign.status_reason = reason[:500]
    return "queued"


def campaigns_launch_together(*, campaigns: Sequence[Campaign], actor: str = "") -> int:
    """Queue one job that launches the ``campaigns`` (drafts) together; how many.

    Each is validated here, so the person sees at once which one cannot start (a
    ``LaunchError`` naming it; nothing is queued then). The job
    (``campaigns_launch_together_queued``) inserts every audience and starts them all in
    one commit (``campaigns_start_together``). Each draft is marked queued as a single
    launch is, and a lost job is queued again per campaign by the tick (each then starts
    on its own, a moment apart, rather than not at all).
    """
    if len(campaigns) < 2:
        raise LaunchError("select at least two draft campaigns to launch together")
    for campaign in campaigns:
        if campaign.status != CampaignStatus.DRAFT:
            raise LaunchError(f"{campaign} is {campaign.status}, not a draft")
        try:
            campaign_validate(campaign=campaign)
        except LaunchError as exc:
            raise LaunchError(f"{campaign}: {exc}") from exc
    ids = sorted(campaign.pk for campaign in campaigns)
    reason = f"{_queued_reason(actor, timezone.now())}, with {len(ids) - 1} more"
    with transaction.atomic():
        Campaign.objects.filter(pk__in=ids, status=CampaignStatus.DRAFT).update(
            status_reason=reason[:500], updated_at=timezone.now()
        )
        queues.after_commit(lambda: _together_enqueue(ids), what=f"launch of campaigns {ids}")
    for campaign in campaigns:
        campaign.status_reason = reason[:500]
    return len(ids)


def campaigns_launch_together_queued(*, campaign_ids: list[int]) -> dict[str, Any]:
    """Launch queued drafts together; a refusal is written on every one of them."""
    campaigns = list(Campaign.objects.filter(pk__in=campaign_ids, status=CampaignStatus.DRAFT))
    if not campaigns:
        return {"started": 0, "reason": "no drafts left"}
    try:
        summaries = campaigns_start_together(campaigns=campaigns)
    except LaunchError as exc:
        Campaign.objects.filter(pk__in=campaign_ids, status=CampaignStatus.DRAFT).update(
            status_reason=f"Launch refused: {exc}"[:500], updated_at=timezone.now()
        )
        return {"started": 0, "reason": str(exc)}
    return {"started": len(summaries), "campaigns": [s.as_dict() for s in summaries]}


def campaign_resume_or_launch(*, campaign: Campaign, actor: str = "") -> str:
    """Resume a paused campaign (``"resumed"``); one paused before it was ever launched (a
    paused schedule) is launched in the background like "launch now" (``"queued"``)
    instead of inside the request, as ``campaign_resume`` would.
    """
    if campaign.status != CampaignStatus.PAUSED or campaign.started_at is not None:
        campaign_resume(campaign=campaign)
        return "resumed"
    with transaction.atomic():
        # Back to a draft and queued in one transaction: a refused launch (LaunchError)
        # rolls back to paused.
        back = Campaign.objects.filter(
            pk=campaign.pk, status=CampaignStatus.PAUSED, started_at__isnull=True
        ).update(status=CampaignStatus.DRAFT, status_reason="")
        if not back:
            raise LifecycleError(f"campaign {campaign.pk} changed meanwhile; reload the page")
        campaign.refresh_from_db()
        return campaign_launch(campaign=campaign, actor=actor)


def campaign_launch_queued(*, campaign_id: int) -> dict[str, Any]:
    """Launch a queued draft; a refusal (the audience changed since) is written on it."""
    campaign = Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.DRAFT).first()
    if campaign is None:
        return {"started": False, "reason": "not a draft"}
    try:
        return campaign_start(campaign=campaign).as_dict()
    except LaunchError as exc:
        # updated_at moves too: the campaign page's cached answer is keyed on it.
        Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.DRAFT).update(
            status_reason=f"Launch refused: {exc}"[:500], updated_at=timezone.now()
        )
        return {"started": False, "reason": str(exc)}


# A draft marked "Launch queued" this long with no launch job on record lost its job
# (Redis was away, or lost it): the tick queues it again.
QUEUED_LOST_AFTER = timedelta(seconds=30)
# While this mark stands a launch job is (or was just) on the queue; it outlives the
# longest launch the maintenance queue allows.
_LAUNCH_MARK_S = 1800


def _launch_mark(campaign_id: int) -> str:
    return f"wb:launch-job-queued:{campaign_id}"


def _launch_enqueue(campaign_id: int, *, only_if_unmarked: bool = False) -> bool:
    fresh = get_redis().set(_launch_mark(campaign_id), 1, nx=True, ex=_LAUNCH_MARK_S)
    if only_if_unmarked and not fresh:
        return False
    queues.enqueue(queues.CAMPAIGN_LAUNCH, campaign_id)
    return True


def _queued_reason(actor: str, now: datetime) -> str:
    """What a queued draft shows until its launch job runs (``launch_queued`` reads it)."""
    return f"{LAUNCH_QUEUED} by {actor or 'someone'} at {now:%Y-%m-%d %H:%M:%S} UTC"


def _together_enqueue(campaign_ids: list[int]) -> None:
    for campaign_id in campaign_ids:
        get_redis().set(_launch_mark(campaign_id), 1, ex=_LAUNCH_MARK_S)
    queues.enqueue(queues.CAMPAIGNS_LAUNCH_TOGETHER, campaign_ids)


def launches_requeue_lost() -> int:
    """Queue again the launches of drafts still marked queued with no job on record.

    A duplicate is harmless: the launch locks the campaign and a second finds it running.
    """
    waiting = Campaign.objects.filter(
        status=CampaignStatus.DRAFT,
        status_reason__startswith=LAUNCH_QUEUED,
        updated_at__lte=timezone.now() - QUEUED_LOST_AFTER,
    ).values_list("pk", flat=True)
    return sum(_launch_enqueue(pk, only_if_unmarked=True) for pk in waiting)
