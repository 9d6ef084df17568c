"""Entries that are checked (a segment's newcomers), and trying a journey before it is
live (a dry run in each person's time; test contacts entered by hand, waits skipped)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from campaigns.models import Contact, Segment
from delivery.models import Message
from journeys.dry_run import (
    TestContactError,
    instance_wait_skip,
    journey_dry_run,
    journey_test_enter,
)
from journeys.entries import entries_check
from journeys.models import JourneyInstance
from journeys.sweep import journeys_sweep
from journeys.versions import journey_create
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, template_on

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-12-01T12:00:00+00:00")  # a Tuesday
NAME = {"body": {"1": {"field": "name"}}}


def vip(phone: str, tier: str = "gold") -> Contact:
    contact, _ = Contact.objects.update_or_create(
        phone=phone, defaults={"name": "Ana", "attributes": {"tier": tier}}
    )
    return contact


def segment_journey(segment: Segment, *, backfill: bool) -> dict[str, object]:
    return {
        "entry": {"type": "segment", "segment": segment.pk, "every_minutes": 60,
                  "backfill": backfill},
        "re_entry": "once",
        "steps": [{"id": "welcome", "type": "send", "template": "welcome", "mapping": NAME}],
    }  # fmt: skip


@pytest.mark.parametrize("backfill", [False, True])
def test_those_who_newly_fit_enter_at_the_next_check(backfill: bool) -> None:
    number = make_phone_number()
    template_on(number, "welcome")
    gold = Segment.objects.create(name="gold", rules={"field": "tier", "op": "eq", "value": "gold"})
    vip("+5511987650001")  # fits before the journey goes live
    journey_live(number, segment_journey(gold, backfill=backfill))
    entries_check(now=T0)
    journeys_sweep(now=T0)
    assert Message.objects.count() == (1 if backfill else 0)
    vip("+5511987650002")
    entries_check(now=T0 + timedelta(minutes=30))  # not due: checked hourly
    assert JourneyInstance.objects.count() == (1 if backfill else 0)
    entries_check(now=T0 + timedelta(minutes=61))
    journeys_sweep(now=T0 + timedelta(minutes=61))
    assert set(Message.objects.values_list("to", flat=True)) == (
        {"+5511987650001", "+5511987650002"} if backfill else {"+5511987650002"}
    )
    # Leaving and fitting again: a newcomer again, but "once" keeps them out (counted).
    vip("+5511987650002", tier="silver")
    entries_check(now=T0 + timedelta(minutes=122))
    vip("+5511987650002")
    entries_check(now=T0 + timedelta(minutes=183))
    assert Message.objects.filter(to="+5511987650002").count() == 1


def test_a_dry_run_shows_each_persons_steps_in_their_own_time() -> None:
    number = make_phone_number()
    template_on(number, "offer")
    journey = journey_create(
        name="dry",
        phone_number=number,
        definition={
            "entry": {"type": "event", "event": "go"},
            "window": "09:00-18:00",
            "steps": [
                {"id": "wait", "type": "wait", "delay": {"hours": 2}},
                {
                    "id": "big",
                    "type": "branch",
                    "if": {"property": "total", "op": "gt", "value": 100},
                    "then": "offer",
                    "else": "end",
                },
                {"id": "offer", "type": "send", "template": "offer", "mapping": NAME},
                {"id": "reply", "type": "wait", "for_reply": True, "timeout": {"days": 1}},
            ],
        },  # fmt: skip
    )
    people = [
        Contact.objects.create(phone="+63281230001", name="Ana"),  # Manila
        Contact.objects.create(phone="+5511987650001", name="Bia"),  # São Paulo
    ]
    dry = journey_dry_run(journey, contacts=people, properties={"total": 150}, now=T0)
    manila, sao_paulo = dry
    assert (manila.zone, sao_paulo.zone) == ("Asia/Manila", "America/Sao_Paulo")
    assert [(s.step, s.local) for s in sao_paulo.steps] == [
        ("wait", "2026-12-01 11:00 America/Sao_Paulo"),
        ("big", "2026-12-01 11:00 America/Sao_Paulo"),
        ("offer", "2026-12-01 11:00 America/Sao_Paulo"),
        ("reply", "2026-12-02 11:00 America/Sao_Paulo"),
        ("end", "2026-12-02 11:00 America/Sao_Paulo"),
    ]
    offer = [s for s in manila.steps if s.step == "offer"][0]
    assert offer.local == "2026-12-02 09:00 Asia/Manila"  # 22:00 there: at the opening
    assert offer.note == "outside the window 09:00-18:00: at its opening"
    small = journey_dry_run(journey, contacts=people[:1], properties={"total": 5}, now=T0)
    assert [s.step for s in small[0].steps] == ["wait", "big", "end"]
    assert not JourneyInstance.objects.exists()  # nothing was written


def test_a_test_contact_enters_by_hand_and_skips_its_waits() -> None:
    number = make_phone_number()
    template_on(number, "offer")
    journey = journey_live(
        number,
        {
            "entry": {"type": "event", "event": "go"},
            "steps": [
                {"id": "wait", "type": "wait", "delay": {"days": 3}},
                {"id": "offer", "type": "send", "template": "offer", "mapping": NAME},
            ],
        },
    )
    tester = Contact.objects.create(phone="+5511987650099", name="Tess")
    stranger = Contact.objects.create(phone="+5511987650098", name="Sam")
    with pytest.raises(TestContactError):
        journey_test_enter(journey=journey, contact=stranger)
    journey.test_contacts.add(tester)
    instance = journey_test_enter(journey=journey, contact=tester, properties={"total": 1})
    journeys_sweep()
    instance.refresh_from_db()
    assert instance.test and instance.step == "wait" and instance.waiting_since is not None
    assert instance_wait_skip(instance=instance)
    journeys_sweep()
    assert Message.objects.filter(contact=tester).count() == 1
    # Entered again by hand: a fresh run, the first one ended.
    journey_test_enter(journey=journey, contact=tester)
    assert JourneyInstance.objects.filter(contact=tester).count() == 2
    assert JourneyInstance.objects.filter(contact=tester, state="active").count() == 1
