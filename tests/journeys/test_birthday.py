"""A birthday at 10:00 in each person's own time, across the clocks' change.

People in São Paulo, Lisbon, New York and Manila, their zones read from their numbers,
with birthdays either side of Lisbon's (25 October 2026) and New York's (1 November 2026)
change from summer time. The journeys' clock is moved forward half an hour at a time
from 23 October to 4 November (not waited for): each person is sent their message at
10:00 on their own clock, which is a different UTC hour before and after the change.
The expected instants are written out, not computed by the code under test.

The template is a utility one here, so that New York can be sent at all: Meta delivers
no marketing template to US numbers, and a marketing birthday to New York is skipped at its
10:00 with that reason (while Toronto, +1 too, is sent): the last test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from campaigns.models import Contact
from delivery.models import Message
from journeys.entries import entries_check
from journeys.models import HistoryKind, Journey, JourneyHistory, JourneyInstance
from journeys.sweep import journeys_sweep
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, template_on

pytestmark = pytest.mark.django_db

BIRTHDAY = {
    "entry": {"type": "date", "field": "birthday", "at": "10:00", "yearly": True},
    "steps": [
        {"id": "wish", "type": "send", "template": "birthday",
         "mapping": {"body": {"1": {"field": "name"}}}},
    ],
}  # fmt: skip

# (phone, birthday, the UTC instant of 10:00 on their clock that day)
PEOPLE = [
    ("+5511987650001", "1990-10-24", datetime(2026, 10, 24, 13, tzinfo=UTC)),  # São Paulo, -03
    ("+5511987650002", "1985-11-02", datetime(2026, 11, 2, 13, tzinfo=UTC)),
    ("+351213000001", "1979-10-24", datetime(2026, 10, 24, 9, tzinfo=UTC)),  # Lisbon, WEST +01
    ("+351213000002", "10-26", datetime(2026, 10, 26, 10, tzinfo=UTC)),  # Lisbon, WET +00
    ("+12125550001", "2001-10-31", datetime(2026, 10, 31, 14, tzinfo=UTC)),  # New York, EDT -04
    ("+12125550002", "1999-11-02", datetime(2026, 11, 2, 15, tzinfo=UTC)),  # New York, EST -05
    ("+63281230001", "1995-10-27", datetime(2026, 10, 27, 2, tzinfo=UTC)),  # Manila, +08
    ("+63281230002", "11-03", datetime(2026, 11, 3, 2, tzinfo=UTC)),
]


def test_each_person_gets_it_at_ten_on_their_own_clock_across_the_change() -> None:
    number = make_phone_number()
    template_on(number, "birthday", category="UTILITY")
    journey = journey_live(number, BIRTHDAY, name="birthday")
    start = datetime(2026, 10, 23, tzinfo=UTC)
    Journey.objects.filter(pk=journey.pk).update(live_since=start)
    for phone, birthday, _ in PEOPLE:
        Contact.objects.create(phone=phone, name=phone[-4:], attributes={"birthday": birthday})
    # Someone whose birthday is not in these days, and one with no date: never entered.
    Contact.objects.create(phone="+5511987650009", attributes={"birthday": "1990-06-01"})
    Contact.objects.create(phone="+5511987650010", attributes={"birthday": "soon"})

    now = start
    while now < datetime(2026, 11, 4, tzinfo=UTC):
        entries_check(now=now)
        journeys_sweep(now=now)
        now += timedelta(minutes=30)

    sent = {
        h.contact_id: h.at
        for h in JourneyHistory.objects.filter(journey_id=journey.pk, kind=HistoryKind.SENT)
    }
    by_phone = dict(Contact.objects.values_list("phone", "pk"))
    assert {phone: sent.get(by_phone[phone]) for phone, _, _ in PEOPLE} == {
        phone: at for phone, _, at in PEOPLE
    }
    assert JourneyInstance.objects.filter(journey=journey).count() == len(PEOPLE)
    assert Message.objects.filter(journey_step="wish").count() == len(PEOPLE)
    # Each entered once, keyed by the day: more checks the same day enter nobody again.
    keys = set(JourneyInstance.objects.values_list("contact__phone", "key"))
    assert ("+12125550001", "2026-10-31") in keys and ("+351213000002", "2026-10-26") in keys


def test_a_29_february_birthday_is_kept_on_the_28th_in_other_years() -> None:
    number = make_phone_number()
    template_on(number, "birthday")
    journey = journey_live(number, BIRTHDAY, name="leap")
    start = datetime(2027, 2, 27, tzinfo=UTC)
    Journey.objects.filter(pk=journey.pk).update(live_since=start)
    Contact.objects.create(phone="+63281230009", name="Leap", attributes={"birthday": "2000-02-29"})
    now = start
    while now < datetime(2027, 3, 2, tzinfo=UTC):
        entries_check(now=now)
        journeys_sweep(now=now)
        now += timedelta(hours=1)
    # Seen again at each hourly check that day, but one occurrence: entered once, and
    # not counted as a refusal.
    assert Journey.objects.get(pk=journey.pk).entries_refused == {}
    [at] = JourneyHistory.objects.filter(journey_id=journey.pk, kind=HistoryKind.SENT).values_list(
        "at", flat=True
    )
    assert at == datetime(2027, 2, 28, 2, tzinfo=UTC)  # 10:00 in Manila


def test_a_marketing_birthday_skips_new_york_at_its_ten_and_sends_toronto() -> None:
    number = make_phone_number()
    template_on(number, "birthday")  # marketing
    journey = journey_live(number, BIRTHDAY, name="marketing birthday")
    start = datetime(2026, 10, 30, tzinfo=UTC)
    Journey.objects.filter(pk=journey.pk).update(live_since=start)
    new_york = Contact.objects.create(
        phone="+12125550001", name="NY", attributes={"birthday": "10-31"}
    )
    toronto = Contact.objects.create(
        phone="+14165550001", name="TO", attributes={"birthday": "10-31"}
    )
    now = start
    while now < datetime(2026, 11, 1, tzinfo=UTC):
        entries_check(now=now)
        journeys_sweep(now=now)
        now += timedelta(minutes=30)
    fired = {
        (h.contact_id, h.kind): (h.at, h.detail)
        for h in JourneyHistory.objects.filter(journey_id=journey.pk, step="wish")
    }
    assert fired[(new_york.pk, HistoryKind.SKIPPED)] == (
        datetime(2026, 10, 31, 14, tzinfo=UTC),
        "US number: Meta does not deliver marketing templates to US numbers",
    )
    assert fired[(toronto.pk, HistoryKind.SENT)][0] == datetime(2026, 10, 31, 14, tzinfo=UTC)
    assert list(Message.objects.values_list("to", flat=True)) == ["+14165550001"]
