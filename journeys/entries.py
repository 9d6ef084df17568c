"""Entries that are checked rather than told: a segment's newcomers, and dates.

**A segment** (``SegmentEntry``): every ``every_minutes`` the segment is evaluated in one
statement that also remembers who fits (``JourneySegmentMember``): those who fit now and
did not at the last check are the newcomers, and enter; those who stopped fitting are
forgotten, so they enter again when they fit again (re-entry rules permitting). The first
check enters everyone who already fits only when the entry says ``backfill``; otherwise it
only remembers them, and the journey takes those who fit from then on.

**A date** (``DateEntry``): a contact attribute holding a date (``YYYY-MM-DD``; ``MM-DD``
or a full date for ``yearly``), ``offset_days`` from it, at a local time of day in each
person's zone. Each check (every quarter hour) finds who has an occurrence within the next
two days and enters them ahead, due at that instant: at 10:00 in São Paulo and at 10:00
in Manila, each DST-safe. The occurrence's date is the instance's key, so a person enters
once per occurrence however many checks see it; occurrences before the journey went live
(or late past its lateness limit) are not entered. A 29 February birthday is kept on 28
February in other years.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import Segment
from delivery.segments.services import segment_compile
from journeys.definition import DateEntry, Definition, SegmentEntry
from journeys.models import HistoryKind, Journey, JourneyStatus
from journeys.running import RunningJourney, running_journeys
from journeys.timing import draw, local_instant, local_text, person_zone
from journeys.work import Instance, Work
from whatsblast.core.db import jsonb_value

DATE_CHECK_EVERY = timedelta(minutes=15)
# How far ahead a date entry enters people (they wait, due at their own instant).
DATE_LOOKAHEAD = timedelta(days=2)
ENTER_BATCH = 5000
_DATE = re.compile(r"^(?:(\d{4})-)?(\d{2})-(\d{2})$")


@dataclass
class EntryReport:
    journeys: int = 0
    entered: int = 0
    refused: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "journeys": self.journeys,
            "entered": self.entered,
            "refused": self.refused,
            "errors": self.errors,
        }


def entries_check(*, now: datetime | None = None, force: bool = False) -> EntryReport:
    """Run the segment and date entries whose check is due (all of them with ``force``)."""
    now = now or timezone.now()
    report = EntryReport()
    for journey in running_journeys().values():
        entry = journey.definition.entry
        if not isinstance(entry, SegmentEntry | DateEntry):
            continue
        every = (
            timedelta(minutes=entry.every_minutes)
            if isinstance(entry, SegmentEntry)
            else DATE_CHECK_EVERY
        )
        checked = journey.journey.entry_checked_at
        if not force and checked is not None and now - checked < every:
            continue
        report.journeys += 1
        try:
            entered, refused = _check(journey, now)
        except Exception as exc:  # a segment gone, rules that no longer compile
            report.errors += 1
            Journey.objects.filter(pk=journey.id).update(
                entry_checked_at=now, entry_check_error=f"{type(exc).__name__}: {exc}"[:500]
            )
            continue
        report.entered += entered
        report.refused += refused
    return report


def _check(journey: RunningJourney, now: datetime) -> tuple[int, int]:
    with transaction.atomic():
        locked = (
            Journey.objects.select_for_update(skip_locked=True)
            .filter(pk=journey.id, status=JourneyStatus.LIVE)
            .first()
        )
        if locked is None:
            return 0, 0  # another check holds it, or it stopped being live
        entry = journey.definition.entry
        if isinstance(entry, SegmentEntry):
            first = locked.entry_checked_at is None
            newcomers = _segment_newcomers(journey.id, entry, now)
            if first and not entry.backfill:
                newcomers = []
            result = _enter(
                journey,
                [(c, "", now, f"newly fits segment {entry.segment_id}") for c in newcomers],
                now,
            )  # noqa: E501
        else:
            assert isinstance(entry, DateEntry)
            result = _enter(journey, _date_occurrences(journey, entry, locked, now), now)
        Journey.objects.filter(pk=journey.id).update(entry_checked_at=now, entry_check_error="")
    return result


# The segment now, and who fits it for the first time since the last check: one
# statement, so the newcomers and the remembered members agree. Data-modifying CTEs see
# the same snapshot: the delete forgets who left, the insert remembers who came and
# returns them.
_SEGMENT_SQL = """
WITH now_in AS (
    SELECT c.id FROM campaigns_contact AS c WHERE {condition}
),
gone AS (
    DELETE FROM journeys_journeysegmentmember AS m
     WHERE m.journey_id = %(journey)s
       AND NOT EXISTS (SELECT 1 FROM now_in n WHERE n.id = m.contact_id)
),
added AS (
    INSERT INTO journeys_journeysegmentmember (journey_id, contact_id, since)
    SELECT %(journey)s, n.id, %(now)s FROM now_in AS n
    ON CONFLICT (journey_id, contact_id) DO NOTHING
    RETURNING contact_id
)
SELECT contact_id FROM added ORDER BY contact_id
"""


def _segment_newcomers(journey_id: int, entry: SegmentEntry, now: datetime) -> list[int]:
    segment = Segment.objects.get(pk=entry.segment_id)
    compiled = segment_compile(segment.rules, prefix="je")
    with connection.cursor() as cursor:
        cursor.execute(
            _SEGMENT_SQL.format(condition=compiled.condition),
            {**compiled.params, "journey": journey_id, "now": now},
        )
        return [int(row[0]) for row in cursor.fetchall()]


def anniversary(month: int, day: int, year: int) -> date:
    """The date of ``month``/``day`` in ``year``: 29 February is the 28th in other years."""
    if month == 2 and day == 29 and not calendar.isleap(year):
        return date(year, 2, 28)
    return date(year, month, day)


def occurrences(value: Any, entry: DateEntry, around: date) -> list[date]:
    """The entry's occurrence dates for an attribute ``value`` near ``around`` (a few days
    either side): the date plus the offset, or each year's anniversary plus it."""
    match = _DATE.match(str(value).strip()) if isinstance(value, str) else None
    if match is None:
        return []
    year_text, month, day = match.groups()
    try:
        if not entry.yearly:
            if year_text is None:
                return []
            return [date(int(year_text), int(month), int(day)) + timedelta(days=entry.offset_days)]
        return [
            anniversary(int(month), int(day), year) + timedelta(days=entry.offset_days)
            for year in (around.year - 1, around.year, around.year + 1)
        ]
    except ValueError:
        return []


