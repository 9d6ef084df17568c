"""No one-second window holds more than the rate, even when a full burst follows a stall."""

from __future__ import annotations

import time

from delivery.engine.ratelimit import TokenBucket, TrafficClass


def _grants(bucket: TokenBucket, traffic: TrafficClass, seconds: float) -> list[tuple[float, int]]:
    grants: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        grant = bucket.acquire(20, traffic)
        if grant.tokens:
            grants.append((time.monotonic(), grant.tokens))
        else:
            time.sleep(min(grant.wait_s, 0.01))
    return grants


def _busiest_second(grants: list[tuple[float, int]]) -> int:
    best = 0
    for start, _ in grants:
        best = max(best, sum(n for t, n in grants if start <= t < start + 1.0))
    return best


def test_a_burst_after_a_stall_does_not_push_a_second_past_the_rate() -> None:
    # A generous burst (half a second of tokens) makes the bucket alone allow 150 in the
    # first second after idling; the send log holds it to the rate.
    bucket = TokenBucket("pn-window", rate=100, reserve=0.0, burst_s=0.5)
    bucket.acquire(1, TrafficClass.CAMPAIGN)
    time.sleep(0.6)  # the bucket fills to its burst
    grants = _grants(bucket, TrafficClass.CAMPAIGN, 2.5)
    assert grants[0][1] >= 20  # the burst is still there to take
    # (+1: the grants are timed here, after each reply, not by Redis's clock.)
    assert _busiest_second(grants) <= 101
    assert sum(n for _, n in grants) >= 100 * 2.5 * 0.85  # and the rate is still reached


def test_refunded_tokens_leave_the_window_free_for_others() -> None:
    bucket = TokenBucket("pn-window-refund", rate=100, reserve=0.0, burst_s=1.0)
    bucket.acquire(1, TrafficClass.CAMPAIGN)
    time.sleep(0.8)
    taken = bucket.acquire(100, TrafficClass.CAMPAIGN).tokens
    assert taken >= 60
    bucket.refund(taken, TrafficClass.CAMPAIGN)
    # Nothing was sent with them: the same second still has room for them.
    assert bucket.acquire(100, TrafficClass.TRANSACTIONAL).tokens >= taken
