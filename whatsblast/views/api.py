"""``/api/v1/`` transactional messages and conversions: thin views (the checks every view
makes, in their order: ``api_common``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from delivery.api import openapi
from delivery.api.errors import ApiProblem
from delivery.api.keys import api_key_allows
from delivery.api.services import transactional_message_create
from delivery.api.validation import (
    conversions_request_parse,
    idempotency_key_parse,
    message_request_parse,
    request_sha256,
)
from delivery.engagement.conversions import conversions_record
from delivery.models import ApiScope, Message, MessageKind
from journeys import openapi as journeys_openapi
from whatsblast.views.api_common import MAX_ID, api_view, authenticate, iso, json_body


def _status_url(request: HttpRequest, message_id: int) -> str:
    return request.build_absolute_uri(reverse("api:message", args=[message_id]))


@api_view("POST")
def messages(request: HttpRequest) -> HttpResponse:
    api_key = authenticate(request, ApiScope.SEND)
    data = json_body(request)
    idempotency_key = idempotency_key_parse(request.headers.get("Idempotency-Key"))
    parsed = message_request_parse(data)
    created = transactional_message_create(
        api_key=api_key,
        request=parsed,
        idempotency_key=idempotency_key,
        request_sha256=request_sha256(data),
    )
    message = created.message
    response = JsonResponse(
        {
            "id": message.pk,
            "status": message.status,
            "status_url": _status_url(request, message.pk),
        },
        status=200 if created.replayed else 202,
    )
    response["Location"] = _status_url(request, message.pk)
    if created.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


@api_view("POST")
def conversions(request: HttpRequest) -> HttpResponse:
    """A batch of conversions: 200 with counts and each item's outcome (scope campaigns)."""
    api_key = authenticate(request, ApiScope.CAMPAIGNS)
    data = json_body(request, limit=settings.CONVERSIONS_MAX_BODY_BYTES)
    idempotency_key = idempotency_key_parse(request.headers.get("Idempotency-Key"))
    items = conversions_request_parse(data, max_items=settings.CONVERSIONS_MAX_BATCH)
    result = conversions_record(api_key_id=api_key.pk, items=items, idempotency_key=idempotency_key)
    return JsonResponse(result.as_dict())


@api_view("GET")
def message(request: HttpRequest, message_id: int) -> HttpResponse:
    api_key = authenticate(request, ApiScope.SEND, ApiScope.READ)
    found = (
        Message.objects.select_related("phone_number", "template")
        .filter(pk=message_id, kind=MessageKind.TRANSACTIONAL)
        .first()
        if message_id <= MAX_ID
        else None
    )
    if found is None or not api_key_allows(api_key=api_key, phone_number_pk=found.phone_number_id):
        # Out of scope looks exactly like missing: ids of other numbers' messages stay secret.
        raise ApiProblem(404, "not_found", "No such message.")
    return JsonResponse(message_status(found, status_url=_status_url(request, found.pk)))


def message_status(message: Message, *, status_url: str) -> dict[str, Any]:
    template = message.template
    error = None
    if message.last_error_code is not None or message.last_error_title:
        error = {
            "code": message.last_error_code,
            "title": message.last_error_title,
            "details": message.last_error_details,
        }
    return {
        "id": message.pk,
        "status": message.status,
        "phone_number_id": message.phone_number.phone_number_id,
        "to": message.to,
        "template": {"name": template.name, "language": template.language} if template else None,
        "wamid": message.wamid,
        "attempt": message.attempt,
        "error": error,
        "created_at": iso(message.created_at),
        "sent_at": iso(message.sent_at),
        "delivered_at": iso(message.delivered_at),
        "read_at": iso(message.read_at),
        "failed_at": iso(message.failed_at),
        "status_url": status_url,
    }


def api_document(*, server_url: str | None = None) -> dict[str, Any]:
    """The whole API's OpenAPI document: delivery's parts and the journeys'."""
    return openapi.document(server_url=server_url, parts=[journeys_openapi.PART])


@api_view("GET")
def openapi_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse(api_document(server_url=request.build_absolute_uri("/api/v1")))


@api_view("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise ApiProblem(404, "not_found", "No such endpoint.")
