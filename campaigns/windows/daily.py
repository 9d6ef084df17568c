"""Daily send windows in a recipient's local time, and what they do to a campaign's ETA.

Pure functions of their arguments: every one takes the instant it reasons about (``now``)
rather than reading a clock, so tests run them at fixed instants.

A window is two wall-clock times, ``start`` (inclusive) and ``end`` (exclusive), applied
every day in the recipient's zone; a start after the end wraps midnight (22:00-06:00 is
open from 22:00 to 06:00 the next morning). Openings are computed with ``zoneinfo``, so a
window opening at 09:00 opens at 09:00 local on the day clocks change too: at 13:00 UTC
in New York in winter, 12:00 UTC in summer. A start the clock skips (02:30 on a
spring-forward night) opens the moment the clock jumps past it; a start the clock shows
twice (01:30 on a fall-back night) opens at the first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

_WINDOW_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")
# How far ahead an ETA looks before it gives up ("more than N days").
ETA_HORIZON_DAYS = 60


@dataclass(frozen=True)
class SendWindow:
    start: time
    end: time

    def __post_init__(self) -> None:
        if self.start == self.end:
            raise ValueError("a send window needs different start and end times")

    @classmethod
    def parse(cls, text: str) -> SendWindow:
        """``"09:00-20:00"`` (or ``"22:00-06:00"``, wrapping midnight)."""
        match = _WINDOW_RE.match(text)
        if not match:
            raise ValueError(f"{text!r} is not a window like 09:00-20:00")
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
            raise ValueError(f"{text!r} is not a window like 09:00-20:00")
        return cls(time(h1, m1), time(h2, m2))

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"

    @property
    def wraps(self) -> bool:
        return self.start > self.end

    @property
    def hours(self) -> float:
        """Wall-clock hours a day (a DST day's real length differs by the shift)."""
        minutes = (_minutes(self.end) - _minutes(self.start)) % (24 * 60)
        return minutes / 60

    def contains(self, wall: time) -> bool:
        """Whether a local wall-clock time lies inside the window."""
        wall = wall.replace(tzinfo=None, fold=0)
        if self.wraps:
            return wall >= self.start or wall < self.end
        return self.start <= wall < self.end

    def is_open(self, zone: ZoneInfo, now: datetime) -> bool:
        return self.contains(now.astimezone(zone).time())

    def next_opening(self, zone: ZoneInfo, now: datetime) -> datetime:
        """``now`` if the window is open in ``zone``, else the instant it next opens (UTC)."""
        if self.is_open(zone, now):
            return now
        today = now.astimezone(zone).date()
        for days in range(3):
            for fold in (0, 1):
                opening = wall_instant(today + timedelta(days=days), self.start, zone, fold=fold)
                if opening > now:
                    return opening
        raise AssertionError("a daily window opens within two days")  # pragma: no cover

    def open_intervals(
        self, zone: ZoneInfo, since: datetime, until: datetime
    ) -> list[tuple[datetime, datetime]]:
        """The [opening, closing) intervals in UTC that overlap [since, until), clipped."""
        intervals = []
        day = since.astimezone(zone).date() - timedelta(days=1)
        last = until.astimezone(zone).date()
        while day <= last:
            opening = wall_instant(day, self.start, zone)
            closing = wall_instant(day + timedelta(days=int(self.wraps)), self.end, zone)
            lo, hi = max(opening, since), min(closing, until)
            if lo < hi:
                intervals.append((lo, hi))
            day += timedelta(days=1)
        return intervals


def wall_instant(day: date, at: time, zone: ZoneInfo, *, fold: int = 0) -> datetime:
    """The instant (UTC) the zone's clock reads ``at`` on ``day``.

    ``fold`` picks the first (0) or second (1) of a time shown twice. A time the clock skips
    has no instant: the answer is the transition, when the clock jumps past it.
    """
    local = datetime.combine(day, at.replace(tzinfo=None), tzinfo=zone).replace(fold=fold)
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None):
        return instant
    # In a gap: fold=1 reads it with the offset after the jump (an instant before the
    # transition), fold=0 with the offset before (an instant after it). Search between.
    lo = local.replace(fold=1).astimezone(UTC)
    hi = local.replace(fold=0).astimezone(UTC)
    lo, hi = min(lo, hi), max(lo, hi)
    after = hi.astimezone(zone).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0) if hi.microsecond else hi


def _minutes(t: time) -> int:
    return t.hour * 60 + t.minute


# --- ETA ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZoneEta:
    zone: str
    recipients: int
    open_hours_per_day: float
    finishes_at: datetime | None


