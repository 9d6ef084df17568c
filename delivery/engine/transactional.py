"""Sending one transactional message: the whole rate of the number, short retries."""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from delivery.cloud.client import SendRequest, get_client
from delivery.cloud.outcomes import classify
from delivery.engine import adaptive, dispatch
from delivery.engine.pacing import number_bucket
from delivery.engine.ratelimit import TrafficClass
from delivery.engine.send_trace import send_trace
from delivery.engine.settle import Effects, RetryPolicy, settle
from delivery.messages import claim_message, settlements_record, transactional_fail
from delivery.metrics import SendMeter
from delivery.models import Message, MessageStatus

# A free-form message's reply buttons, kept in its params: [[id, title], ...].
REPLY_BUTTONS = "reply_buttons"
# Stale quickly: an OTP retried after minutes is useless, so few and short retries.
TRANSACTIONAL_POLICY = RetryPolicy(max_attempts=3, backoff_base_s=0.5, backoff_cap_s=5.0)
# How long a transactional send may wait for a token before going back to the queue.
TOKEN_WAIT_LIMIT_S = 5.0


def transactional_send(*, message_id: int) -> str:
    """Send one transactional message now; return its new status."""
    message = (
        Message.objects.select_related("phone_number", "template").filter(pk=message_id).first()
    )
    if message is None or message.status != MessageStatus.PENDING:
        return "gone" if message is None else message.status
    number = message.phone_number
    bucket = number_bucket(number)
    meter = SendMeter(number.phone_number_id, TrafficClass.TRANSACTIONAL)
    deadline = time.monotonic() + TOKEN_WAIT_LIMIT_S
    while True:
        grant = bucket.acquire(1, TrafficClass.TRANSACTIONAL)
        meter.tokens(asked=1, granted=grant.tokens)
        if grant.tokens:
            break
        if time.monotonic() + grant.wait_s > deadline:
            meter.flush(results=())
            # Still due: the tick's sweep queues it again at its next pass.
            dispatch.transactional_gave_up(message_id=message_id, attempt=message.attempt)
            return MessageStatus.PENDING
        time.sleep(max(0.001, grant.wait_s))
    trace = send_trace()
    if trace is not None:
        trace.granted(message_id, number.phone_number_id, grant.at)
    claimed = claim_message(message_id=message_id)
    if claimed is None:
        bucket.refund(1, TrafficClass.TRANSACTIONAL)
        return "claimed elsewhere"
    template = message.template
    request = SendRequest(
        base_url=str(number.api_base_url or settings.WHATSAPP_API_BASE_URL),
        phone_number_id=number.phone_number_id,
        access_token=number.access_token,
        to=message.to,
        callback_data=f"wb:{message.pk}",
        template_name=template.name if template else None,
        language=template.language if template else None,
        params=message.params or None,
        text=message.text or None,
        # A journey's free-form message inside the window may carry reply buttons.
        buttons=tuple((str(b[0]), str(b[1])) for b in (message.params or {}).get(REPLY_BUTTONS, ()))
        if message.text
        else (),
    )
    result = get_client().send(request)
    effects = Effects()
    settlement = settle(
        message=claimed,
        result=result,
        outcome=classify(result),
        policy=TRANSACTIONAL_POLICY,
        now=timezone.now(),
        effects=effects,
    )
    meter.flush(results=[result], settlements=[settlement])
    if settlement is None:
        # A broken configuration (bad token, missing template): fail now rather than
        # hold an OTP until someone repairs the number.
        transactional_fail(message_id=claimed.id, reason=effects.campaign_broken_reason or "")
        return MessageStatus.FAILED
    settlements_record([settlement], opted_out_contact_ids=effects.opted_out_contact_ids)
    if effects.spam_limited:
        adaptive.rate_spam_limited(bucket=bucket)
    elif effects.throttled:
        adaptive.rate_throttled(bucket=bucket)
    if settlement.status == MessageStatus.PENDING and settlement.next_attempt_at is not None:
        delay = max(timedelta(0), settlement.next_attempt_at - timezone.now())
        dispatch.transactional_enqueue_again(
            message_id=message_id, attempt=settlement.attempt, delay_s=delay.total_seconds()
        )
    return settlement.status
