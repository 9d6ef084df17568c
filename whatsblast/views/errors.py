"""Error pages people see: a refusal styled like the admin, with a way back."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403: what happened, who is signed in, and a link back to where they came from."""
    back = request.META.get("HTTP_REFERER", "")
    if not back or not url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        back = "/admin/"
    context = {
        **(admin.site.each_context(request) if request.path.startswith("/admin/") else {}),
        "title": "You don't have access to this page",
        "back_url": back,
    }
    response = TemplateResponse(request, "403.html", context, status=403)
    response.render()
    return response
