"""Putting work on the RQ queues: campaign slots, scheduled launches, transactional sends."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings

from campaigns.models import Campaign, CampaignStatus
from delivery.engine import slots
from delivery.messages import due_transactional
from delivery.models import MessageStatus
from whatsblast.core import queues
from whatsblast.core.redis import get_redis


def slots_for(*, rate_per_second: float, reserve: float) -> int:
    """Parallel sender chains for a campaign: one per CAMPAIGN_SLOT_RATE msg/s of its share.

    One process sends a few hundred messages a second before its CPU is the limit, so a
    1,000 msg/s number is spread over several chains, on several workers.
    """
    share = rate_per_second * (1 - reserve)
    return max(1, math.ceil(share / settings.CAMPAIGN_SLOT_RATE))


def campaign_kick(*, campaign_id: int) -> int:
    """Start a job chain on every free slot of a running campaign; return how many."""
    campaign = Campaign.objects.select_related("phone_number").get(pk=campaign_id)
    count = slots_for(
        rate_per_second=campaign.phone_number.rate_per_second,
        reserve=campaign.phone_number.transactional_reserve,
    )
    started = 0
    for slot, held in enumerate(slots.slots_held(campaign_id, count)):
        if held:
            continue
        token = slots.slot_reserve(campaign_id, slot)
        if token is None:
            continue
        queues.enqueue(queues.CAMPAIGN_SEND, campaign_id, slot, token)
        started += 1
    return started


def campaign_continue(*, campaign_id: int, slot: int, token: str) -> None:
    queues.enqueue(queues.CAMPAIGN_SEND, campaign_id, slot, token)


def campaign_schedule(*, campaign_id: int, at: datetime) -> None:
    """Launch at ``at`` through RQ's scheduler (workers run with --with-scheduler).

    The maintenance tick also starts due scheduled campaigns, so a schedule survives the
    loss of Redis.
    """
    queues.enqueue(queues.CAMPAIGN_START_SCHEDULED, campaign_id, at=at)


def transactional_enqueue(*, message_id: int, attempt: int) -> bool:
    """Queue one transactional send, once per attempt (sweeps may ask again)."""
    if not get_redis().set(f"wb:txn-queued:{message_id}:{attempt}", 1, nx=True, ex=300):
        return False
    queues.enqueue(queues.TRANSACTIONAL_SEND, message_id)
    return True


def transactional_enqueue_fresh(*, message_id: int, delay_s: float = 0.0) -> None:
    """Queue a transactional send unconditionally: a retry after ``delay_s``, or a fresh
    attempt after a requeue (whose once-per-attempt mark for attempt 0 may still stand).
    A duplicate job is harmless: the send claims its row first."""
    if delay_s > 0:
        queues.enqueue(queues.TRANSACTIONAL_SEND, message_id, delay=timedelta(seconds=delay_s))
    else:
        queues.enqueue(queues.TRANSACTIONAL_SEND, message_id)


def transactional_waiting() -> bool:
    """True when transactional jobs wait: campaign senders step aside for them."""
    return queues.waiting(queues.TRANSACTIONAL) > 0


# Running campaigns with a row due now: these need a live sender chain. The EXISTS walks
# the partial pending index (campaign, next_attempt_at) and stops at the first row.
_CAMPAIGNS_WITH_DUE_WORK_SQL = f"""
SELECT c.id FROM campaigns_campaign c
 WHERE c.status = '{CampaignStatus.RUNNING}'
   AND EXISTS (SELECT 1 FROM delivery_message m
                WHERE m.campaign_id = c.id AND m.status = '{MessageStatus.PENDING}'
                  AND m.next_attempt_at <= now())
"""  # noqa: S608 - built from constants


def campaigns_due_kick() -> int:
    """Give every running campaign with due work its sender chains; return how many started."""
    return sum(
        campaign_kick(campaign_id=campaign.pk)
        for campaign in Campaign.objects.raw(_CAMPAIGNS_WITH_DUE_WORK_SQL)
    )


def transactional_due_requeue() -> int:
    """Queue due transactional sends (retries, and sends whose job was lost)."""
    return sum(
        transactional_enqueue(message_id=message_id, attempt=attempt)
        for message_id, attempt in due_transactional()
    )
