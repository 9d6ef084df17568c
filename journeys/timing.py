"""When a journey's steps fire, in each person's own time. Pure functions of their
arguments: each takes the instant it reasons about, so tests move time instead of waiting.

A person's zone is the one campaigns use (campaigns.windows.zones): the contact field the
journey names (``time_zone_field``) when it holds a valid IANA zone, else the zone of their
number where it has one (Manila, Lisbon, New York's area codes), else the journey's
default, else UTC. Wall-clock times become instants through ``wall_instant``: 10:00 is
10:00 local on the days clocks change too (13:00 UTC in New York in winter, 14:00 in
summer), a time the clock skips fires when the clock jumps past it, a time shown twice
fires at the first.
"""

from __future__ import annotations

import hashlib
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from campaigns.windows.daily import SendWindow, wall_instant
from campaigns.windows.zones import recipient_zone


def person_zone(
    *, phone: str | None, attributes: dict[str, object], field: str, default_zone: str
) -> str:
    """The IANA zone a person's local times are read in."""
    return recipient_zone(
        phone=phone or "",
        attribute_value=attributes.get(field) if field else None,
        default_zone=default_zone,
    )


def next_local_time(
    *, now: datetime, at: time, zone: str, weekdays: tuple[int, ...] = ()
) -> datetime:
    """The first instant after ``now`` when the zone's clock reads ``at`` (on one of
    ``weekdays``, Monday 0, when given)."""
    tz = ZoneInfo(zone)
    today = now.astimezone(tz).date()
    for days in range(0, 9):
        day = today + timedelta(days=days)
        if weekdays and day.weekday() not in weekdays:
            continue
        instant = wall_instant(day, at, tz)
        if instant > now:
            return instant
    raise AssertionError("a weekday recurs within a week")  # pragma: no cover


def local_instant(day: date, at: time, zone: str) -> datetime:
    """The instant the zone's clock reads ``at`` on ``day``."""
    return wall_instant(day, at, ZoneInfo(zone))


def window_opening(window: SendWindow | None, zone: str, now: datetime) -> datetime:
    """``now`` when the window is open in ``zone`` (or there is none), else its opening."""
    if window is None:
        return now
    return window.next_opening(ZoneInfo(zone), now)


def local_text(instant: datetime, zone: str) -> str:
    """``2026-12-08 10:00 America/Sao_Paulo`` for the history and the pages."""
    return f"{instant.astimezone(ZoneInfo(zone)):%Y-%m-%d %H:%M} {zone}"


def draw(*parts: object) -> int:
    """A stable draw in 0-9999 for ``parts`` (a holdout, a split's arm): the same answer
    every time it is asked, uniform across contacts."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 10_000


def duration_text(seconds: float) -> str:
    """``1 h 30 min`` for a wait or a lateness."""
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [
        f"{days} d" if days else "",
        f"{hours} h" if hours else "",
        f"{minutes} min" if minutes else "",
    ]
    return " ".join(p for p in parts if p) or f"{seconds} s"
