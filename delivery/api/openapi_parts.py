"""Pieces every part of the OpenAPI document uses: error and JSON responses, the auth
refusals, the Idempotency-Key header, cursor pagination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from delivery.api import validation as v
from delivery.api.cursors import MAX_LIMIT


def error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    if headers:
        response["headers"] = headers
    return response


def json_response(
    description: str, schema: str, headers: dict[str, Any] | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if headers:
        response["headers"] = headers
    return response


RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}},
}
AUTH_ERRORS = {
    "401": error("Missing, unknown or revoked API key."),
    "429": error("This key's request quota is used up; retry after Retry-After.", RETRY_AFTER),
}
LOCATION = {
    "Location": {"description": "The status URL.", "schema": {"type": "string"}},
}

IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": (
        "Retrying with the same key and body answers what the first request created (200, "
        "Idempotent-Replayed: true) and creates nothing again; the same key with another "
        "body is a 409."
    ),
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": v.MAX_IDEMPOTENCY_KEY,
        "pattern": "^[!-~]+$",
    },
}
REPLAYED = {
    "Idempotent-Replayed": {
        "description": "Always true.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
PAGE_PARAMETERS = [
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "next_cursor from the previous page; omit for the first.",
        "schema": {"type": "string"},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    },
]


def page_of(schema: str) -> dict[str, Any]:
    """A page of ``schema`` rows and the cursor of the next page (null on the last)."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["data", "next_cursor"],
        "properties": {
            "data": {"type": "array", "items": {"$ref": f"#/components/schemas/{schema}"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    }


def id_parameter(name: str = "id") -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }


@dataclass(frozen=True)
class ApiPart:
    """A part of the document an app above delivery brings (its paths, its schemas, the
    error codes its answers use), merged by the site that serves the whole."""

    paths: dict[str, Any]
    schemas: dict[str, Any]
    error_codes: tuple[str, ...] = ()
