"""``/api/v1/`` events in and journeys (thin views: the checks every API view makes are
``api_common``'s; the rules are journeys.events_in, journeys.api and journeys.versions).

Events in take the ``campaigns`` scope, as conversions do; once stored they are routed to
the journeys by the journeys' pass, queued after the commit so an order's first message
leaves within about a second (the tick runs it too: a lost job costs a second).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse

from delivery.api.errors import ApiProblem
from delivery.api.validation import idempotency_key_parse
from delivery.models import ApiScope
from journeys.api import journey_of_key, journey_render, journey_status_filter, journeys_of_key
from journeys.events_in import events_record, events_request_parse
from journeys.models import Journey
from journeys.openapi import JOURNEY_STATUS_CONFLICT
from journeys.passes import pass_schedule
from journeys.versions import JourneyStateError, journey_pause, journey_resume
from whatsblast.views.api_common import (
    api_view,
    authenticate,
    json_body,
    page_answer,
    page_params_check,
)

WRITE = (ApiScope.CAMPAIGNS,)
READ = (ApiScope.CAMPAIGNS, ApiScope.READ)


def _url(request: HttpRequest, journey_id: int) -> str:
    return request.build_absolute_uri(reverse("api:journey", args=[journey_id]))


@api_view("POST")
def events(request: HttpRequest) -> HttpResponse:
    """A batch of events: 200 with counts and each item's outcome."""
    api_key = authenticate(request, *WRITE)
    data = json_body(request, limit=settings.EVENTS_IN_MAX_BODY_BYTES)
    idempotency_key = idempotency_key_parse(request.headers.get("Idempotency-Key"))
    items = events_request_parse(data, max_items=settings.EVENTS_IN_MAX_BATCH)
    result = events_record(api_key_id=api_key.pk, items=items, idempotency_key=idempotency_key)
    if result.stored:
        transaction.on_commit(pass_schedule)
    return JsonResponse(result.as_dict())


@api_view("GET")
def journeys(request: HttpRequest) -> HttpResponse:
    api_key = authenticate(request, *READ)
    status = journey_status_filter(request.GET.get("status"))
    page_params_check(request)
    found = journeys_of_key(api_key)
    if status is not None:
        found = found.filter(status=status)
    return page_answer(request, found, lambda j: journey_render(j, url=_url(request, j.pk)))


@api_view("GET")
def journey(request: HttpRequest, journey_id: int) -> HttpResponse:
    api_key = authenticate(request, *READ)
    found = journey_of_key(api_key=api_key, journey_id=journey_id)
    return JsonResponse(journey_render(found, url=_url(request, found.pk), figures=True))


def _conflict(found: Journey, action: str) -> ApiProblem:
    found.refresh_from_db()
    return ApiProblem(
        409, JOURNEY_STATUS_CONFLICT, f"The journey is {found.status}: it cannot be {action}."
    )


@api_view("POST")
def pause(request: HttpRequest, journey_id: int) -> HttpResponse:
    api_key = authenticate(request, *WRITE)
    found = journey_of_key(api_key=api_key, journey_id=journey_id)
    try:
        paused = journey_pause(journey=found, reason=f"paused through the API (key {api_key.name})")
    except JourneyStateError:
        raise _conflict(found, "paused") from None
    return JsonResponse(journey_render(paused, url=_url(request, found.pk)))


@api_view("POST")
def resume(request: HttpRequest, journey_id: int) -> HttpResponse:
    api_key = authenticate(request, *WRITE)
    found = journey_of_key(api_key=api_key, journey_id=journey_id)
    try:
        resumed = journey_resume(journey=found)
    except JourneyStateError:
        raise _conflict(found, "resumed") from None
    return JsonResponse(journey_render(resumed, url=_url(request, found.pk)))


urlpatterns: list[URLPattern] = [
    path("events", events, name="events_in"),
    path("journeys", journeys, name="journeys"),
    path("journeys/<int:journey_id>", journey, name="journey"),
    path("journeys/<int:journey_id>/pause", pause, name="journey_pause"),
    path("journeys/<int:journey_id>/resume", resume, name="journey_resume"),
]
