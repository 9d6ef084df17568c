"""The viewer's own settings: the time zone times are shown in."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from whatsblast.auth.time_zone import COOKIE, COOKIE_MAX_AGE, zone_choices, zone_or_none


def time_zone_view(request: HttpRequest) -> HttpResponse:
    """GET: the choice; POST: keep it (a cookie) and go back to where the person was."""
    current = request.COOKIES.get(COOKIE, "UTC")
    back = request.POST.get("next") or request.GET.get("next") or "/admin/"
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/admin/"
    error = ""
    if request.method == "POST":
        wanted = request.POST.get("time_zone", "")
        if zone_or_none(wanted) is not None:
            response = HttpResponseRedirect(back)
            response.set_cookie(COOKIE, wanted, max_age=COOKIE_MAX_AGE, samesite="Lax")
            return response
        error = f"{wanted!r} is not a time zone."
    context = {
        **admin.site.each_context(request),
        "title": "Your time zone",
        "zones": zone_choices(),
        "current": current,
        "next": back,
        "error": error,
    }
    return TemplateResponse(request, "admin/time_zone.html", context)


time_zone = admin.site.admin_view(time_zone_view)
