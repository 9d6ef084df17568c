"""``/api/v1/``: thin views. Authenticate, count the quota, parse, call one service, answer.

Checks run cheapest first and in a fixed order, so a request that breaks several rules
always gets the same answer: 401 key, 429 quota, 415 content type, 413 size, 400 body,
then the service's 409 / 403 / 422.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from delivery.api import openapi
from delivery.api.errors import ApiProblem
from delivery.api.keys import api_key_allows, api_key_authenticate
from delivery.api.quota import quota_take, retry_after_header
from delivery.api.services import transactional_message_create
from delivery.api.validation import (
    conversions_request_parse,
    idempotency_key_parse,
    json_object_parse,
    message_request_parse,
    request_sha256,
)
from delivery.engagement.conversions import conversions_record
from delivery.models import ApiKey, Message, MessageKind

# Larger ids cannot be rows (bigint); answered 404 without asking the database.
MAX_ID = 2**63 - 1

View = Callable[..., HttpResponse]


def api_view(*methods: str) -> Callable[[View], View]:
    """Allowed methods, JSON errors for every refusal, no CSRF (bearer-token API)."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                if request.method not in methods:
                    raise ApiProblem(
                        405,
                        "method_not_allowed",
                        f"Use {' or '.join(methods)}.",
                        headers={"Allow": ", ".join(methods)},
                    )
                return view(request, *args, **kwargs)
            except ApiProblem as problem:
                return problem.response()

        return wrapper

    return decorate


def _authenticate(request: HttpRequest) -> ApiKey:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiProblem(
            401,
            "unauthenticated",
            "Send an API key: Authorization: Bearer <key>.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    api_key = api_key_authenticate(raw_key=token.strip())
    if api_key is None:
        raise ApiProblem(
            401,
            "invalid_api_key",
            "The API key is unknown or revoked.",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    limit = api_key.requests_per_second or settings.API_DEFAULT_REQUESTS_PER_SECOND
    wait_s = quota_take(api_key_id=api_key.pk, limit=limit)
    if wait_s is not None:
        raise ApiProblem(
            429,
            "rate_limited",
            f"This API key is limited to {limit} requests per second.",
            headers={"Retry-After": retry_after_header(wait_s)},
        )
    return api_key


def _json_body(request: HttpRequest, *, limit: int | None = None) -> dict[str, Any]:
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if request.content_type != "application/json" or charset not in ("utf-8", "utf8"):
        raise ApiProblem(
            415, "unsupported_media_type", "Send the body as Content-Type: application/json."
        )
    limit = limit or settings.API_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiProblem(400, "invalid_request", "Malformed Content-Length header.") from None
    too_large = ApiProblem(413, "payload_too_large", f"The body may be at most {limit} bytes.")
    if declared > limit:
        raise too_large
    # Read from the stream with our own cap (the webhook view does the same) rather than
    # through request.body and Django's upload limit.
    body = request.read(limit + 1)
    if len(body) > limit:
        raise too_large
    return json_object_parse(body)


def _status_url(request: HttpRequest, message_id: int) -> str:
    return request.build_absolute_uri(reverse("api:message", args=[message_id]))


@api_view("POST")
def messages(request: HttpRequest) -> HttpResponse:
    api_key = _authenticate(request)
    data = _json_body(request)
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
    """A batch of conversions: 200 with counts and each item's outcome (any active key)."""
    api_key = _authenticate(request)
    data = _json_body(request, limit=settings.CONVERSIONS_MAX_BODY_BYTES)
    idempotency_key = idempotency_key_parse(request.headers.get("Idempotency-Key"))
    items = conversions_request_parse(data, max_items=settings.CONVERSIONS_MAX_BATCH)
    result = conversions_record(api_key_id=api_key.pk, items=items, idempotency_key=idempotency_key)
    return JsonResponse(result.as_dict())


@api_view("GET")
def message(request: HttpRequest, message_id: int) -> HttpResponse:
    api_key = _authenticate(request)
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
        "created_at": _iso(message.created_at),
        "sent_at": _iso(message.sent_at),
        "delivered_at": _iso(message.delivered_at),
        "read_at": _iso(message.read_at),
        "failed_at": _iso(message.failed_at),
        "status_url": status_url,
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


@api_view("GET")
def openapi_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse(openapi.document(server_url=request.build_absolute_uri("/api/v1")))


@api_view("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise ApiProblem(404, "not_found", "No such endpoint.")
