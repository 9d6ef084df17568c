"""No one-second window holds more than the rate, even when a full burst follows a stall."""

from __future__ import annotations

import time

import redis

from delivery.engine.ratelimit import TokenBucket, TrafficClass


def _grants(bucket: TokenBucket, traffic: TrafficClass, seconds: float) -> list[tuple[float, int]]:
    grants: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        grant = bucket.acquire(20, traffic)
        if grant.tokens:
            assert grant.at is not None
            grants.append((grant.at, grant.tokens))  # when the send log counted them
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
    # Timed by Redis's clock, as the send log counts: no window of a second holds more.
    assert _busiest_second(grants) <= 100
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


def test_a_campaign_burst_after_a_stall_stays_within_the_campaign_share() -> None:
    # The campaign bucket alone would hand out its half-second burst on top of its 80/s in
    # the first second after idling: 120, a good part of the 20/s reserve. The campaign log
    # holds every window to the share.
    bucket = TokenBucket("pn-window-share", rate=100, reserve=0.2, burst_s=0.5)
    bucket.acquire(1, TrafficClass.CAMPAIGN)
    time.sleep(0.6)
    grants = _grants(bucket, TrafficClass.CAMPAIGN, 2.5)
    assert grants[0][1] >= 20  # the burst is still there to take
    assert _busiest_second(grants) <= 80
    assert sum(n for _, n in grants) >= 80 * 2.5 * 0.85


def test_the_reserve_is_open_to_transactional_sends_in_a_second_the_campaign_filled() -> None:
    bucket = TokenBucket("pn-window-reserve", rate=100, reserve=0.2, burst_s=0.5)
    bucket.acquire(1, TrafficClass.CAMPAIGN)
    time.sleep(0.6)
    # The bucket alone would give 40 + 0.9 * 80 = 112 in these 0.9 s.
    campaign = sum(n for _, n in _grants(bucket, TrafficClass.CAMPAIGN, 0.9))
    # The campaign has taken what its share allows in this window ...
    assert bucket.acquire(50, TrafficClass.CAMPAIGN).tokens == 0
    # ... and the reserve (what the number's log has left) is still there for OTPs.
    transactional = bucket.acquire(50, TrafficClass.TRANSACTIONAL).tokens
    assert campaign == 80
    assert transactional == 20


def test_a_refunded_campaign_token_frees_the_campaign_share_too() -> None:
    bucket = TokenBucket("pn-window-share-refund", rate=100, reserve=0.2, burst_s=1.0)
    bucket.acquire(1, TrafficClass.CAMPAIGN)
    time.sleep(1.0)
    taken = bucket.acquire(100, TrafficClass.CAMPAIGN).tokens
    assert 60 <= taken <= 80
    bucket.refund(taken, TrafficClass.CAMPAIGN)
    assert bucket.acquire(100, TrafficClass.CAMPAIGN).tokens >= taken - 1


def test_the_log_forgets_what_left_the_window_and_stays_small() -> None:
    # The log keeps a running sum and retires slots as they leave the window. A retirement
    # that subtracted too little would shrink every later window; one that forgot to delete
    # would grow the hash with every slot that ever held a grant.
    bucket = TokenBucket("pn-window-retire", rate=100, reserve=0.0, burst_s=0.2)
    grants = _grants(bucket, TrafficClass.CAMPAIGN, 3.0)
    granted = sum(n for _, n in grants)
    assert _busiest_second(grants) <= 100
    assert granted >= 100 * 3.0 * 0.9
    # At most the window's 102 slots, its sum and its oldest slot.
    assert bucket._conn.hlen(bucket.log_key) <= 104
    assert bucket._conn.hlen(bucket.campaign_log_key) <= 104


def test_a_log_idle_for_longer_than_a_window_starts_empty() -> None:
    bucket = TokenBucket("pn-window-idle", rate=50, reserve=0.0, burst_s=1.0)
    bucket.acquire(1, TrafficClass.TRANSACTIONAL)
    time.sleep(1.0)
    assert bucket.acquire(50, TrafficClass.TRANSACTIONAL).tokens >= 45  # the window is full
    assert bucket.acquire(50, TrafficClass.TRANSACTIONAL).tokens == 0
    # Idle past the window (1.02 s) and well short of the key's expiry (2 s): the whole log
    # is stale, and a stalled machine still has 0.85 s before the key would expire instead.
    time.sleep(1.15)
    assert bucket._conn.exists(bucket.log_key)
    assert bucket.acquire(50, TrafficClass.TRANSACTIONAL).tokens >= 45
    fields = bucket._conn.hkeys(bucket.log_key)
    assert len(fields) == 3  # the slot just granted, the sum, the oldest slot


def test_a_grant_carries_the_moment_the_send_log_counted_it_in_redis_clock() -> None:
    bucket = TokenBucket("pn-window-moment", rate=10, reserve=0.0)
    conn = bucket._conn
    before = _redis_seconds(conn)
    granted = bucket.acquire(1, TrafficClass.TRANSACTIONAL)
    refused = bucket.acquire(50, TrafficClass.TRANSACTIONAL)  # the burst is spent
    after = _redis_seconds(conn)
    assert granted.tokens == 1 and refused.tokens == 0
    assert granted.at is not None and refused.at is not None
    assert before - 0.001 <= granted.at <= refused.at <= after
    assert bucket.acquire(0, TrafficClass.TRANSACTIONAL).at is None  # nothing asked, no moment


def _redis_seconds(conn: redis.Redis) -> float:
    seconds, micros = conn.time()
    return int(seconds) + int(micros) / 1e6
