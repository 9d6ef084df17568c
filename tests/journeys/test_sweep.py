"""The sweep: due rows claimed with SKIP LOCKED, each step fired once whatever the number
of sweeps; branches and splits decided for a batch; waits until a local time; events out."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from campaigns.models import Contact, ContactList, ListMembership
from delivery.events.subscriptions import subscription_create
from delivery.models import Click, EventOutbox, Message, MessageStatus
from journeys.models import HistoryKind, JourneyHistory, JourneyInstance
from journeys.routing import events_route
from journeys.sweep import journeys_sweep
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, post, run, template_on

T0 = datetime.fromisoformat("2026-12-01T12:00:00+00:00")
NAME = {"body": {"1": {"field": "name"}}}


def people(n: int, prefix: str = "+5511987") -> list[str]:
    phones = [f"{prefix}{i:06d}" for i in range(n)]
    Contact.objects.bulk_create(Contact(phone=p, name="Ana") for p in phones)
    return phones


@pytest.mark.django_db(transaction=True)
def test_four_sweeps_at_once_fire_each_step_once(settings: Any) -> None:
    settings.JOURNEYS_SEND_AHEAD_SECONDS = 0  # all 2,000 at once: what is shared is the claim
    number = make_phone_number()
    template_on(number, "offer")
    journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "steps": [
                {"id": "wait", "type": "wait", "delay": {"minutes": 10}},
                {"id": "offer", "type": "send", "template": "offer", "mapping": NAME},
            ],
        },
    )
    phones = people(2000)
    post([{"phone": p, "name": "go"} for p in phones], now=T0)
    events_route(now=T0)
    journeys_sweep(now=T0)
    start = threading.Barrier(4)

    def sweep() -> None:
        try:
            start.wait(10)
            journeys_sweep(now=T0 + timedelta(minutes=11), batch=100)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert Message.objects.count() == 2000
    assert set(Counter(Message.objects.values_list("to", flat=True)).values()) == {1}
    sent = JourneyHistory.objects.filter(kind=HistoryKind.SENT)
    assert sent.count() == 2000
    assert not JourneyInstance.objects.filter(state="active").exists()


@pytest.mark.django_db
def test_a_burst_is_swept_as_the_number_sends_it_not_all_at_once(settings: Any) -> None:
    """2,000 people due at once on a number whose campaign share is 8 msg/s: with 30 s of
    it ahead (240 messages) the sweep makes a batch (500, past the 240) and leaves the rest
    due; as the number sends them it makes more, each person once."""
    settings.JOURNEYS_SEND_AHEAD_SECONDS = 30
    number = make_phone_number(rate_per_second=10, transactional_reserve=0.2)
    template_on(number, "offer")
    journey = journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "steps": [{"id": "offer", "type": "send", "template": "offer", "mapping": NAME}],
        },
    )
    phones = people(2000)
    post([{"phone": p, "name": "go"} for p in phones], now=T0)
    events_route(now=T0)
    first = journeys_sweep(now=T0)
    assert first.paced == {journey.pk}
    made = Message.objects.filter(journey_step="offer")
    assert made.count() == 500
    waiting = JourneyInstance.objects.filter(journey=journey, state="active", step="offer")
    assert waiting.count() == 2000 - made.count()
    again = journeys_sweep(now=T0)
    assert again.instances == 0  # nothing sent meanwhile: nothing more made
    # The number sends them: the sweep makes more, until everyone has theirs once.
    while JourneyInstance.objects.filter(journey=journey, state="active").exists():
        made.filter(status=MessageStatus.PENDING).update(status=MessageStatus.SENT)
        journeys_sweep(now=T0)
    assert made.count() == 2000
    assert set(Counter(made.values_list("to", flat=True)).values()) == {1}


@pytest.mark.django_db
def test_a_wait_until_a_local_time_ends_at_that_time_on_each_persons_clock() -> None:
    number = make_phone_number()
    template_on(number, "offer")
    journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "steps": [
                {"id": "morning", "type": "wait", "until": "08:30", "weekdays": ["mon"]},
                {"id": "offer", "type": "send", "template": "offer", "mapping": NAME},
            ],
        },
    )
    Contact.objects.create(phone="+63281230001", name="Ana")  # Manila
    Contact.objects.create(phone="+351213000001", name="Rui")  # Lisbon
    post([{"phone": p, "name": "go"} for p in ("+63281230001", "+351213000001")], now=T0)
    run(T0)  # Tuesday 1 December
    due = dict(JourneyInstance.objects.values_list("contact__phone", "due_at"))
    assert due == {
        "+63281230001": datetime.fromisoformat("2026-12-07T00:30:00+00:00"),
        "+351213000001": datetime.fromisoformat("2026-12-07T08:30:00+00:00"),
    }


@pytest.mark.django_db
def test_branches_and_splits_are_decided_for_the_whole_batch() -> None:
    number = make_phone_number()
    for name in ("vip", "plain", "read_it", "nudge"):
        template_on(number, name)
    vip_list = ContactList.objects.create(name="vips")
    journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "steps": [
                {
                    "id": "kind",
                    "type": "branch",
                    "if": {"contact": {"list": "vips"}},
                    "then": "vip",
                    "else": "big",
                },
                {
                    "id": "big",
                    "type": "branch",
                    "if": {"property": "total", "op": "gte", "value": 100},
                    "then": "vip",
                    "else": "plain",
                },
                {
                    "id": "plain",
                    "type": "send",
                    "template": "plain",
                    "mapping": NAME,
                    "next": "wait",
                },
                {"id": "vip", "type": "send", "template": "vip", "mapping": NAME},
                {"id": "wait", "type": "wait", "delay": {"hours": 1}},
                {
                    "id": "seen",
                    "type": "branch",
                    "if": {"last_message": "clicked"},
                    "then": "end",
                    "else": "halves",
                },
                {
                    "id": "halves",
                    "type": "split",
                    "arms": [{"percent": 50, "next": "nudge"}, {"percent": 50, "next": "end"}],
                },
                {"id": "nudge", "type": "send", "template": "nudge", "mapping": NAME},
            ],
        },  # fmt: skip
    )
    phones = people(400)
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=vip_list, contact=c)
        for c in Contact.objects.filter(phone__in=phones[:50])
    )
    post(
        [
            {"phone": p, "name": "go", "properties": {"total": 150 if i % 4 == 0 else 20}}
            for i, p in enumerate(phones)
        ],
        now=T0,
    )
    run(T0)
    templates = Counter(Message.objects.values_list("template__name", flat=True))
    big = sum(1 for i in range(50, 400) if i % 4 == 0)
    assert templates == {"vip": 50 + big, "plain": 400 - 50 - big}
    # A person clicks the first message: their branch goes to the end.
    clicked = Message.objects.filter(template__name="vip").first()
    assert clicked is not None
    Message.objects.filter(pk=clicked.pk).update(status=MessageStatus.DELIVERED)
    Click.objects.create(message=clicked, clicked_at=T0, contact_id=clicked.contact_id)
    run(T0 + timedelta(hours=1))
    nudged = set(Message.objects.filter(template__name="nudge").values_list("to", flat=True))
    assert clicked.to not in nudged
    assert 140 <= len(nudged) <= 260  # half of the other 399
    # The same person always takes the same arm (a split is drawn, not rolled each time).
    arms = JourneyHistory.objects.filter(step="halves").values_list("detail", flat=True)
    assert all(detail.startswith("random split: arm ") for detail in arms)


@pytest.mark.django_db
def test_events_out_for_entering_each_step_and_leaving() -> None:
    subscription_create(name="crm", url="https://crm.example.com/hooks")
    number = make_phone_number()
    template_on(number, "offer")
    journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "key": "order_id",
            "steps": [
                {"id": "offer", "type": "send", "template": "offer", "mapping": NAME},
                {"id": "tell", "type": "emit", "event": "order.reminded"},
            ],
        },
        name="orders",
    )
    Contact.objects.create(phone="+5511987650001", name="Ana")
    post([{"phone": "+5511987650001", "name": "go", "properties": {"order_id": "A-7"}}], now=T0)
    run(T0)
    events = list(EventOutbox.objects.order_by("id").values_list("event_type", "data"))
    types = [t for t, _ in events if t.startswith(("journey.", "order."))]
    assert types == ["journey.entered", "journey.step_fired", "order.reminded", "journey.exited"]
    by_type: dict[str, Any] = {t: d for t, d in events}
    assert by_type["journey.step_fired"]["what"] == "sent"
    assert by_type["journey.step_fired"]["message_id"] == Message.objects.get().pk
    assert by_type["order.reminded"]["properties"] == {"order_id": "A-7"}
    assert by_type["order.reminded"]["key"] == "A-7"
    assert by_type["journey.exited"]["exit_kind"] == "completed"
    assert by_type["journey.entered"]["journey"] == "orders"
