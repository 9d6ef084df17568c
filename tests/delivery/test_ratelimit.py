"""The shared token bucket: rate, campaign share, burst cap, pause, refund, adaptive rate."""

from __future__ import annotations

import threading
import time

from delivery.engine.ratelimit import TokenBucket, TrafficClass


def drain(bucket: TokenBucket, traffic: TrafficClass, seconds: float) -> int:
    """Take tokens as fast as they come for ``seconds``; return how many were granted."""
    taken = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        grant = bucket.acquire(50, traffic)
        taken += grant.tokens
        if grant.tokens == 0:
            time.sleep(min(grant.wait_s, 0.01))
    return taken


def test_transactional_traffic_gets_the_full_rate() -> None:
    bucket = TokenBucket("pn-rate", rate=200, reserve=0.25)
    taken = drain(bucket, TrafficClass.TRANSACTIONAL, 1.0)
    assert 180 <= taken <= 215


def test_campaign_traffic_is_held_to_its_share() -> None:
    bucket = TokenBucket("pn-share", rate=200, reserve=0.25)
    taken = drain(bucket, TrafficClass.CAMPAIGN, 1.0)
    assert 135 <= taken <= 160  # 150/s = (1 - 0.25) * 200


def test_campaign_saturation_leaves_the_reserve_for_transactional() -> None:
    bucket = TokenBucket("pn-mix", rate=200, reserve=0.25)
    results: dict[str, int] = {}

    def run(name: str, traffic: TrafficClass) -> None:
        results[name] = drain(bucket, traffic, 1.5)

    threads = [
        threading.Thread(target=run, args=("campaign", TrafficClass.CAMPAIGN)),
        threading.Thread(target=run, args=("transactional", TrafficClass.TRANSACTIONAL)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = results["campaign"] + results["transactional"]
    assert total <= 200 * 1.5 + 15  # never above the number's rate (+ burst)
    assert results["campaign"] <= 150 * 1.5 + 10
    assert results["transactional"] >= 50 * 1.5 * 0.8  # the reserve stays available


def test_many_workers_share_one_limit() -> None:
    """Four takers on separate connections together still get only the rate."""
    counts: list[int] = []

    def worker() -> None:
        counts.append(
            drain(TokenBucket("pn-shared", rate=100, reserve=0.0), TrafficClass.TRANSACTIONAL, 1.0)
        )

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 85 <= sum(counts) <= 110


def test_a_new_bucket_does_not_open_with_a_burst() -> None:
    bucket = TokenBucket("pn-cold", rate=1000, reserve=0.0)
    assert bucket.acquire(500, TrafficClass.TRANSACTIONAL).tokens <= 1


def test_burst_is_capped_after_idle_time() -> None:
    bucket = TokenBucket("pn-idle", rate=1000, reserve=0.0, burst_s=0.05)
    bucket.acquire(1, TrafficClass.TRANSACTIONAL)
    time.sleep(0.5)  # would be 500 tokens without a cap
    assert bucket.acquire(1000, TrafficClass.TRANSACTIONAL).tokens <= 51


def test_pause_refuses_tokens_until_it_ends() -> None:
    bucket = TokenBucket("pn-pause", rate=1000, reserve=0.0)
    time.sleep(0.05)
    bucket.pause(0.3)
    grant = bucket.acquire(10, TrafficClass.TRANSACTIONAL)
    assert grant.tokens == 0
    assert 0.2 <= grant.wait_s <= 0.31
    time.sleep(0.35)
    assert drain(bucket, TrafficClass.TRANSACTIONAL, 0.1) > 0


def test_refund_returns_unused_tokens() -> None:
    bucket = TokenBucket("pn-refund", rate=100, reserve=0.0, burst_s=1.0)
    bucket.acquire(1, TrafficClass.TRANSACTIONAL)
    time.sleep(0.3)
    first = bucket.acquire(100, TrafficClass.TRANSACTIONAL).tokens
    assert first >= 20
    bucket.refund(first, TrafficClass.TRANSACTIONAL)
    assert bucket.acquire(100, TrafficClass.TRANSACTIONAL).tokens >= first


def test_adaptive_rate_lowers_the_grant() -> None:
    bucket = TokenBucket("pn-adapt", rate=200, reserve=0.0)
    bucket.set_adaptive_rate(50)
    assert 40 <= drain(bucket, TrafficClass.TRANSACTIONAL, 1.0) <= 60
    bucket.set_adaptive_rate(None)
    assert bucket.adaptive_rate() is None


def test_keys_carry_the_number_as_a_cluster_hash_tag() -> None:
    bucket = TokenBucket("106540352242922", rate=80, reserve=0.2)
    for key in (bucket.number_key, bucket.campaign_key, bucket.pause_key, bucket.adaptive_key):
        assert "{106540352242922}" in key