def _date_candidates(
    entry: DateEntry, days: list[date]
) -> list[tuple[int, str | None, dict[str, Any]]]:  # noqa: E501
    """Contacts whose attribute could fall on one of ``days``: a cheap prefilter in SQL
    (its month and day, or the whole date), exact in Python after."""
    targets = [d - timedelta(days=entry.offset_days) for d in days]
    if entry.yearly:
        keys = sorted(
            {f"{d:%m-%d}" for d in targets}
            | ({"02-29"} if any(f"{d:%m-%d}" == "02-28" for d in targets) else set())
        )  # noqa: E501
        where = "right(c.attributes ->> %(field)s, 5) = ANY(%(keys)s)"
    else:
        keys = sorted({d.isoformat() for d in targets})
        where = "c.attributes ->> %(field)s = ANY(%(keys)s)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.id, c.phone, c.attributes FROM campaigns_contact AS c WHERE {where}",  # noqa: S608
            {"field": entry.field, "keys": keys},
        )
        return [(int(i), p, jsonb_value(a) or {}) for i, p, a in cursor.fetchall()]


def _date_occurrences(
    journey: RunningJourney, entry: DateEntry, locked: Journey, now: datetime
) -> list[tuple[int, str, datetime, str]]:
    definition = journey.definition
    today = now.date()
    days = [today + timedelta(days=n) for n in range(-2, DATE_LOOKAHEAD.days + 2)]
    since = max(locked.live_since or now, now - timedelta(seconds=definition.lateness_s))
    found = []
    for contact_id, phone, attributes in _date_candidates(entry, days):
        zone = person_zone(
            phone=phone,
            attributes=attributes,
            field=definition.time_zone_field,
            default_zone=definition.time_zone,
        )
        for day in occurrences(attributes.get(entry.field), entry, today):
            instant = local_instant(day, entry.at, zone)
            if since <= instant < now + DATE_LOOKAHEAD:
                found.append(
                    (
                        contact_id,
                        day.isoformat(),
                        instant,
                        f"{entry.field} {day:%Y-%m-%d}: at {local_text(instant, zone)}",
                    )  # noqa: E501
                )
    return found


# Every instance a (journey, contact) ever had, by key, for the re-entry rules.
_PAST_SQL = """
SELECT contact_id, key, max(entered_at) FROM journeys_journeyinstance
 WHERE journey_id = %(journey)s AND contact_id = ANY(%(contacts)s)
 GROUP BY contact_id, key
"""


def _enter(
    journey: RunningJourney, arrivals: list[tuple[int, str, datetime, str]], now: datetime
) -> tuple[int, int]:
    """Enter each (contact, key, due at, why) the re-entry rules let in; (entered, refused)."""
    entered = refused = 0
    tests = set(journey.journey.test_contacts.values_list("pk", flat=True))
    definition = journey.definition
    for start in range(0, len(arrivals), ENTER_BATCH):
        chunk = arrivals[start : start + ENTER_BATCH]
        with connection.cursor() as cursor:
            cursor.execute(_PAST_SQL, {"journey": journey.id, "contacts": [c for c, *_ in chunk]})
            past: dict[int, dict[str, datetime]] = {}
            for contact_id, key, at in cursor.fetchall():
                past.setdefault(int(contact_id), {})[str(key)] = at
        work = Work(now=now)
        for contact_id, key, due, why in chunk:
            if key and key in past.get(contact_id, {}):
                continue  # this occurrence entered at an earlier check: not a refusal
            if not _may_enter(definition, past.get(contact_id, {}), now):
                refused += 1
                continue
            test = contact_id in tests
            instance = Instance(
                id=None,
                journey_id=journey.id,
                contact_id=contact_id,
                version=journey.version,
                key=key,
                step=definition.first,
                entered_at=now,
                due_at=due,
                step_due_at=due,
                holdout=not test
                and draw(journey.id, contact_id) < round(definition.holdout_percent * 100),
                test=test,
            )
            work.new.append(instance)
            note = " (held out: it sends nothing)" if instance.holdout else ""
            work.log(instance, HistoryKind.ENTERED, why + note)
            past.setdefault(contact_id, {})[key] = now
            entered += 1
        work.flush()
        entered -= work.refused
        refused += work.refused
    if refused:
        _refusals_add(journey.id, refused)
    return entered, refused


def _may_enter(definition: Definition, past: dict[str, datetime], now: datetime) -> bool:
    """The re-entry rule for a new occurrence: ``once`` ever, or ``after_days`` since the
    latest entry, or every time."""
    if not past:
        return True
    if definition.re_entry == "once":
        return False
    if definition.re_entry == "after_days":
        return now >= max(past.values()) + timedelta(days=definition.re_entry_days)
    return True


def _refusals_add(journey_id: int, n: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE journeys_journey
               SET entries_refused = jsonb_set(entries_refused, '{re_entry}',
                   to_jsonb(coalesce((entries_refused ->> 're_entry')::bigint, 0) + %s))
             WHERE id = %s
            """,
            [n, journey_id],
        )
