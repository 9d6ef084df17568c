"""What every /api/v1 view does first: methods, the key and its scope, the quota, the body,
pagination, and answering an idempotent create.

Checks run cheapest first and in a fixed order, so a request that breaks several rules
always gets the same answer: 401 key, 429 quota, 403 scope, 415 content type, 413 size,
400 body, then the service's 409 / 403 / 404 / 422.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from delivery.api.cursors import MAX_LIMIT, cursor_decode, limit_parse, page_of
from delivery.api.errors import ApiProblem, invalid_fields
from delivery.api.idempotency import Answer, idempotent_create
from delivery.api.keys import api_key_authenticate, api_key_can
from delivery.api.quota import quota_take, retry_after_header
from delivery.api.validation import idempotency_key_parse, json_object_parse, request_sha256
from delivery.models import ApiKey

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
                for name, value in kwargs.items():
                    if isinstance(value, int) and value > MAX_ID:
                        raise ApiProblem(404, "not_found", f"No such {name.removesuffix('_id')}.")
                return view(request, *args, **kwargs)
            except ApiProblem as problem:
                return problem.response()

        return wrapper

    return decorate


def authenticate(request: HttpRequest, *any_of: str) -> ApiKey:
    """The request's key, within its quota and holding one of the scopes ``any_of``."""
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
    if any_of and not api_key_can(api_key=api_key, any_of=any_of):
        raise ApiProblem(
            403,
            "scope_missing",
            f"This API key lacks the scope for this: one of {', '.join(any_of)}.",
        )
    return api_key


def json_body(request: HttpRequest, *, limit: int | None = None) -> dict[str, Any]:
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


def create_answer(
    request: HttpRequest,
    *,
    api_key: ApiKey,
    operation: str,
    data: dict[str, Any],
    create: Callable[[], tuple[int, dict[str, Any]]],
) -> HttpResponse:
    """Run a create once per Idempotency-Key and answer it (200 with Idempotent-Replayed
    for a retry of an earlier one)."""
    answer: Answer = idempotent_create(
        api_key=api_key,
        operation=operation,
        idempotency_key=idempotency_key_parse(request.headers.get("Idempotency-Key")),
        request_sha256=request_sha256({"operation": operation, "body": data}),
        create=create,
    )
    response = JsonResponse(answer.body, status=200 if answer.replayed else answer.status)
    if answer.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def page_params_check(request: HttpRequest) -> None:
    """``cursor`` and ``limit`` as the document has them: given empty is given wrong (the
    shared pager would read an empty one as left out)."""
    if "limit" in request.GET and not request.GET["limit"]:
        raise invalid_fields({"limit": f"A whole number from 1 to {MAX_LIMIT}."})
    limit_parse(request.GET.get("limit"))
    if "cursor" in request.GET:
        cursor_decode(request.GET["cursor"])


def page_answer(
    request: HttpRequest, queryset: Any, render: Callable[[Any], dict[str, Any]]
) -> HttpResponse:
    """``{"data": [...], "next_cursor": …}`` for ``?cursor=&limit=``."""
    page = page_of(
        queryset,
        cursor=request.GET.get("cursor") or None,
        limit=limit_parse(request.GET.get("limit")),
    )
    rows = [render(row) for row in page.rows]
    return JsonResponse({"data": rows, "next_cursor": page.next_cursor})


def iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None
