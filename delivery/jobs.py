"""RQ jobs: ids in, one service call, nothing else. Rules live in the services."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


def campaign_send_job(campaign_id: int, slot: int, token: str) -> dict[str, Any]:
    from campaigns.lifecycle import campaigns_complete_finished
    from campaigns.models import Campaign, CampaignStatus
    from delivery import dispatch, slots
    from delivery.sender import CampaignSlotSender

    if not slots.slot_renew(campaign_id, slot, token):
        return {"stopped": "slot owned by another job"}
    campaign = (
        Campaign.objects.select_related("phone_number__account", "template")
        .filter(pk=campaign_id)
        .first()
    )
    if campaign is None or campaign.status != CampaignStatus.RUNNING:
        slots.slot_release(campaign_id, slot, token)
        return {"stopped": "campaign not running"}
    count = dispatch.slots_for(
        rate_per_second=campaign.phone_number.rate_per_second,
        reserve=campaign.phone_number.transactional_reserve,
    )
    sender = CampaignSlotSender(campaign, slots=count, should_yield=dispatch.transactional_waiting)
    handed_over: list[bool] = []

    def hand_over() -> None:
        dispatch.campaign_continue(campaign_id=campaign_id, slot=slot, token=token)
        handed_over.append(True)

    try:
        report = sender.run(
            budget_s=settings.CAMPAIGN_JOB_BUDGET_SECONDS,
            renew=lambda: slots.slot_renew(campaign_id, slot, token),
            hand_over=hand_over,
        )
    except Exception:
        # The job dies (PostgreSQL went away, a bug): free its slot now, so the next
        # maintenance tick starts a fresh chain instead of waiting out the lease. The rows
        # it had in flight are the reconciler's, as after a crash.
        if not handed_over:
            try:
                slots.slot_release(campaign_id, slot, token)
            except RedisError:
                logger.warning(
                    "campaign %s slot %s not released: Redis unavailable", campaign_id, slot
                )
        raise
    if not report.handed_over:
        slots.slot_release(campaign_id, slot, token)
        campaigns_complete_finished(campaign_id=campaign_id)
    return {"sent": report.sent, "settled": report.settled, "stopped": report.stopped_because}


def campaign_start_job(campaign_id: int) -> dict[str, Any]:
    from campaigns.launch import campaign_start_scheduled

    summary = campaign_start_scheduled(campaign_id=campaign_id)
    return summary.as_dict() if summary is not None else {"started": False}


def transactional_send_job(message_id: int) -> str:
    from delivery.transactional import transactional_send

    return str(transactional_send(message_id=message_id))


def maintenance_tick_job() -> dict[str, Any]:
    from delivery.maintenance import maintenance_tick

    close_old_connections()
    return maintenance_tick()
