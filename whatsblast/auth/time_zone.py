"""Each person reads times in their own zone.

The zone is a cookie (``wb_tz``): the admin's script sets it from the browser's zone on
the first visit, and the "Time zone" link in the header changes it. Everything is stored
in UTC; only the display follows the viewer.
"""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo, available_timezones

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

COOKIE = "wb_tz"
COOKIE_MAX_AGE = 365 * 24 * 3600


def zone_or_none(name: str | None) -> ZoneInfo | None:
    """The zone named, or ``None`` for anything that is not an IANA zone name."""
    if not name or len(name) > 64 or name not in _zone_names():
        return None
    return ZoneInfo(name)


_ZONES: frozenset[str] = frozenset()


def _zone_names() -> frozenset[str]:
    global _ZONES
    if not _ZONES:
        _ZONES = frozenset(available_timezones())
    return _ZONES


def zone_choices() -> list[str]:
    """Every zone a person may pick, UTC first."""
    return ["UTC", *sorted(z for z in _zone_names() if "/" in z and not z.startswith("Etc/"))]


class ViewerTimeZoneMiddleware:
    """Activates the viewer's zone for the request (UTC when none or an unknown one)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_or_none(request.COOKIES.get(COOKIE))
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
