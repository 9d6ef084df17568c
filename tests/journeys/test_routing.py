"""Events routed to journeys: entries, resets, exits by key, waits ended, re-entry rules,
refusals counted, a retried batch stored once, in the order stored."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from campaigns.models import Contact
from delivery.models import Message, MessageStatus
from journeys.models import ExitKind, HistoryKind, InstanceState, JourneyInstance
from journeys.routing import events_route
from journeys.versions import journey_pause, journey_resume
from tests.factories import make_phone_number
from tests.journeys.support import history, journey_live, post, run, template_on

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-12-01T15:00:00+00:00")
PHONE = "+5511987650001"


def keyed(**extra: Any) -> dict[str, Any]:
    return {
        "entry": {"type": "event", "event": "cart_updated"},
        "key": "cart_id",
        "exits": [{"event": "checkout", "reason": "bought"}],
        "steps": [
            {"id": "wait", "type": "wait", "delay": {"hours": 1}},
            {"id": "remind", "type": "send", "template": "reminder"},
        ],
        **extra,
    }


@pytest.fixture
def number() -> Any:
    number = make_phone_number()
    template_on(number, "reminder", components=[{"type": "BODY", "text": "Your cart"}])
    return number


def cart(cart_id: str, phone: str = PHONE, **props: Any) -> dict[str, Any]:
    return {"phone": phone, "name": "cart_updated", "properties": {"cart_id": cart_id, **props}}


def test_a_later_event_of_the_same_key_resets_the_wait_and_starts_no_second_instance(
    number: Any,
) -> None:
    journey_live(number, keyed())
    post([cart("c1", items=1)], now=T0)
    run(T0)
    post([cart("c1", items=2)], now=T0 + timedelta(minutes=40))
    run(T0 + timedelta(minutes=40))
    [instance] = JourneyInstance.objects.all()
    assert instance.properties == {"cart_id": "c1", "items": 2}
    assert instance.due_at == T0 + timedelta(minutes=100)
    run(T0 + timedelta(minutes=61))  # the first event's hour: nothing yet
    assert not Message.objects.exists()
    run(T0 + timedelta(minutes=100))
    assert Message.objects.count() == 1
    kinds = [kind for kind, _, _ in history(instance)]
    assert kinds[:3] == [HistoryKind.ENTERED, HistoryKind.WAITING, HistoryKind.RESET]


def test_another_key_is_another_instance_and_an_exit_ends_only_its_own(number: Any) -> None:
    journey_live(number, keyed())
    post([cart("c1"), cart("c2")], now=T0)
    run(T0)
    post([{"phone": PHONE, "name": "checkout", "properties": {"cart_id": "c2"}}], now=T0)
    run(T0)
    states = dict(JourneyInstance.objects.values_list("key", "state"))
    assert states == {"c1": InstanceState.ACTIVE, "c2": InstanceState.EXITED}
    run(T0 + timedelta(hours=2))
    assert list(Message.objects.values_list("journey_instance_id", flat=True)) == [
        JourneyInstance.objects.get(key="c1").pk
    ]


def test_an_exit_without_the_key_ends_every_instance_of_the_contact(number: Any) -> None:
    journey_live(number, keyed())
    post([cart("c1"), cart("c2")], now=T0)
    run(T0)
    post([{"phone": PHONE, "name": "checkout"}], now=T0)
    run(T0)
    assert set(JourneyInstance.objects.values_list("exit_kind", flat=True)) == {ExitKind.EXIT_EVENT}


def test_an_exit_before_the_send_skips_a_message_already_waiting_to_go(number: Any) -> None:
    journey_live(number, keyed(window="09:00-10:00", time_zone="Asia/Manila"))
    post([cart("c1")], now=T0)
    run(T0)
    run(T0 + timedelta(hours=1))  # due at 00:00 in Manila: goes at 09:00
    [instance] = JourneyInstance.objects.all()
    assert instance.step == "remind" and instance.due_at > T0 + timedelta(hours=1)
    post([{"phone": PHONE, "name": "checkout", "properties": {"cart_id": "c1"}}])
    run(T0 + timedelta(hours=2))
    run(T0 + timedelta(hours=20))
    assert not Message.objects.exists()
    instance.refresh_from_db()
    assert instance.exit_reason == "bought (event checkout)"


def test_an_exit_after_the_last_step_still_skips_its_unsent_message(number: Any) -> None:
    journey_live(number, keyed())
    post([cart("c1")], now=T0)
    run(T0)
    run(T0 + timedelta(hours=1))
    [message] = Message.objects.all()
    assert message.status == MessageStatus.PENDING  # no engine here: still waiting to go
    post([{"phone": PHONE, "name": "checkout", "properties": {"cart_id": "c1"}}])
    run(T0 + timedelta(hours=1))
    message.refresh_from_db()
    assert (message.status, message.skip_reason) == (
        MessageStatus.SKIPPED,
        "bought (event checkout) before it was sent",
    )


def test_a_wait_for_an_event_ends_when_it_comes(number: Any) -> None:
    template_on(number, "thanks", components=[{"type": "BODY", "text": "Thanks"}])
    journey_live(
        number,
        {
            "entry": {"type": "event", "event": "order_created"},
            "key": "order_id",
            "steps": [
                {
                    "id": "paid",
                    "type": "wait",
                    "for_event": "order_paid",
                    "timeout": {"days": 2},
                    "on_event": "thanks",
                    "on_timeout": "end",
                },
                {"id": "thanks", "type": "send", "template": "thanks"},
            ],
        },  # fmt: skip
    )
    order = {"phone": PHONE, "properties": {"order_id": "A-1"}}
    post([{**order, "name": "order_created"}], now=T0)
    run(T0)
    post([{**order, "name": "order_paid"}], now=T0 + timedelta(hours=3))
    run(T0 + timedelta(hours=3))
    [instance] = JourneyInstance.objects.all()
    assert instance.exit_kind == ExitKind.COMPLETED
    assert instance.resumed["how"] == "event"
    assert Message.objects.filter(journey_step="thanks").count() == 1


@pytest.mark.parametrize(
    ("rule", "second_enters"),
    [("every_time", True), ("once", False), ({"after_days": 7}, False)],
)
def test_re_entry_rules(number: Any, rule: Any, second_enters: bool) -> None:
    journey = journey_live(
        number,
        {
            "entry": {"type": "event", "event": "signed_up"},
            "re_entry": rule,
            "steps": [{"id": "hello", "type": "send", "template": "reminder"}],
        },
    )
    post([{"phone": PHONE, "name": "signed_up"}], now=T0)
    run(T0)
    post([{"phone": PHONE, "name": "signed_up"}], now=T0 + timedelta(days=1))
    run(T0 + timedelta(days=1))
    assert JourneyInstance.objects.count() == (2 if second_enters else 1)
    journey.refresh_from_db()
    if not second_enters:
        assert sum(journey.entries_refused.values()) == 1
    if rule != "once":
        post([{"phone": PHONE, "name": "signed_up"}], now=T0 + timedelta(days=8))
        run(T0 + timedelta(days=8))
        assert JourneyInstance.objects.count() == (3 if second_enters else 2)


def test_entries_refused_are_counted_never_silent(number: Any) -> None:
    journey = journey_live(number, keyed())
    post([{"phone": PHONE, "name": "cart_updated", "properties": {}}], now=T0)  # no key
    run(T0)
    journey_pause(journey=journey)
    post([cart("c1")], now=T0)
    run(T0)
    journey.refresh_from_db()
    assert journey.entries_refused == {"no key": 1, "paused": 1}
    assert not JourneyInstance.objects.exists()
    journey_resume(journey=journey)
    post([cart("c1")], now=T0)
    run(T0)
    assert JourneyInstance.objects.count() == 1


def test_a_retried_batch_is_stored_once_and_routed_once(number: Any) -> None:
    journey_live(number, keyed())
    batch = [{**cart("c1"), "id": "evt-1"}, {**cart("c2"), "id": 2}]
    assert post(batch, now=T0)["stored"] == 2
    assert post(batch, now=T0) == {"stored": 0, "duplicates": 2, "rejected": 0}
    run(T0)
    assert JourneyInstance.objects.count() == 2
    assert events_route(now=T0).events == 0


def test_events_of_one_contact_are_applied_in_the_order_stored(number: Any) -> None:
    journey_live(number, keyed())
    post([cart("c1"), {"phone": PHONE, "name": "checkout"}, cart("c1", items=9)], now=T0)
    run(T0)
    instances = list(JourneyInstance.objects.order_by("id").values_list("state", "properties"))
    assert instances == [
        (InstanceState.EXITED, {"cart_id": "c1"}),
        (InstanceState.ACTIVE, {"cart_id": "c1", "items": 9}),
    ]


def test_an_event_for_a_person_not_known_yet_makes_them_a_contact(number: Any) -> None:
    journey_live(number, keyed())
    result = post([cart("c1", phone="+55 11 98765-4444")], now=T0)
    assert result["stored"] == 1
    contact = Contact.objects.get(phone="+5511987654444")
    run(T0)
    assert JourneyInstance.objects.get().contact == contact


def test_bad_items_are_rejected_alone_with_the_reason(number: Any) -> None:
    from journeys.events_in import events_record

    result = events_record(
        api_key_id=None,
        items=[
            cart("c1", phone="not a phone"),
            {"phone": PHONE, "name": "whatsapp.reply"},
            {"phone": PHONE, "name": "x", "occurred_at": "2026-12-01T10:00:00"},
            {"phone": PHONE, "name": "x", "occurred_at": "2099-01-01T00:00:00Z"},
            {"user_id": "nobody", "name": "x"},
            cart("c2"),
        ],
        idempotency_key=None,
    )
    assert [i.status for i in result.items] == ["rejected"] * 5 + ["stored"]
    assert result.items[0].errors == {
        "events[0].phone": "Not a phone number in international form (e.g. +5511987654321)."
    }
    assert "whatsblast's own" in result.items[1].errors["events[1].name"]
    assert "offset" in result.items[2].errors["events[2].occurred_at"]
    assert result.items[3].errors == {"events[3].occurred_at": "In the future."}
    assert "user id" in result.items[4].errors["events[4].user_id"]
