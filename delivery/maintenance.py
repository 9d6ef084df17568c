"""The periodic maintenance pass: reconcile, launch due schedules, keep campaigns moving."""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from campaigns.canary import canaries_check
from campaigns.jobs import template_sync_schedule
from campaigns.models import Campaign, CampaignStatus
from delivery import dispatch
from delivery.messages import due_transactional
from delivery.reconcile import reconcile
from whatsblast import queues

logger = logging.getLogger(__name__)

# The tick runs every second or two: it must not be held up by a webhook backlog (the
# applier's own jobs drain that).
WEBHOOK_SWEEP_BUDGET_S = 2.0

# Running campaigns with a row due now: these need a live sender chain.
_CAMPAIGNS_WITH_DUE_WORK_SQL = """
SELECT c.id FROM campaigns_campaign c
 WHERE c.status = 'running'
   AND EXISTS (SELECT 1 FROM delivery_message m
                WHERE m.campaign_id = c.id AND m.status = 'pending'
                  AND m.next_attempt_at <= now())
"""


def maintenance_tick() -> dict[str, Any]:
    report = reconcile()
    started = _start_due_schedules()
    # Before the kicks: rows a canary verdict releases are due now and get their senders.
    canaries = canaries_check()
    kicked = 0
    for campaign in Campaign.objects.raw(_CAMPAIGNS_WITH_DUE_WORK_SQL):
        kicked += dispatch.campaign_kick(campaign_id=campaign.pk)
    requeued = sum(
        dispatch.transactional_enqueue(message_id=message_id, attempt=attempt)
        for message_id, attempt in due_transactional()
    )
    applied = _apply_webhooks()
    # The template catalogue, at most once per TEMPLATE_SYNC_INTERVAL_SECONDS.
    templates_sync_queued = template_sync_schedule()
    return {
        "leases_expired": report.leases_expired,
        "unknown_resent": report.resent,
        "unknown_failed": report.failed,
        "completed": report.completed_campaigns,
        "schedules_started": started,
        "canaries": canaries.as_dict(),
        "slots_started": kicked,
        "transactional_requeued": requeued,
        "webhooks": applied,
        "templates_sync_queued": templates_sync_queued,
    }


def _start_due_schedules() -> int:
    """Queue the launch of due scheduled campaigns (RQ's scheduler may have lost them).

    Launching runs in its own job, not in this tick: a million recipients take longer
    than a tick may run.
    """

    from delivery.jobs import campaign_start_job
    from whatsblast.redis import get_redis

    queued = 0
    due = Campaign.objects.filter(
        status=CampaignStatus.SCHEDULED, scheduled_at__lte=timezone.now()
    ).values_list("pk", flat=True)
    for campaign_id in due:
        if get_redis().set(f"wb:launch-queued:{campaign_id}", 1, nx=True, ex=600):
            queues.get_queue(dispatch.MAINTENANCE_QUEUE).enqueue(
                campaign_start_job, campaign_id, job_timeout=1800
            )
            queued += 1
    return queued


def _apply_webhooks() -> dict[str, int]:
    """The webhook sweep: events a missed enqueue left behind, and unmatched retries."""
    from webhooks.applier import events_drain

    return events_drain(budget_seconds=WEBHOOK_SWEEP_BUDGET_S).as_dict()