@dataclass(frozen=True)
class WindowEta:
    """When the remaining recipients are sent, at ``rate``, only while their window is open."""

    recipients: int
    rate_per_second: float
    finishes_at: datetime | None  # None: not within ETA_HORIZON_DAYS (or no rate)
    zones: list[ZoneEta] = field(default_factory=list)

    def seconds_from(self, now: datetime) -> float | None:
        return None if self.finishes_at is None else (self.finishes_at - now).total_seconds()

    def as_dict(self) -> dict[str, object]:
        return {
            "recipients": self.recipients,
            "rate_per_second": self.rate_per_second,
            "finishes_at": self.finishes_at.isoformat() if self.finishes_at else None,
            "zones": [
                {
                    "zone": z.zone,
                    "recipients": z.recipients,
                    "open_hours_per_day": z.open_hours_per_day,
                    "finishes_at": z.finishes_at.isoformat() if z.finishes_at else None,
                }
                for z in self.zones
            ],
        }


def window_eta(
    *,
    recipients_by_zone: Mapping[str, int],
    window: SendWindow | None,
    rate: float,
    now: datetime,
    horizon_days: int = ETA_HORIZON_DAYS,
) -> WindowEta:
    """Estimate when every recipient is sent, sending at ``rate`` only inside windows.

    A fluid model of the sender: between two window openings or closings the set of open
    zones is fixed and ``rate`` messages a second go out, first to the zone whose window
    opened earliest (the claim takes rows in ``next_attempt_at`` order, and a row waiting
    for its window is due at the window's opening). A zone whose window closes keeps its
    remainder for its next opening.
    """
    counts = {zone: n for zone, n in recipients_by_zone.items() if n > 0}
    total = sum(counts.values())
    if rate <= 0:
        return WindowEta(total, rate, None if total else now, _zones(counts, window, {}))
    if window is None:
        done = now + timedelta(seconds=total / rate)
        return WindowEta(total, rate, done, _zones(counts, None, dict.fromkeys(counts, done)))
    until = now + timedelta(days=horizon_days)
    intervals = {zone: window.open_intervals(ZoneInfo(zone), now, until) for zone in sorted(counts)}
    finished = _simulate(counts, intervals, rate)
    finishes_at = max(finished.values()) if len(finished) == len(counts) and counts else None
    if not counts:
        finishes_at = now
    return WindowEta(total, rate, finishes_at, _zones(counts, window, finished, now=now))


def _simulate(
    counts: Mapping[str, int],
    intervals: Mapping[str, list[tuple[datetime, datetime]]],
    rate: float,
) -> dict[str, datetime]:
    remaining = {zone: float(n) for zone, n in counts.items()}
    events = sorted({t for spans in intervals.values() for span in spans for t in span})
    position = dict.fromkeys(intervals, 0)  # each zone's first interval not yet over
    finished: dict[str, datetime] = {}
    for a, b in zip(events, events[1:], strict=False):
        open_zones = []
        for zone, spans in intervals.items():
            i = position[zone]
            while i < len(spans) and spans[i][1] <= a:
                i += 1
            position[zone] = i
            if remaining[zone] > 0 and i < len(spans) and spans[i][0] <= a:
                open_zones.append((spans[i][0], zone))
        cursor = a
        budget = rate * (b - a).total_seconds()
        for _opened, zone in sorted(open_zones):
            if budget <= 0:
                break
            take = min(remaining[zone], budget)
            remaining[zone] -= take
            budget -= take
            cursor += timedelta(seconds=take / rate)
            if remaining[zone] <= 1e-9:
                finished[zone] = cursor
        if len(finished) == len(remaining):
            break
    return finished


def _zones(
    counts: Mapping[str, int],
    window: SendWindow | None,
    finished: Mapping[str, datetime],
    *,
    now: datetime | None = None,
) -> list[ZoneEta]:
    return [
        ZoneEta(
            zone=zone,
            recipients=n,
            open_hours_per_day=_open_hours(window, zone, now),
            finishes_at=finished.get(zone),
        )
        for zone, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def _open_hours(window: SendWindow | None, zone: str, now: datetime | None) -> float:
    """Real open hours a day over the coming week (a DST change makes one day differ)."""
    if window is None:
        return 24.0
    if now is None:
        return window.hours
    spans = window.open_intervals(ZoneInfo(zone), now, now + timedelta(days=7))
    seconds = sum((b - a).total_seconds() for a, b in spans)
    return round(seconds / 3600 / 7, 2)
