"""Putting work on the RQ queues: campaign slots, scheduled launches, transactional sends."""

from __future__ import annotations

import math
from datetime import datetime

from django.conf import settings

from delivery import slots
from whatsblast import queues
from whatsblast.redis import get_redis

CAMPAIGNS_QUEUE = "campaigns"
TRANSACTIONAL_QUEUE = "transactional"
MAINTENANCE_QUEUE = "maintenance"


def slots_for(*, rate_per_second: float, reserve: float) -> int:
    """Parallel sender chains for a campaign: one per CAMPAIGN_SLOT_RATE msg/s of its share.

    One process sends a few hundred messages a second before its CPU is the limit, so a
    1,000 msg/s number is spread over several chains, on several workers.
    """
    share = rate_per_second * (1 - reserve)
    return max(1, math.ceil(share / settings.CAMPAIGN_SLOT_RATE))


def campaign_kick(*, campaign_id: int) -> int:
    """Start a job chain on every free slot of a running campaign; return how many."""
    from campaigns.models import Campaign
    from delivery.jobs import campaign_send_job

    campaign = Campaign.objects.select_related("phone_number").get(pk=campaign_id)
    count = slots_for(
        rate_per_second=campaign.phone_number.rate_per_second,
        reserve=campaign.phone_number.transactional_reserve,
    )
    queue = queues.get_queue(CAMPAIGNS_QUEUE)
    started = 0
    for slot, held in enumerate(slots.slots_held(campaign_id, count)):
        if held:
            continue
        token = slots.slot_reserve(campaign_id, slot)
        if token is None:
            continue
        queue.enqueue(campaign_send_job, campaign_id, slot, token)
        started += 1
    return started


def campaign_continue(*, campaign_id: int, slot: int, token: str) -> None:
    from delivery.jobs import campaign_send_job

    queues.get_queue(CAMPAIGNS_QUEUE).enqueue(campaign_send_job, campaign_id, slot, token)


def campaign_schedule(*, campaign_id: int, at: datetime) -> None:
    """Launch at ``at`` through RQ's scheduler (workers run with --with-scheduler).

    The maintenance tick also starts due scheduled campaigns, so a schedule survives the
    loss of Redis.
    """
    from delivery.jobs import campaign_start_job

    queues.get_queue(MAINTENANCE_QUEUE).enqueue_at(at, campaign_start_job, campaign_id)


def transactional_enqueue(*, message_id: int, attempt: int) -> bool:
    """Queue one transactional send, once per attempt (sweeps may ask again)."""
    from delivery.jobs import transactional_send_job

    if not get_redis().set(f"wb:txn-queued:{message_id}:{attempt}", 1, nx=True, ex=300):
        return False
    queues.get_queue(TRANSACTIONAL_QUEUE).enqueue(transactional_send_job, message_id)
    return True


def transactional_waiting() -> bool:
    """True when transactional jobs wait: campaign senders step aside for them."""
    return bool(queues.get_queue(TRANSACTIONAL_QUEUE).count)
