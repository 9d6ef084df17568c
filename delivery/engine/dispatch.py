"""Putting work on the RQ queues: number slots, scheduled launches, transactional sends."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from campaigns.models import Campaign, CampaignStatus, PhoneNumber
from delivery.engine import slots
from delivery.messages import due_transactional
from delivery.models import MessageStatus
from whatsblast.core import queues
from whatsblast.core.redis import get_redis


def slots_for(*, rate_per_second: float, reserve: float) -> int:
    """Senders for a number at once: one per CAMPAIGN_SLOT_RATE msg/s of its campaign share.

    One process sends a few hundred messages a second before its CPU is the limit, so a
    1,000 msg/s number is spread over several slots, held by several workers.
    """
    share = rate_per_second * (1 - reserve)
    return max(1, math.ceil(share / settings.CAMPAIGN_SLOT_RATE))


def number_kick(*, phone_number_pk: int) -> int:
    """Offer every free slot of the number to a worker; return how many were offered."""
    return numbers_kick(phone_number_pks=[phone_number_pk])


def numbers_kick(*, phone_number_pks: Sequence[int]) -> int:
    """Offer every free slot of these numbers to the workers; return how many were offered.

    One query for the numbers and one Redis round trip for all their slots, whatever their
    count: the tick kicks every number with due work each second, and one query and one
    round trip per number cost a worker an eighth of its CPU at fifty numbers.
    """
    if not phone_number_pks:
        return 0
    numbers = (
        PhoneNumber.objects.filter(pk__in=sorted(set(phone_number_pks)))
        .only("pk", "phone_number_id", "rate_per_second", "transactional_reserve")
        .order_by("pk")
    )
    wanted = [
        (n, slots_for(rate_per_second=n.rate_per_second, reserve=n.transactional_reserve))
        for n in numbers
    ]
    held = slots.slots_held_many([(n.phone_number_id, count) for n, count in wanted])
    started = 0
    for (number, _), number_held in zip(wanted, held, strict=True):
        for slot, is_held in enumerate(number_held):
            if is_held:
                continue
            token = slots.slot_reserve(number.phone_number_id, slot)
            if token is None:
                continue
            queues.enqueue(queues.NUMBER_SEND, int(number.pk), slot, token, 0)
            started += 1
    return started


def number_continue(
    *, phone_number_pk: int, slot: int, token: str, passes: int = 0, delay_s: float = 0.0
) -> None:
    """Offer a reserved slot again (to another worker, or after a pass)."""
    delay = timedelta(seconds=delay_s) if delay_s > 0 else None
    queues.enqueue(queues.NUMBER_SEND, phone_number_pk, slot, token, passes, delay=delay)


def campaign_kick(*, campaign_id: int) -> int:
    """Give a running campaign's numbers (its own and its pool's) their senders."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return 0
    numbers = {campaign.phone_number_id, *campaign.pool_numbers.values_list("pk", flat=True)}
    return numbers_kick(phone_number_pks=sorted(numbers))


def campaign_schedule(*, campaign_id: int, at: datetime) -> None:
    """Launch at ``at`` through RQ's scheduler (workers run with --with-scheduler).

    The maintenance tick also starts due scheduled campaigns, so a schedule survives the
    loss of Redis.
    """
    queues.enqueue(queues.CAMPAIGN_START_SCHEDULED, campaign_id, at=at)


def _queued_mark(message_id: int, attempt: int) -> str:
    return f"wb:txn-queued:{message_id}:{attempt}"


def transactional_enqueue(*, message_id: int, attempt: int) -> bool:
    """Queue one transactional send, once per attempt (sweeps may ask again)."""
    if not get_redis().set(_queued_mark(message_id, attempt), 1, nx=True, ex=300):
        return False
    queues.enqueue(queues.TRANSACTIONAL_SEND, message_id)
    return True


def transactional_gave_up(*, message_id: int, attempt: int) -> None:
    """The attempt's job went back without sending (no token in time): let the next sweep
    queue it again. Its once-per-attempt mark would otherwise hold it back for the mark's
    five minutes, an OTP stuck behind a throttled number's pause long after it ended."""
    get_redis().delete(_queued_mark(message_id, attempt))


# How long after a send queued again is due the sweep leaves it to its job.
ENQUEUE_AGAIN_GRACE_S = 5.0


def transactional_enqueue_again(*, message_id: int, attempt: int, delay_s: float = 0.0) -> None:
    """Queue a transactional send of ``attempt`` (the row's attempt now) again, now or after
    ``delay_s`` through RQ's scheduler: a retry, or a dead letter requeued.

    The attempt's queued mark is set to run out ENQUEUE_AGAIN_GRACE_S after the send is
    due, not after the mark's usual five minutes: until then the sweep leaves the send to
    this job, and past it the sweep queues the send itself. A throttled send keeps its
    attempt, and a requeued dead letter starts again at attempt 0, so the mark the first
    job set would otherwise hold them back for five minutes whenever no worker runs a
    scheduler or Redis lost the job. A duplicate job is harmless: the send claims its row
    first.
    """
    mark_ms = math.ceil((max(0.0, delay_s) + ENQUEUE_AGAIN_GRACE_S) * 1000)
    get_redis().set(_queued_mark(message_id, attempt), 1, px=mark_ms)
    if delay_s > 0:
        queues.enqueue(queues.TRANSACTIONAL_SEND, message_id, delay=timedelta(seconds=delay_s))
    else:
        queues.enqueue(queues.TRANSACTIONAL_SEND, message_id)


def transactional_waiting() -> bool:
    """True when transactional jobs wait: a sender running in a job steps aside for them."""
    return queues.waiting(queues.TRANSACTIONAL) > 0


# Numbers with due work of a running campaign (its own number or one of its pool): these
# need live senders. Each EXISTS walks the partial pending index (campaign, number,
# next_attempt_at) and stops at the first row.
_NUMBERS_WITH_DUE_WORK_SQL = f"""
SELECT n.id FROM campaigns_phonenumber n
 WHERE EXISTS (
   SELECT 1 FROM campaigns_campaign c
    WHERE c.status = '{CampaignStatus.RUNNING}'
      AND (c.phone_number_id = n.id
           OR EXISTS (SELECT 1 FROM campaigns_campaign_pool_numbers p
                       WHERE p.campaign_id = c.id AND p.phonenumber_id = n.id))
      AND EXISTS (SELECT 1 FROM delivery_message m
                   WHERE m.campaign_id = c.id AND m.phone_number_id = n.id
                     AND m.send_status = '{MessageStatus.PENDING}'
                     AND m.next_attempt_at <= now()))
"""  # noqa: S608 - built from constants


def campaigns_due_kick() -> int:
    """Give every number with due campaign work its senders; return how many were offered."""
    with connection.cursor() as cursor:
        cursor.execute(_NUMBERS_WITH_DUE_WORK_SQL)
        pks = [row[0] for row in cursor.fetchall()]
    return numbers_kick(phone_number_pks=pks)


def transactional_due_requeue() -> int:
    """Queue due transactional sends (retries, and sends whose job was lost)."""
    return sum(
        transactional_enqueue(message_id=message_id, attempt=attempt)
        for message_id, attempt in due_transactional()
    )
