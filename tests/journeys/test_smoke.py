from datetime import timedelta

import pytest
from django.utils import timezone

from delivery.models import Message
from journeys.models import JourneyInstance
from tests.factories import make_phone_number
from tests.journeys.support import history, journey_live, post, run, template_on

pytestmark = pytest.mark.django_db


CART = {
    "entry": {"type": "event", "event": "cart_updated"},
    "key": "cart_id",
    "exits": [{"event": "checkout", "reason": "bought"}],
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 1}},
        {
            "id": "remind",
            "type": "send",
            "template": "cart_reminder",
            "mapping": {"body": {"1": {"property": "cart_id"}}},
        },
        {
            "id": "reply",
            "type": "wait",
            "for_reply": True,
            "timeout": {"hours": 24},
            "on_reply": "replied",
        },
        {
            "id": "again",
            "type": "send",
            "template": "cart_reminder",
            "mapping": {"body": {"1": {"property": "cart_id"}}},
        },
        {"id": "done", "type": "exit", "reason": "reminded twice"},
        {"id": "replied", "type": "exit", "reason": "replied"},
    ],
}


def test_smoke():
    number = make_phone_number()
    template_on(number, "cart_reminder")
    journey_live(number, CART)
    t0 = timezone.now()
    post(
        [{"phone": "+5511987650001", "name": "cart_updated", "properties": {"cart_id": "c1"}}],
        now=t0,
    )
    run(t0)
    inst = JourneyInstance.objects.get()
    assert inst.step == "wait"
    run(t0 + timedelta(minutes=61))
    inst.refresh_from_db()
    print(history(inst))
    assert inst.step == "reply"
    assert Message.objects.filter(journey_instance_id=inst.pk).count() == 1
    run(t0 + timedelta(hours=26))
    inst.refresh_from_db()
    print(history(inst))
    assert inst.state == "exited"
    assert Message.objects.filter(journey_instance_id=inst.pk).count() == 2
