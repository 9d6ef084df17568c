"""The send service's refresh and the adoptions that happen while it reads.

The refresh reads the numbers and campaigns of the senders it knows, in a database thread;
a slot adopted meanwhile has a sender the read knew nothing of. That sender must keep its
number and its campaigns: taken for a number gone, it stopped after its first send and its
slot waited for the next tick (fifty numbers at 20 msg/s: a number idle for 1.8-3.2 s after
its first send, 84-88 % of its share over its campaign's life).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import redis

from delivery.campaigns.launch import campaign_start
from delivery.engine import send_service, slots
from delivery.engine.send_service import SendService
from tests.engine_support import campaign_on, number_on, running_simulator

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


class AdoptsDuringRefresh(SendService):
    """A service that adopts one more slot just as its refresh starts reading numbers."""

    def __init__(self, meanwhile: tuple[int, str]) -> None:
        super().__init__(holder="test:refresh")
        self.meanwhile: tuple[int, str] | None = meanwhile
        self.adopted_meanwhile = ""

    async def db_call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if fn is send_service._numbers_load and self.meanwhile is not None:
            phone_number_pk, token = self.meanwhile
            self.meanwhile = None
            self.adopted_meanwhile = await self._adopt(phone_number_pk, 0, token)
        return await super().db_call(fn, *args, **kwargs)


def test_a_slot_adopted_while_the_refresh_reads_keeps_its_number_and_campaigns(
    redis_conn: redis.Redis,
) -> None:
    with running_simulator(latency_ms=20) as sim:
        known = number_on(sim, rate=20, reserve=0)
        newcomer = number_on(sim, rate=20, reserve=0)
        known_campaign = campaign_on(sim, known, recipients=200)
        newcomer_campaign = campaign_on(sim, newcomer, recipients=200)
        campaign_start(campaign=known_campaign)
        campaign_start(campaign=newcomer_campaign)
        tokens = {}
        for number in (known, newcomer):
            # The launches' own kicks reserved the slots for jobs no worker runs here.
            redis_conn.delete(slots.slot_key(number.phone_number_id, 0))
            token = slots.slot_reserve(number.phone_number_id, 0)
            assert token is not None
            tokens[number.pk] = token
        service = AdoptsDuringRefresh(meanwhile=(newcomer.pk, tokens[newcomer.pk]))
        try:
            loop = service.loop
            adopted = asyncio.run_coroutine_threadsafe(
                service._adopt(known.pk, 0, tokens[known.pk]), loop
            ).result(30)
            assert adopted == "adopted"

            asyncio.run_coroutine_threadsafe(service._refresh(), loop).result(30)

            assert service.adopted_meanwhile == "adopted"
            sender = service.senders[(newcomer.pk, 0)]
            assert sender.stopping == ""
            assert set(sender.campaigns) == {newcomer_campaign.pk}
            assert service.senders[(known.pk, 0)].stopping == ""
            assert set(service.senders[(known.pk, 0)].campaigns) == {known_campaign.pk}
        finally:
            service.stop()
