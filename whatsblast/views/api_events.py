"""``/api/v1/`` event subscriptions and their dead letters: thin views over one service each.

A key sees and manages only the subscriptions it created (``api_key``): any other id
answers 404, exactly as a missing one, so ids of other keys' subscriptions stay secret.
Reading takes ``campaigns`` or ``read``; creating, deleting, resuming, replaying and pinging take
``campaigns``. Checks run in ``api_common``'s order: 401, 429, 403, then the body (415,
413, 400), then 409 and 404.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, reverse

from delivery.api.errors import ApiProblem, invalid_fields
from delivery.api.openapi_events import NAME_MAX, NAME_PATTERN, URL_MAX, URL_PATTERN
from delivery.events.subscriptions import (
    dead_letters_replay,
    subscription_create,
    subscription_ping,
    subscription_resume,
    url_errors,
)
from delivery.events.types import event_types_errors
from delivery.models import ApiKey, ApiScope, Event, EventDeadLetter, EventSubscription
from whatsblast.core.storable import UNSTORABLE, text_storable
from whatsblast.views.api_common import (
    MAX_ID,
    api_view,
    authenticate,
    create_answer,
    iso,
    json_body,
    page_answer,
    page_params_check,
)

_NAME = re.compile(NAME_PATTERN)
_URL = re.compile(URL_PATTERN)
_FIELDS = frozenset({"name", "url", "event_types"})


def _subscriptions(api_key: ApiKey) -> QuerySet[EventSubscription]:
    return EventSubscription.objects.filter(api_key=api_key).annotate(
        waiting=Count("dead_letters", filter=Q(dead_letters__replayed_at__isnull=True))
    )


def _own(api_key: ApiKey, subscription_id: int) -> EventSubscription:
    found = (
        _subscriptions(api_key).filter(pk=subscription_id).first()
        if subscription_id <= MAX_ID
        else None
    )
    if found is None:
        raise ApiProblem(404, "not_found", "No such subscription.")
    return found


def _newest_seq() -> int:
    return Event.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


def subscription_json(subscription: EventSubscription, *, newest_seq: int) -> dict[str, Any]:
    return {
        "id": subscription.pk,
        "name": subscription.name,
        "url": subscription.url,
        "event_types": list(subscription.event_types),
        "active": subscription.active,
        "paused_reason": subscription.paused_reason,
        "backlog": max(newest_seq - subscription.cursor, 0),
        "delivered_total": subscription.delivered_total,
        "last_delivered_at": iso(subscription.last_delivered_at),
        "failing_since": iso(subscription.failing_since),
        "last_error": subscription.last_error,
        "dead_letters_waiting": int(getattr(subscription, "waiting", 0) or 0),
        "created_at": iso(subscription.created_at),
    }


def dead_letter_json(letter: EventDeadLetter) -> dict[str, Any]:
    event = letter.event
    return {
        "id": letter.pk,
        "event_id": str(event.event_id),
        "event_type": event.event_type,
        "sequence": event.seq,
        "occurred_at": iso(event.occurred_at),
        "message_id": event.message_id,
        "data": event.data if isinstance(event.data, dict) else {"value": event.data},
        "failed_at": iso(letter.failed_at),
        "attempts": letter.attempts,
        "last_error": letter.last_error,
        "replayed_at": iso(letter.replayed_at),
    }


def subscription_request_parse(data: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(name, url, event types) as the document's SubscriptionRequest says; a 400 naming
    every field at fault otherwise."""
    errors: dict[str, str] = {}
    for key in sorted(set(data) - _FIELDS, key=repr)[:20]:
        safe = key if len(key) <= 64 and text_storable(key) else "(unnamed)"
        errors[safe] = "Unknown field."
    name, url = data.get("name"), data.get("url")
    if not isinstance(name, str):
        errors["name"] = "Required: a string."
    elif not text_storable(name):
        errors["name"] = UNSTORABLE
    elif not 1 <= len(name) <= NAME_MAX or not _NAME.fullmatch(name):
        errors["name"] = f"One line of 1 to {NAME_MAX} characters, not blank."
    if not isinstance(url, str):
        errors["url"] = "Required: a string."
    elif not text_storable(url):
        errors["url"] = UNSTORABLE
    elif len(url) > URL_MAX or not _URL.fullmatch(url):
        errors["url"] = (
            f"An http:// or https:// URL of at most {URL_MAX} characters: a host name or "
            "IPv4 address, an optional port, no spaces."
        )
    elif url_error := url_errors(url):
        errors["url"] = url_error
    types = data.get("event_types", [])
    types_error = event_types_errors(types)
    if types_error:
        errors["event_types"] = types_error
    if errors:
        raise invalid_fields(errors)
    assert isinstance(name, str) and isinstance(url, str) and isinstance(types, list)
    return name, url, types


