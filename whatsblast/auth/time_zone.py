"""Each person reads times in their own zone, kept on their account.

The zone is the person's ``Preferences.time_zone``, chosen on "My preferences" (the
"Times:" link in the header); a person who has not chosen one reads
``settings.DISPLAY_TIME_ZONE``. Everything is stored in UTC; only the display follows the
viewer.

The middleware must not cost every page a query: the zone is read from the database once
per session (its first request after the login) and kept in the session, which every
admin request loads anyway; saving a new zone updates both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from whatsblast.models import Preferences

# The session keeps [user id, zone name]: a session that changes hands is never read for
# another person (Django's login flushes it then, this is a second guard).
SESSION_KEY = "wb_tz"


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


def default_zone_name() -> str:
    name = str(settings.DISPLAY_TIME_ZONE)
    return name if zone_or_none(name) is not None else "UTC"


def viewer_zone_choice(user: Any) -> str:
    """The zone the person chose ("" when none: they read the site's default)."""
    found = Preferences.objects.filter(user_id=user.pk).values_list("time_zone", flat=True)
    return next(iter(found), "")


def viewer_zone_save(request: HttpRequest, name: str) -> None:
    """Keep the zone the signed-in person chose ("" for the site's default) on their
    account, and in their session for the pages that follow."""
    name = name.strip()
    if name and zone_or_none(name) is None:
        raise ValueError(f"{name!r} is not a time zone")
    user = request.user
    if not user.is_authenticated:
        raise PermissionError("sign in to keep preferences")
    Preferences.objects.update_or_create(user_id=user.pk, defaults={"time_zone": name})
    request.session[SESSION_KEY] = [user.pk, name]


def _session_zone_name(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return ""
    kept = request.session.get(SESSION_KEY)
    if isinstance(kept, list) and len(kept) == 2 and kept[0] == user.pk:
        return str(kept[1])
    name = viewer_zone_choice(user)
    request.session[SESSION_KEY] = [user.pk, name]
    return name


class ViewerTimeZoneMiddleware:
    """Activates the viewer's zone for the request (the site's default when none)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_or_none(_session_zone_name(request) or default_zone_name())
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
