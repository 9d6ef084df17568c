"""Meta's per-user marketing limit (131049) on a journey's marketing send.

Meta accepts the send, then fails it by status callback with 131049 (as it does: shared/
cloud-api.md, the error table). Nothing fails for it: the message is sent again once
24 hours have passed, and that person's next marketing steps, in this journey and in
another, move to the end of the hold instead of going into the block.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from campaigns.models import Contact
from delivery.models import MarketingHold, Message, MessageStatus
from journeys.models import HistoryKind, JourneyHistory
from tests.engine_support import number_on, settle, simulator_calling
from tests.journeys.support import journey_live, post, template_on, travel

pytestmark = pytest.mark.django_db(transaction=True)

APP_SECRET = "limit-secret"  # noqa: S105
PERSON = "+5511987650042"
NAME = {"body": {"1": {"field": "name"}}}


def two_offers() -> dict[str, Any]:
    return {
        "entry": {"type": "event", "event": "browsed"},
        "steps": [
            {"id": "first", "type": "send", "template": "offer_one", "mapping": NAME},
            {"id": "pause", "type": "wait", "delay": {"hours": 2}},
            {"id": "second", "type": "send", "template": "offer_two", "mapping": NAME},
        ],
    }


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_a_131049_moves_the_persons_next_marketing_steps_a_day_on_and_nothing_fails(
    live_server: Any,
) -> None:
    with simulator_calling(
        live_server, APP_SECRET, async_fail_recipients={PERSON.lstrip("+"): 131049}
    ) as sim:
        number = number_on(sim, rate=80)
        for name in ("offer_one", "offer_two", "wishlist_offer"):
            template_on(number, name, sim=sim)
        journey_live(number, two_offers(), name="two offers")
        journey_live(
            number,
            {
                "entry": {"type": "event", "event": "wishlisted"},
                "steps": [
                    {"id": "wish", "type": "send", "template": "wishlist_offer", "mapping": NAME}
                ],
            },
            name="wishlist",
        )
        contact = Contact.objects.create(phone=PERSON, name="Ana")
        post([{"phone": PERSON, "name": "browsed"}])
        settle(sim)

        first = Message.objects.get(journey_step="first")
        hold = MarketingHold.objects.get(contact=contact)
        # Put back, not failed: due when the 24 hours have passed.
        assert first.status == MessageStatus.PENDING
        assert first.last_error_code == 131049
        assert first.next_attempt_at >= hold.since + timedelta(hours=24)
        assert hold.until >= hold.since + timedelta(hours=24)
        assert hold.since <= timezone.now()

        # Another journey's marketing step for them waits for the hold to end.
        post([{"phone": PERSON, "name": "wishlisted"}])
        settle(sim)
        assert not Message.objects.filter(journey_step="wish").exists()
        [deferred] = JourneyHistory.objects.filter(step="wish", kind=HistoryKind.DEFERRED)
        assert "131049" in deferred.detail

        # Two hours on, this journey's next marketing step waits for it too.
        travel(timedelta(hours=2, minutes=1))
        settle(sim)
        assert not Message.objects.filter(journey_step="second").exists()
        assert JourneyHistory.objects.filter(step="second", kind=HistoryKind.DEFERRED).exists()

        # A day after the 131049 (Meta no longer refuses): everything goes, nothing failed.
        sim.configure(async_fail_recipients={})
        travel(timedelta(hours=22))
        settle(sim)
        sent = {
            m.journey_step: m
            for m in Message.objects.filter(status__in=("sent", "delivered", "read"))
        }
        assert set(sent) == {"first", "second", "wish"}
        hold.refresh_from_db()
        for message in sent.values():
            assert message.sent_at >= hold.since + timedelta(hours=24), message.journey_step
        assert not Message.objects.filter(status__in=("failed", "dead")).exists()
        assert Message.objects.count() == 3
