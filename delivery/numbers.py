"""Operator actions on a phone number: pause, resume, and a test send.

A number's pause lives in two places: the row (``paused_until``, ``paused_reason``, what
people read) and the token bucket in Redis (what every worker obeys). These services keep
the two together. The bucket may also be paused on its own for a few seconds after
throttling errors (delivery.engine.adaptive); ``phone_number_pause_state`` shows both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from campaigns.models import PhoneNumber, Template
from delivery.api.errors import ApiProblem
from delivery.api.keys import api_key_issue
from delivery.api.services import transactional_message_create
from delivery.api.validation import message_request_parse, request_sha256
from delivery.engine import adaptive
from delivery.engine.pacing import number_bucket
from delivery.models import ApiKey, Message

logger = logging.getLogger(__name__)

# Test sends go through the transactional API's own service, which files every message
# under an API key. This key is theirs; its secret is generated and thrown away at once,
# so it can authenticate nobody.
TEST_SEND_KEY_NAME = "Admin test sends (internal: no usable key)"


@dataclass(frozen=True)
class PauseState:
    until: datetime | None
    reason: str
    # Seconds the shared token bucket still refuses sends (an operator's pause or a
    # throttling back-off); 0 when it sends; None when Redis cannot be asked.
    bucket_seconds: float | None

    @property
    def paused(self) -> bool:
        held = self.bucket_seconds is not None and self.bucket_seconds > 0
        return held or (self.until is not None and self.until > timezone.now())


def phone_number_pause_state(*, phone_number: PhoneNumber) -> PauseState:
    try:
        bucket_seconds: float | None = number_bucket(phone_number).paused_for()
    except redis.RedisError:
        bucket_seconds = None
    return PauseState(
        until=phone_number.paused_until,
        reason=phone_number.paused_reason,
        bucket_seconds=bucket_seconds,
    )


def phone_number_pause(*, phone_number: PhoneNumber, until: datetime, reason: str) -> PhoneNumber:
    """Stop every send from the number (campaign and transactional) until ``until``."""
    seconds = (until - timezone.now()).total_seconds()
    if seconds <= 0:
        raise ValidationError("The pause must end in the future.")
    PhoneNumber.objects.filter(pk=phone_number.pk).update(
        paused_until=until, paused_reason=reason[:500], updated_at=timezone.now()
    )
    number_bucket(phone_number).pause(seconds)
    phone_number.refresh_from_db()
    logger.info("phone number %s paused for %.0fs", phone_number.phone_number_id, seconds)
    return phone_number


def phone_number_resume(*, phone_number: PhoneNumber) -> PhoneNumber:
    """Send again now: clear the row's pause and the bucket's (a pause of zero seconds)."""
    PhoneNumber.objects.filter(pk=phone_number.pk).update(
        paused_until=None, paused_reason="", updated_at=timezone.now()
    )
    number_bucket(phone_number).pause(0)
    phone_number.refresh_from_db()
    logger.info("phone number %s resumed", phone_number.phone_number_id)
    return phone_number


def phone_numbers_throttle(*, phone_number_ids: dict[str, bool]) -> int:
    """Slow the numbers Meta said were sending too fast (after the fact, by callback).

    ``phone_number_ids`` maps Meta's id to whether it was the spam limit (131048) rather
    than throughput (130429). Returns how many of our numbers were slowed.
    """
    numbers = PhoneNumber.objects.filter(phone_number_id__in=list(phone_number_ids))
    slowed = 0
    for number in numbers:
        bucket = number_bucket(number)
        try:
            if phone_number_ids[number.phone_number_id]:
                pause = adaptive.rate_spam_limited(bucket=bucket)
            else:
                pause = adaptive.rate_throttled(bucket=bucket)
        except redis.RedisError as exc:
            logger.warning("number %s not slowed: %s", number.phone_number_id, exc)
            continue
        logger.warning("number %s slowed by callback: paused %.0fs", number.phone_number_id, pause)
        slowed += 1
    return slowed


def phone_number_test_send(
    *,
    phone_number: PhoneNumber,
    to: str,
    template: Template | None = None,
    body_params: list[str] | dict[str, str] | None = None,
    header: str = "",
    text: str = "",
) -> Message:
    """Send one message from the number exactly as the transactional API would.

    The request is validated and created by the API's own functions (same checks: a
    valid recipient, an approved template with the params it takes, or a text inside the
    24-hour service window), then queued on the transactional queue.
    """
    data: dict[str, Any] = {"phone_number_id": phone_number.phone_number_id, "to": to}
    if template is not None:
        params: dict[str, Any] = {}
        if body_params:
            params["body"] = body_params
        if header:
            params["header"] = {"value": header}
        data["template"] = {"name": template.name, "language": template.language, "params": params}
    else:
        data["text"] = text
    try:
        request = message_request_parse(data)
        created = transactional_message_create(
            api_key=_test_send_key(),
            request=request,
            idempotency_key=None,
            request_sha256=request_sha256(data),
        )
    except ApiProblem as problem:
        # A 400 names each field at fault; the others (422, 403) explain in their message.
        details = [f"{field}: {message}" for field, message in problem.fields.items()]
        invalid = problem.code == "invalid_request" and details
        raise ValidationError(details if invalid else [problem.message]) from problem
    return created.message


def _test_send_key() -> ApiKey:
    key = ApiKey.objects.filter(name=TEST_SEND_KEY_NAME).order_by("pk").first()
    if key is not None:
        return key
    key = ApiKey(name=TEST_SEND_KEY_NAME, all_numbers=True)
    api_key_issue(key)  # the raw key it returns is dropped: nobody can use this key
    with transaction.atomic():
        key.save()
    return key
