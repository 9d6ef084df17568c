"""``/c/<token>``: a tracked link, on Django (the threaded path).

Used by the WSGI process and the Django test client; the ASGI web process answers the same
GET and HEAD on its event loop (``whatsblast.views.clicks_async``). Public (no login: the
person clicking is a message's recipient, not a user of the site), and read-only from the
browser's side (GET, so no CSRF token is asked for; ``csrf_exempt`` only so that any other
method gets the 405 the decorator answers rather than the CSRF check's 403).

The answer is a 302 carrying nothing but where to go: ``Cache-Control: no-store`` (each
click must reach us to be counted), ``Referrer-Policy: no-referrer`` (the destination
never sees the token). An unknown, forged or expired token goes to ``CLICK_FALLBACK_URL``;
a click that could not be stored gets a short "try again" page, 503 with Retry-After
(``delivery.engagement.clicks``).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from delivery.engagement.clicks import ClicksUnavailable, click_location, retry_after_s

# Headers of every answer of the click endpoint, on both paths.
REDIRECT_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
UNAVAILABLE_TEXT = "This link could not be opened just now. Please try again in a moment.\n"


@csrf_exempt
@require_http_methods(["GET", "HEAD"])
def click(request: HttpRequest, token: str) -> HttpResponse:
    try:
        location = click_location(
            token,
            user_agent=request.headers.get("User-Agent", ""),
            method=request.method or "GET",
        )
    except ClicksUnavailable:
        busy = HttpResponse(UNAVAILABLE_TEXT, status=503, content_type="text/plain")
        busy["Retry-After"] = str(retry_after_s())
        busy["Cache-Control"] = "no-store"
        return busy
    response = HttpResponseRedirect(location)
    for name, value in REDIRECT_HEADERS.items():
        response[name] = value
    return response
