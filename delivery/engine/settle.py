"""What each send outcome means for its message: pure decisions, no I/O.

The sender turns every result into a ``Settlement`` (the row's next state) and collects the
side effects that reach beyond the row (pause the number, pause the campaign, mark the
contact opted out), then records them in bulk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from delivery.cloud.client import Accepted, ApiError, SendResult
from delivery.cloud.outcomes import Outcome
from delivery.engine.backoff import USER_CAP_WAIT_S, backoff_delay, pair_limit_delay
from delivery.messages import ClaimedMessage, Settlement
from delivery.models import MessageStatus


@dataclass
class Effects:
    """Consequences beyond single rows, gathered over a batch."""

    throttled: int = 0
    spam_limited: int = 0
    campaign_broken_reason: str | None = None
    opted_out_contact_ids: list[int] = field(default_factory=list)
    released_ids: list[int] = field(default_factory=list)
    # Meta's per-user marketing limit (131049) on the send's answer: (contact, message).
    marketing_limited: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 300.0


def settle(
    *,
    message: ClaimedMessage,
    result: SendResult,
    outcome: Outcome,
    policy: RetryPolicy,
    now: datetime,
    effects: Effects,
) -> Settlement | None:
    """The next state of ``message`` after ``result``; ``None`` means release it untouched."""
    if isinstance(result, Accepted):
        return Settlement(
            message.id,
            MessageStatus.SENT,
            message.attempt + 1,
            message.pair_limit_hits,
            wamid=result.wamid,
            wa_id=result.wa_id,
            # Still a success: Meta delivers a held message later or drops it with a
            # 132015 status webhook, which the webhook applier acts on.
            held_for_quality_assessment=result.held_for_quality_assessment,
        )
    error = result
    entry = _history_entry(error, outcome, message.attempt + 1, now)
    base: dict[str, Any] = {
        "message_id": message.id,
        "error_code": error.code,
        "error_title": error.title[:500],
        "error_details": error.details,
        "history_entry": entry,
    }
    if outcome in (Outcome.THROTTLED, Outcome.SPAM_LIMITED):
        # Not the message's fault: the number is over its rate. Back to the queue without
        # spending an attempt; the number is paused for everyone (131048: for longer).
        if outcome is Outcome.SPAM_LIMITED:
            effects.spam_limited += 1
        else:
            effects.throttled += 1
        return Settlement(
            status=MessageStatus.PENDING,
            attempt=message.attempt,
            pair_limit_hits=message.pair_limit_hits,
            next_attempt_at=now + timedelta(seconds=1),
            **base,
        )
    if outcome is Outcome.PAIR_LIMITED:
        return Settlement(
            status=MessageStatus.PENDING,
            attempt=message.attempt,
            pair_limit_hits=message.pair_limit_hits + 1,
            next_attempt_at=now + timedelta(seconds=pair_limit_delay(message.pair_limit_hits)),
            **base,
        )
    if outcome is Outcome.USER_CAPPED:
        if message.contact_id is not None:
            effects.marketing_limited.append((message.contact_id, message.id))
        return _retry_or_dead(message, policy, now, base, delay_s=USER_CAP_WAIT_S)
    if outcome is Outcome.OPTED_OUT:
        if message.contact_id is not None:
            effects.opted_out_contact_ids.append(message.contact_id)
        return _failed(message, base)
    if outcome is Outcome.TRANSIENT:
        delay = backoff_delay(
            message.attempt + 1, base_s=policy.backoff_base_s, cap_s=policy.backoff_cap_s
        )
        return _retry_or_dead(message, policy, now, base, delay_s=delay)
    if outcome is Outcome.AMBIGUOUS:
        # The request may have reached Meta: never resend blindly. The reconciler settles
        # it from webhook evidence, or by the campaign's policy after a window.
        return Settlement(
            status=MessageStatus.UNKNOWN,
            attempt=message.attempt + 1,
            pair_limit_hits=message.pair_limit_hits,
            **base,
        )
    if outcome is Outcome.CAMPAIGN_BROKEN:
        effects.campaign_broken_reason = (
            f"Cloud API error {error.code}: {error.title}"
            + (f" ({error.details})" if error.details else "")
        )[:500]
        effects.released_ids.append(message.id)
        return None
    return _failed(message, base)


def _failed(message: ClaimedMessage, base: dict[str, Any]) -> Settlement:
    return Settlement(
        status=MessageStatus.FAILED,
        attempt=message.attempt + 1,
        pair_limit_hits=message.pair_limit_hits,
        **base,
    )


def _retry_or_dead(
    message: ClaimedMessage,
    policy: RetryPolicy,
    now: datetime,
    base: dict[str, Any],
    *,
    delay_s: float,
) -> Settlement:
    attempt = message.attempt + 1
    if attempt >= policy.max_attempts:
        return Settlement(
            status=MessageStatus.DEAD,
            attempt=attempt,
            pair_limit_hits=message.pair_limit_hits,
            **base,
        )
    return Settlement(
        status=MessageStatus.PENDING,
        attempt=attempt,
        pair_limit_hits=message.pair_limit_hits,
        next_attempt_at=now + timedelta(seconds=delay_s),
        **base,
    )


def _history_entry(
    error: ApiError, outcome: Outcome, attempt: int, now: datetime
) -> dict[str, Any]:
    return {
        "at": now.isoformat(),
        "attempt": attempt,
        "outcome": str(outcome),
        "http_status": error.http_status,
        "code": error.code,
        "title": error.title,
        "details": error.details,
    }
