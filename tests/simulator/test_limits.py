"""Per-number throughput (130429), pair rate (131056) and the messaging limit."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.simulator.helpers import error_code, post, template_body

FAST = "fast-pn"


def test_throughput_past_the_rate_is_130429(simulator) -> None:
    simulator.add_number(phone_number_id=FAST, access_token="t", rate=5, burst=5)
    bodies = [template_body(to=f"+4915{i:09d}") for i in range(30)]
    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(lambda b: post(simulator.url, b, number=FAST, token="t"), bodies))

    accepted = [r for r in responses if r.ok]
    throttled = [r for r in responses if not r.ok]
    # A bucket of 5 plus whatever refilled (5/s) while 30 requests went out.
    assert 5 <= len(accepted) <= 8
    assert {error_code(r) for r in throttled} == {130429}
    assert throttled[0].json()["error"]["message"] == "(#130429) Rate limit hit"
    assert sum(simulator.histogram(FAST).values()) == len(accepted)


def test_rate_refills_over_time(simulator) -> None:
    simulator.add_number(phone_number_id=FAST, access_token="t", rate=20, burst=1)
    results = []
    for i in range(6):
        results.append(
            post(simulator.url, template_body(to=f"+4915{i:09d}"), number=FAST, token="t").ok
        )
        time.sleep(0.06)
    assert all(results)


def test_pair_limit_hits_one_recipient_only(simulator) -> None:
    simulator.configure(pair_burst=2, pair_rate_per_s=0.01)
    same = [post(simulator.url, template_body(to="+4915100000001")) for _ in range(3)]
    other = post(simulator.url, template_body(to="+4915100000002"))

    assert [r.ok for r in same] == [True, True, False]
    assert error_code(same[2]) == 131056
    assert other.ok


def test_pair_limit_can_be_switched_off(simulator) -> None:
    simulator.configure(pair_limit_enabled=False)
    assert all(post(simulator.url, template_body(to="+4915100000001")).ok for _ in range(50))


def test_messaging_limit_counts_unique_recipients_in_the_window(
    simulator, webhook_receiver
) -> None:
    simulator.configure(
        messaging_limit=3, callback_url=webhook_receiver.url, read_fraction=0, delivered_fraction=0
    )
    for i in (1, 2, 3, 1, 2):  # repeats of users already in the window are fine
        assert post(simulator.url, template_body(to=f"+491510000000{i}")).ok
    over = post(simulator.url, template_body(to="+4915100000004"))

    # Meta documents no synchronous error: the send is accepted and later fails.
    assert over.ok
    assert simulator.stats()["messaging_limit_exceeded"] == 1
    assert simulator.wait_webhooks_idle(5)
    failed = [r for r in webhook_receiver.received if b'"failed"' in r.body]
    assert len(failed) == 1 and b"4915100000004" in failed[0].body


def test_messaging_limit_sync_mode_and_window_expiry(simulator) -> None:
    simulator.configure(
        messaging_limit=1,
        messaging_limit_window_s=0.3,
        over_limit_sync=True,
        over_limit_code=131048,
    )
    assert post(simulator.url, template_body(to="+4915100000001")).ok
    assert error_code(post(simulator.url, template_body(to="+4915100000002"))) == 131048
    time.sleep(0.35)
    assert post(simulator.url, template_body(to="+4915100000002")).ok
