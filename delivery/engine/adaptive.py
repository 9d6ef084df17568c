"""Adaptive rate: when Meta grants less than configured, follow it down, then creep back.

A steady stream of 130429 means the number's real throughput is below its configured
rate. Each throttled batch pauses the number (1 s, doubling on repeats within a short
streak) and cuts the effective rate by a factor (multiplicative decrease); every quiet
interval afterwards adds back a small step (additive increase) until the configured rate
is reached again. The effective rate lives in Redis (the bucket reads it) and is mirrored
on the PhoneNumber row for the admin and metrics.
"""

from __future__ import annotations

from campaigns.models import PhoneNumber
from delivery.engine.ratelimit import TokenBucket
from whatsblast.core.redis import get_redis

DECREASE_FACTOR = 0.8
INCREASE_STEP = 0.02  # of the configured rate, per quiet interval
QUIET_INTERVAL_S = 2
STREAK_WINDOW_S = 10
MAX_PAUSE_S = 30.0
# 131048 (spam rate limit): Meta has restricted the number for its users' reports. Halve
# the rate, pause a minute, and hold the rate down for five before creeping back.
SPAM_DECREASE_FACTOR = 0.5
SPAM_PAUSE_S = 60.0
SPAM_HOLD_S = 300


def _streak_key(phone_number_id: str) -> str:
    return f"wb:bucket:{{{phone_number_id}}}:throttle_streak"


def _quiet_key(phone_number_id: str) -> str:
    return f"wb:bucket:{{{phone_number_id}}}:increase_gate"


def rate_throttled(*, bucket: TokenBucket) -> float:
    """Pause the number and lower its effective rate; return the pause in seconds."""
    conn = get_redis()
    key = _streak_key(bucket.phone_number_id)
    pipe = conn.pipeline()
    pipe.incr(key)
    pipe.expire(key, STREAK_WINDOW_S)
    streak = int(pipe.execute()[0])
    pause_s = min(MAX_PAUSE_S, 2.0 ** (streak - 1))
    bucket.pause(pause_s)
    current = bucket.adaptive_rate() or bucket.rate
    lowered = max(1.0, current * DECREASE_FACTOR)
    bucket.set_adaptive_rate(lowered)
    _mirror(bucket.phone_number_id, lowered)
    return pause_s


def rate_spam_limited(*, bucket: TokenBucket) -> float:
    """131048: pause the number, halve its rate, and keep it down; return the pause."""
    bucket.pause(SPAM_PAUSE_S)
    current = bucket.adaptive_rate() or bucket.rate
    lowered = max(1.0, current * SPAM_DECREASE_FACTOR)
    bucket.set_adaptive_rate(lowered)
    _mirror(bucket.phone_number_id, lowered)
    # The gate the next increase waits for, held for longer than a quiet interval.
    get_redis().set(_quiet_key(bucket.phone_number_id), 1, ex=SPAM_HOLD_S)
    return SPAM_PAUSE_S


def rate_recovered(*, bucket: TokenBucket) -> None:
    """A batch went out without throttling: step the effective rate back up, gently."""
    current = bucket.adaptive_rate()
    if current is None:
        return
    if not get_redis().set(_quiet_key(bucket.phone_number_id), 1, nx=True, ex=QUIET_INTERVAL_S):
        return
    raised = current + bucket.rate * INCREASE_STEP
    if raised >= bucket.rate:
        bucket.set_adaptive_rate(None)
        _mirror(bucket.phone_number_id, None)
    else:
        bucket.set_adaptive_rate(raised)
        _mirror(bucket.phone_number_id, raised)


def _mirror(phone_number_id: str, rate: float | None) -> None:
    PhoneNumber.objects.filter(phone_number_id=phone_number_id).update(effective_rate=rate)