@api_view("GET", "POST")
def subscriptions(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        api_key = authenticate(request, ApiScope.CAMPAIGNS, ApiScope.READ)
        page_params_check(request)
        newest = _newest_seq()
        return page_answer(
            request,
            _subscriptions(api_key),
            lambda row: subscription_json(row, newest_seq=newest),
        )
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    data = json_body(request)
    name, url, types = subscription_request_parse(data)

    def create() -> tuple[int, dict[str, Any]]:
        subscription, secret = subscription_create(
            name=name, url=url, event_types=types, api_key=api_key
        )
        body = subscription_json(subscription, newest_seq=subscription.cursor)
        return 201, {**body, "secret": secret}

    response = create_answer(
        request, api_key=api_key, operation="createSubscription", data=data, create=create
    )
    if response.status_code in (200, 201):
        created_id = int(json.loads(response.content)["id"])
        response["Location"] = request.build_absolute_uri(
            reverse("api:subscription", args=[created_id])
        )
    return response


@api_view("GET", "DELETE")
def subscription(request: HttpRequest, subscription_id: int) -> HttpResponse:
    if request.method == "GET":
        api_key = authenticate(request, ApiScope.CAMPAIGNS, ApiScope.READ)
        found = _own(api_key, subscription_id)
        return JsonResponse(subscription_json(found, newest_seq=_newest_seq()))
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    found = _own(api_key, subscription_id)
    EventSubscription.objects.filter(pk=found.pk).delete()
    return HttpResponse(status=204)


@api_view("POST")
def subscription_resume_view(request: HttpRequest, subscription_id: int) -> HttpResponse:
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    found = _own(api_key, subscription_id)
    if not found.active:
        subscription_resume(subscription=found)
    resumed = _own(api_key, subscription_id)
    return JsonResponse(subscription_json(resumed, newest_seq=_newest_seq()))


@api_view("GET")
def dead_letters(request: HttpRequest, subscription_id: int) -> HttpResponse:
    api_key = authenticate(request, ApiScope.CAMPAIGNS, ApiScope.READ)
    page_params_check(request)  # a bad cursor or limit is a 400 before the 404
    found = _own(api_key, subscription_id)
    letters = EventDeadLetter.objects.filter(subscription=found).select_related("event")
    return page_answer(request, letters, dead_letter_json)


@api_view("POST")
def dead_letters_replay_view(request: HttpRequest, subscription_id: int) -> HttpResponse:
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    found = _own(api_key, subscription_id)
    replay = dead_letters_replay(subscription=found)
    if replay.error:
        raise ApiProblem(
            502,
            "receiver_failed",
            f"The receiver did not take the {replay.events} dead letter(s): {replay.error}",
        )
    return JsonResponse({"replayed": replay.events})


@api_view("POST")
def subscription_ping_view(request: HttpRequest, subscription_id: int) -> HttpResponse:
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    found = _own(api_key, subscription_id)
    # The receiver's answer is the result, not a failure of this request: 200 either way.
    error = subscription_ping(subscription=found)
    return JsonResponse({"delivered": not error, "error": error or None})


urlpatterns: list[URLPattern] = [
    path("subscriptions", subscriptions, name="subscriptions"),
    path("subscriptions/<int:subscription_id>", subscription, name="subscription"),
    path(
        "subscriptions/<int:subscription_id>/resume",
        subscription_resume_view,
        name="subscription_resume",
    ),
    path(
        "subscriptions/<int:subscription_id>/ping",
        subscription_ping_view,
        name="subscription_ping",
    ),
    path(
        "subscriptions/<int:subscription_id>/dead-letters",
        dead_letters,
        name="subscription_dead_letters",
    ),
    path(
        "subscriptions/<int:subscription_id>/dead-letters/replay",
        dead_letters_replay_view,
        name="subscription_dead_letters_replay",
    ),
]
