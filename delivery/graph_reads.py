"""What Meta says a number and its account are: read from the Graph API, never guessed.

``GET /{phone_number_id}`` gives the display number, the verified name and its review
status, the quality rating, the messaging limit (the portfolio's, since October 2025) and
the throughput level; ``GET /{waba_id}`` the account's review status. ``phonenumber add``
reads them at once and a periodic job every ``GRAPH_READ_INTERVAL_SECONDS``; each row
keeps when it was last read and the error if the read failed (a refused token says so).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from campaigns.models import BusinessAccount, MessagingLimitTier, PhoneNumber, QualityRating
from delivery.cloud.client import (
    ACCOUNT_FIELDS,
    MESSAGING_LIMIT_FIELD,
    MESSAGING_LIMIT_FIELD_V23,
    ApiError,
    get_client,
    number_fields,
)
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

_DUE_KEY = "wb:graph-read:due"
# Meta's throughput levels: STANDARD is 80 msg/s, HIGH up to 1,000. HIGH raises the
# configured rate to 1,000; under STANDARD the configured rate stands (a lower one is an
# operator's choice, a higher one meets 130429s and the adaptive rate follows them down).
HIGH_THROUGHPUT_RATE = 1000
# Older tier names: a smaller limit than ours is taken as our smallest (never a larger one).
_TIER_ALIASES = {"TIER_50": MessagingLimitTier.TIER_250, "TIER_1K": MessagingLimitTier.TIER_250}


@dataclass(frozen=True)
class GraphRead:
    phone_number_id: str
    ok: bool
    changed: tuple[str, ...]
    error: str = ""


def _error_text(error: ApiError) -> str:
    code = f"code {error.code}" if error.code is not None else f"HTTP {error.http_status}"
    return f"{code}: {error.title}"[:500]


def _tier(data: dict[str, Any]) -> str:
    """The portfolio's tier from either version's field (a string such as "TIER_2K"), the
    v24+ one first; anything else reads as unknown and changes nothing."""
    for key in (MESSAGING_LIMIT_FIELD, MESSAGING_LIMIT_FIELD_V23):
        value = data.get(key)
        value = value.upper() if isinstance(value, str) else ""
        value = _TIER_ALIASES.get(value, value)
        if value in MessagingLimitTier.values:
            return value
    return ""


def phone_number_graph_read(*, phone_number: PhoneNumber) -> GraphRead:
    """Read the number and its account from Meta and record what they say."""
    client = get_client()
    base = str(phone_number.api_base_url or settings.WHATSAPP_API_BASE_URL)
    now = timezone.now()
    result = client.get_node(
        base_url=base,
        node_id=phone_number.phone_number_id,
        access_token=phone_number.access_token,
        fields=number_fields(client.api_version),
    )
    if isinstance(result, ApiError):
        error = _error_text(result)
        PhoneNumber.objects.filter(pk=phone_number.pk).update(graph_error=error, graph_read_at=now)
        logger.warning("number %s not read from Meta: %s", phone_number.phone_number_id, error)
        return GraphRead(phone_number.phone_number_id, False, (), error)
    data = result.data
    changed = _number_apply(phone_number, data)
    phone_number.graph_read_at, phone_number.graph_error = now, ""
    phone_number.save(update_fields=[*changed, "graph_read_at", "graph_error", "updated_at"])
    changed += _account_read(phone_number.account, base, phone_number, data)
    return GraphRead(phone_number.phone_number_id, True, tuple(changed))


def _number_apply(number: PhoneNumber, data: dict[str, Any]) -> list[str]:
    values: dict[str, Any] = {}
    if data.get("display_phone_number"):
        values["display_phone_number"] = str(data["display_phone_number"])[:32]
    values["verified_name"] = str(data.get("verified_name") or "")[:200]
    values["name_status"] = str(data.get("name_status") or "").upper()[:32]
    quality = str(data.get("quality_rating") or "").upper()
    if quality:
        values["quality_rating"] = quality if quality in QualityRating.values else "UNKNOWN"
    throughput = data.get("throughput")
    level = str(throughput.get("level") or "").upper() if isinstance(throughput, dict) else ""
    values["throughput_level"] = level[:32]
    if level == "HIGH":
        values["rate_per_second"] = HIGH_THROUGHPUT_RATE
    changed = [name for name, value in values.items() if getattr(number, name) != value]
    for name in changed:
        setattr(number, name, values[name])
    return changed


def _account_read(
    account: BusinessAccount, base: str, number: PhoneNumber, data: dict[str, Any]
) -> list[str]:
    """The portfolio's limit (given on the number) and the account's own fields."""
    fields: list[str] = []
    tier = _tier(data)
    if tier and tier != account.messaging_limit_tier:
        account.messaging_limit_tier = tier
        fields.append("messaging_limit_tier")
    result = get_client().get_node(
        base_url=base,
        node_id=account.waba_id,
        access_token=number.access_token,
        fields=ACCOUNT_FIELDS,
    )
    account.graph_read_at = timezone.now()
    if isinstance(result, ApiError):
        account.graph_error = _error_text(result)
    else:
        account.graph_error = ""
        review = str(result.data.get("account_review_status") or "").upper()[:32]
        if review != account.account_review_status:
            account.account_review_status = review
            fields.append("account_review_status")
        onboarding = str(result.data.get("marketing_messages_onboarding_status") or "")[:48]
        if onboarding and onboarding.upper() != account.mm_onboarding_status:
            account.mm_onboarding_status = onboarding.upper()
            fields.append("mm_onboarding_status")
        if not account.name and result.data.get("name"):
            account.name = str(result.data["name"])[:200]
            fields.append("name")
    account.save(update_fields=[*fields, "graph_read_at", "graph_error", "updated_at"])
    return fields


def numbers_graph_read_all() -> list[GraphRead]:
    """Read every number (the periodic job)."""
    numbers = PhoneNumber.objects.select_related("account").order_by("pk")
    return [phone_number_graph_read(phone_number=number) for number in numbers]


def graph_read_schedule() -> bool:
    """Enqueue the periodic read unless one was enqueued within the interval."""
    interval = int(settings.GRAPH_READ_INTERVAL_SECONDS)
    if interval <= 0 or not get_redis().set(_DUE_KEY, 1, nx=True, ex=interval):
        return False
    queues.enqueue(queues.GRAPH_READ)
    return True
