"""Cash on delivery: an order event asks at once to Confirm or Cancel; a Confirm tap ends
it "confirmed"; no answer in 48 hours sends one reminder; a Cancel tap sends an
``order.cancel_requested`` event out to a subscription, signed, with the order.

Everything crosses real HTTP: the API's events, the sends to the simulator, Meta's
callbacks (the taps in Meta's documented shape, tests/fixtures/real/inbound/
meta_doc_button_quick_reply.json) to the webhook, the event out to a receiver.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings

from campaigns.models import Contact
from delivery.events.subscriptions import subscription_create
from delivery.events.worker import events_pass
from delivery.models import Message
from journeys.models import InstanceState, JourneyInstance
from tests.engine_support import number_on, settle, simulator_calling
from tests.events.receiver import Receiver
from tests.journeys.support import journey_live, post, template_on, travel

pytestmark = pytest.mark.django_db(transaction=True)

APP_SECRET = "cod-secret"  # noqa: S105

COD_TEMPLATE = [
    {
        "type": "BODY",
        "text": "Order {{1}}: pay on delivery. Confirm it?",
        "example": {"body_text": [["A-1"]]},
    },
    {
        "type": "BUTTONS",
        "buttons": [
            {"type": "QUICK_REPLY", "text": "Confirm"},
            {"type": "QUICK_REPLY", "text": "Cancel"},
        ],
    },
]
ORDER = {"body": {"1": {"property": "order_id"}}}

COD = {
    "entry": {"type": "event", "event": "order_created"},
    "key": "order_id",
    "exits": [{"event": "order_paid", "reason": "paid"}],
    "goal": {"event": "order_paid", "within_days": 7},
    "steps": [
        {"id": "ask", "type": "send", "template": "cod_confirm", "mapping": ORDER},
        {"id": "answer", "type": "wait", "for_reply": True, "timeout": {"hours": 48},
         "on_reply": "confirm", "on_timeout": "remind"},
        {"id": "remind", "type": "send", "template": "cod_reminder", "mapping": ORDER},
        {"id": "answer_again", "type": "wait", "for_reply": True, "timeout": {"hours": 48},
         "on_reply": "confirm", "on_timeout": "no_answer"},
        {"id": "confirm", "type": "branch", "if": {"button": "Confirm"},
         "then": "confirmed", "else": "cancel"},
        {"id": "cancel", "type": "branch", "if": {"button": "Cancel"},
         "then": "tell_shop", "else": "other"},
        {"id": "tell_shop", "type": "emit", "event": "order.cancel_requested"},
        {"id": "cancelled", "type": "exit", "reason": "cancel requested"},
        {"id": "confirmed", "type": "exit", "reason": "confirmed"},
        {"id": "other", "type": "exit", "reason": "answered in words"},
        {"id": "no_answer", "type": "exit", "reason": "no answer"},
    ],
}  # fmt: skip


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def order(phone: str, order_id: str) -> dict[str, Any]:
    return {"phone": phone, "name": "order_created", "properties": {"order_id": order_id}}


def instance_of(phone: str) -> JourneyInstance:
    return JourneyInstance.objects.get(contact__phone=phone)


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_confirm_cancel_and_one_reminder(live_server: Any, receiver: Receiver) -> None:
    subscription, secret = subscription_create(
        name="shop", url=receiver.url, event_types=["order.cancel_requested"]
    )
    with simulator_calling(live_server, APP_SECRET) as sim:
        number = number_on(sim, rate=80)
        template_on(number, "cod_confirm", sim=sim, components=COD_TEMPLATE, category="UTILITY")
        template_on(number, "cod_reminder", sim=sim, components=COD_TEMPLATE, category="UTILITY")
        journey_live(number, COD, name="cash on delivery")
        confirmer, canceller, silent = "+5511987650001", "+5511987650002", "+5511987650003"
        Contact.objects.bulk_create(Contact(phone=p) for p in (confirmer, canceller, silent))
        post([order(confirmer, "A-1"), order(canceller, "A-2"), order(silent, "A-3")])
        settle(sim)  # routed, asked at once, sent, delivered

        asks = {m.to: m for m in Message.objects.filter(journey_step="ask")}
        assert set(asks) == {confirmer, canceller, silent}
        assert asks[confirmer].params["body"] == ["A-1"]
        assert all(m.status in ("sent", "delivered") for m in asks.values())
        sim.event("button_reply", wamid=asks[confirmer].wamid, text="Confirm")
        sim.event("button_reply", wamid=asks[canceller].wamid, text="Cancel")
        settle(sim)

        assert instance_of(confirmer).exit_reason == "confirmed"
        assert instance_of(canceller).exit_reason == "cancel requested"
        assert instance_of(silent).state == InstanceState.ACTIVE
        assert not Message.objects.filter(journey_step="remind").exists()

        events_pass()
        [cancel] = receiver.events()
        assert cancel["type"] == "order.cancel_requested"
        assert cancel["data"]["key"] == "A-2" and cancel["data"]["phone"] == canceller
        assert cancel["data"]["properties"] == {"order_id": "A-2"}
        assert receiver.all_signed(secret)

        # No answer in 48 hours: one reminder, then no answer again: the instance ends.
        travel(timedelta(hours=48, minutes=1))
        settle(sim)
        assert [m.to for m in Message.objects.filter(journey_step="remind")] == [silent]
        travel(timedelta(hours=48, minutes=1))
        settle(sim)
        assert instance_of(silent).exit_reason == "no answer"
        assert Message.objects.filter(journey_step="remind").count() == 1
        assert Message.objects.count() == 4
        subscription.refresh_from_db()
        assert subscription.delivered_total == 1
