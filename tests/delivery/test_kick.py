"""The kick: every number with due campaign work has its free slots offered to the workers.

The maintenance tick kicks every such number each second, so its cost must not grow with
the number of numbers: one query finds them, one more reads them, and one Redis round trip
reads all their slots.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from delivery.campaigns.launch import campaign_start
from delivery.engine import slots
from delivery.engine.dispatch import campaigns_due_kick
from tests.engine_support import campaign_on, number_on, running_simulator
from whatsblast.core import queues

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_kick_offers_each_free_slot_once_in_two_queries(
    redis_conn: redis.Redis, django_assert_num_queries: Any, settings: Any
) -> None:
    settings.CAMPAIGN_SLOT_RATE = 500.0
    with running_simulator() as sim:
        one_slot = number_on(sim, rate=80, reserve=0)
        two_slots = number_on(sim, rate=1000, reserve=0)
        already_held = number_on(sim, rate=80, reserve=0)
        draft_only = number_on(sim, rate=80, reserve=0)
        for number in (one_slot, two_slots, already_held):
            campaign_start(campaign=campaign_on(sim, number, recipients=3))
        campaign_on(sim, draft_only, recipients=3)
    redis_conn.flushdb()  # the launches' own kicks: this test kicks from nothing
    held_token = slots.slot_reserve(already_held.phone_number_id, 0)
    assert held_token is not None

    with django_assert_num_queries(2):
        offered = campaigns_due_kick()

    jobs = queues.get_queue(queues.CAMPAIGNS).jobs
    assert offered == 3
    assert sorted((job.args[0], job.args[1]) for job in jobs) == sorted(
        [(one_slot.pk, 0), (two_slots.pk, 0), (two_slots.pk, 1)]
    )
    by_pk = {n.pk: n for n in (one_slot, two_slots)}
    for job in jobs:
        pk, slot, token, passes = job.args
        # Each offered slot is reserved under the token its job carries, for that job alone.
        assert redis_conn.get(slots.slot_key(by_pk[pk].phone_number_id, slot)) == token.encode()
        assert passes == 0
    assert redis_conn.get(slots.slot_key(already_held.phone_number_id, 0)) == held_token.encode()
    assert redis_conn.exists(slots.slot_key(draft_only.phone_number_id, 0)) == 0

    # Every slot is held now: the next tick offers nothing and queues nothing.
    assert campaigns_due_kick() == 0
    assert len(queues.get_queue(queues.CAMPAIGNS).jobs) == 3


def test_slots_held_many_reads_each_numbers_slots_in_order(redis_conn: redis.Redis) -> None:
    slots.slot_reserve("pn-a", 1)
    slots.slot_reserve("pn-c", 0)
    slots.slot_reserve("pn-c", 2)

    held = slots.slots_held_many([("pn-a", 2), ("pn-b", 1), ("pn-c", 3)])

    assert held == [[False, True], [False], [True, False, True]]
    assert slots.slots_held_many([]) == []
