"""Launching from the admin: validated at once, run as a background job, or scheduled.

Turning a million contacts into message rows takes over a minute, far longer than a web
request may take, so "launch now" validates in the request (the person sees at once what
is wrong) and then queues ``campaign_launch_job`` on the maintenance queue, whose timeout
allows it. The campaign stays a draft until the job's launch commits, marked by its
``status_reason`` so the page can say it is on its way; nothing else starts drafts, so the
job is the only launcher, and ``campaign_start`` makes a second one a no-op anyway.

A schedule is only a status change, done in the request; the existing schedule path
(RQ's scheduler and the maintenance tick) launches it when due.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import close_old_connections, transaction
from django.utils import timezone

from campaigns.launch import LaunchError, campaign_start, campaign_validate
from campaigns.lifecycle import LifecycleError, campaign_resume
from campaigns.models import Campaign, CampaignStatus
from whatsblast import queues

LAUNCH_QUEUED = "Launch queued"
# A million recipients launch in about 75 s; leave room for a slow database.
LAUNCH_JOB_TIMEOUT_S = 1800


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
    from delivery.dispatch import MAINTENANCE_QUEUE

    reason = f"{LAUNCH_QUEUED} by {actor or 'someone'} at {now:%Y-%m-%d %H:%M:%S} UTC"
    with transaction.atomic():
        Campaign.objects.filter(pk=campaign.pk, status=CampaignStatus.DRAFT).update(
            status_reason=reason[:500]
        )
        queues.after_commit(
            lambda: queues.get_queue(MAINTENANCE_QUEUE).enqueue(
                campaign_launch_job, campaign.pk, job_timeout=LAUNCH_JOB_TIMEOUT_S
            ),
            what="campaign launch",
        )
    campaign.status_reason = reason[:500]
    return "queued"


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


def campaign_launch_job(campaign_id: int) -> dict[str, Any]:
    """Launch a queued draft; a refusal (the audience changed since) is written on it."""
    close_old_connections()
    campaign = Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.DRAFT).first()
    if campaign is None:
        return {"started": False, "reason": "not a draft"}
    from campaigns.live import campaign_live_forget

    try:
        return campaign_start(campaign=campaign).as_dict()
    except LaunchError as exc:
        Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.DRAFT).update(
            status_reason=f"Launch refused: {exc}"[:500]
        )
        return {"started": False, "reason": str(exc)}
    finally:
        campaign_live_forget(campaign_id=campaign_id)  # the page shows the outcome at once
