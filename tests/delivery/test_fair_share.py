"""Fair shares of one number among its campaigns: stride scheduling, pure."""

from __future__ import annotations

from collections import Counter

from delivery.engine.fair_share import StrideScheduler


def picks(scheduler: StrideScheduler, ready: list[int], n: int) -> Counter[int]:
    return Counter(scheduler.pick(ready) for _ in range(n))


def test_busy_campaigns_get_sends_in_proportion_to_their_weights() -> None:
    scheduler = StrideScheduler()
    for key, weight in ((1, 1), (2, 2), (3, 3)):
        scheduler.join(key, weight)

    got = picks(scheduler, [1, 2, 3], 6000)

    assert got == {1: 1000, 2: 2000, 3: 3000}


def test_equal_weights_alternate_send_by_send() -> None:
    scheduler = StrideScheduler()
    scheduler.join(1, 1)
    scheduler.join(2, 1)

    order = [scheduler.pick([1, 2]) for _ in range(6)]

    assert order == [1, 2, 1, 2, 1, 2]


def test_a_campaign_with_nothing_ready_leaves_its_share_to_the_others() -> None:
    scheduler = StrideScheduler()
    scheduler.join(1, 1)
    scheduler.join(2, 1)

    assert picks(scheduler, [2], 100) == {2: 100}


def test_a_campaign_back_from_a_lull_gets_its_share_not_a_catch_up_burst() -> None:
    scheduler = StrideScheduler()
    scheduler.join(1, 1)
    scheduler.join(2, 1)
    picks(scheduler, [1], 1000)  # campaign 2 had nothing ready meanwhile

    got = picks(scheduler, [1, 2], 100)

    assert got == {1: 50, 2: 50}


def test_a_campaign_that_joins_later_starts_level_with_the_busy_ones() -> None:
    scheduler = StrideScheduler()
    scheduler.join(1, 1)
    picks(scheduler, [1], 500)
    scheduler.join(2, 1)

    got = picks(scheduler, [1, 2], 100)

    assert got == {1: 50, 2: 50}


def test_nothing_ready_picks_nobody_and_unknown_campaigns_are_ignored() -> None:
    scheduler = StrideScheduler()
    scheduler.join(1, 1)

    assert scheduler.pick([]) is None
    assert scheduler.pick([7]) is None
    scheduler.leave(1)
    assert scheduler.pick([1]) is None
