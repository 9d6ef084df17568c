"""My preferences: the viewer's own settings (the time zone times are shown in)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from whatsblast.auth.time_zone import (
    default_zone_name,
    viewer_zone_choice,
    viewer_zone_save,
    zone_choices,
)


def preferences_view(request: HttpRequest) -> HttpResponse:
    """GET: the person's choices; POST: keep them on their account and go back to where
    they were. Each person sets only their own."""
    back = request.POST.get("next") or request.GET.get("next") or "/admin/"
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/admin/"
    error = ""
    current = viewer_zone_choice(request.user)
    if request.method == "POST":
        wanted = request.POST.get("time_zone", "")
        try:
            viewer_zone_save(request, wanted)
        except ValueError as exc:
            error = f"{exc}: type a city, such as America/Sao_Paulo, or leave it blank."
            current = wanted
        else:
            return HttpResponseRedirect(back)
    context = {
        **admin.site.each_context(request),
        "title": "My preferences",
        "zones": zone_choices(),
        "current": current,
        "default_zone": default_zone_name(),
        "next": back,
        "error": error,
    }
    return TemplateResponse(request, "admin/preferences.html", context)


preferences = admin.site.admin_view(preferences_view)
