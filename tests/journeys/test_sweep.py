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
def test_four_sweeps_at_once_fire_each_step_once() -> None:
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
