"""The API's OpenAPI 3.1 description, written by hand and checked against real responses.

tests/api/test_openapi.py validates the document itself and every response the test suite
provokes against it, so a change to a view that is not mirrored here fails a test.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from delivery.api import openapi_campaigns, openapi_contacts, openapi_events
from delivery.api import validation as v
from delivery.api.openapi_parts import AUTH_ERRORS, LOCATION, ApiPart, error, json_response
from delivery.models import MessageStatus

_STRING_PARAM = {"type": "string", "minLength": 1, "maxLength": v.MAX_PARAM}

_SCHEMAS: dict[str, Any] = {
    "HeaderParam": {
        "type": "object",
        "additionalProperties": False,
        "required": ["value"],
        "properties": {
            "type": {
                "enum": list(v.HEADER_TYPES),
                "description": "Optional; when given it must be the template's header format.",
            },
            "value": {
                **_STRING_PARAM,
                "description": "Text, or for media a link or a media id from Meta's upload.",
            },
        },
    },
    "ButtonParam": {
        "description": (
            "A parameter for the template's button at ``index``: a dynamic URL's suffix, a "
            "quick reply's payload, or an authentication template's one-time code (url)."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["sub_type", "value"],
        "properties": {
            "sub_type": {"enum": list(v.BUTTON_SUB_TYPES)},
            "index": {
                "type": "integer",
                "minimum": 0,
                "maximum": v.MAX_BUTTONS - 1,
                "description": "The button's position; defaults to its position in the list.",
            },
            "value": {**_STRING_PARAM, "description": "Quick-reply payload or URL suffix."},
        },
    },
    "TemplateParams": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "body": {
                "description": (
                    "Positional templates ({{1}}, {{2}}) take a list in order; named "
                    "templates an object of name -> value. The count must match the template."
                ),
                "oneOf": [
                    {"type": "array", "maxItems": v.MAX_BODY_PARAMS, "items": _STRING_PARAM},
                    {
                        "type": "object",
                        "maxProperties": v.MAX_BODY_PARAMS,
                        "additionalProperties": _STRING_PARAM,
                    },
                ],
            },
            "header": {
                "oneOf": [
                    {"$ref": "#/components/schemas/HeaderParam"},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 1,
                        "items": {"$ref": "#/components/schemas/HeaderParam"},
                    },
                ]
            },
            "buttons": {
                "type": "array",
                "maxItems": v.MAX_BUTTONS,
                "items": {"$ref": "#/components/schemas/ButtonParam"},
            },
        },
    },
    "TemplateSend": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "language"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": v.MAX_NAME},
            "language": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.MAX_LANGUAGE,
                "examples": ["en_US", "pt_BR"],
            },
            "params": {"$ref": "#/components/schemas/TemplateParams"},
        },
    },
    "MessageRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["phone_number_id", "to"],
        "properties": {
            "phone_number_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.MAX_PHONE_NUMBER_ID,
                "description": "Meta's id of the business phone number to send from.",
            },
            "to": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.MAX_TO,
                "description": (
                    "Recipient: a phone in international (E.164) form, or the WhatsApp user id"
                    " (business-scoped, as the user's inbound messages name it) of a user who"
                    " shares no phone. Authentication templates need a phone (Meta: 131062)."
                ),
                "examples": ["+5511999990000", "US.13491208655302741918"],
            },
            "template": {"$ref": "#/components/schemas/TemplateSend"},
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.MAX_TEXT,
                "description": (
                    "Free-form text: only within 24 h of the recipient's last message to "
                    "this number (the customer-service window), else 422."
                ),
            },
        },
        "oneOf": [{"required": ["template"]}, {"required": ["text"]}],
    },
    "MessageAccepted": {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "status", "status_url"],
        "properties": {
            "id": {"type": "integer"},
            "status": {"$ref": "#/components/schemas/Status"},
            "status_url": {"type": "string", "format": "uri"},
        },
    },
    "Status": {"enum": [choice.value for choice in MessageStatus]},
    "MessageError": {
        "type": "object",
        "additionalProperties": False,
        "required": ["code", "title", "details"],
        "properties": {
            "code": {
                "type": ["integer", "null"],
                "description": "Meta's error code, e.g. 131026.",
            },
            "title": {"type": "string"},
            "details": {"type": "string"},
        },
    },
    "Message": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "id",
            "status",
            "phone_number_id",
            "to",
            "template",
            "wamid",
            "attempt",
            "error",
            "created_at",
            "sent_at",
            "delivered_at",
            "read_at",
            "failed_at",
            "status_url",
        ],
        "properties": {
            "id": {"type": "integer"},
            "status": {"$ref": "#/components/schemas/Status"},
            "phone_number_id": {"type": "string"},
            "to": {"type": "string"},
            "template": {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "language"],
                        "properties": {
                            "name": {"type": "string"},
                            "language": {"type": "string"},
                        },
                    },
                    {"type": "null"},
                ]
            },
            "wamid": {"type": ["string", "null"], "description": "Meta's message id once sent."},
            "attempt": {"type": "integer", "minimum": 0},
            "error": {
                "oneOf": [{"$ref": "#/components/schemas/MessageError"}, {"type": "null"}],
                "description": "The last error, if any attempt failed.",
            },
            "created_at": {"type": "string", "format": "date-time"},
            "sent_at": {"type": ["string", "null"], "format": "date-time"},
            "delivered_at": {"type": ["string", "null"], "format": "date-time"},
            "read_at": {"type": ["string", "null"], "format": "date-time"},
            "failed_at": {"type": ["string", "null"], "format": "date-time"},
            "status_url": {"type": "string", "format": "uri"},
        },
    },
    "ConversionItem": {
        "description": (
            "One conversion. The person by phone (E.164: +5511987654321) or WhatsApp user id;"
            " both may be given (the phone is looked up first). A schema-valid item may still"
            " be rejected on its own, with the reason in its result: a phone libphonenumber"
            " does not accept, a value that is not a decimal (at most 4 places kept, not"
            " negative, below 10^10), a currency that is not three letters, an occurred_at"
            " that is not ISO 8601 with an offset or is in the future, an empty event."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["event"],
        "anyOf": [{"required": ["phone"]}, {"required": ["user_id"]}],
        "properties": {
            "phone": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.CONVERSION_PHONE_MAX,
                "examples": ["+5511987654321"],
            },
            "user_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.CONVERSION_USER_ID_MAX,
                "examples": ["US.13491208655302741918"],
            },
            "event": {
                "type": "string",
                "minLength": 1,
                "maxLength": v.CONVERSION_EVENT_MAX,
                "examples": ["purchase"],
            },
            "value": {
                "description": 'A decimal: a JSON number or a string ("19.90"); null for none.',
                "oneOf": [
                    {"type": "number"},
                    {"type": "string", "maxLength": v.CONVERSION_VALUE_TEXT_MAX},
                    {"type": "null"},
                ],
                "examples": ["19.90"],
            },
            "currency": {
                "description": "ISO 4217 code (any case, stored upper case); needed with a value.",
                "type": "string",
                "minLength": 3,
                "maxLength": 3,
                "examples": ["BRL"],
            },
            "occurred_at": {
                "description": "ISO 8601 with an offset; now when not given.",
                "type": "string",
                "minLength": 1,
                "maxLength": v.CONVERSION_OCCURRED_AT_MAX,
                "examples": ["2026-05-01T14:30:00-03:00"],
            },
            "id": {
                "description": (
                    "Your id for this conversion (an order number): the same id from the same"
                    " API key is stored once, whatever the request."
                ),
                "oneOf": [
                    {"type": "string", "minLength": 1, "maxLength": v.CONVERSION_ID_MAX},
                    {"type": "integer"},
                ],
            },
        },
    },
    "ConversionsRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["conversions"],
        "properties": {
            "conversions": {
                "type": "array",
                "minItems": 1,
                "maxItems": settings.CONVERSIONS_MAX_BATCH,
                "items": {"$ref": "#/components/schemas/ConversionItem"},
            }
        },
    },
    "ConversionResult": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "index",
            "status",
            "id",
            "contact_matched",
            "campaign_id",
            "message_id",
            "attributed_by",
            "errors",
        ],
        "properties": {
            "index": {"type": "integer", "minimum": 0},
            "status": {
                "enum": ["stored", "duplicate", "rejected"],
                "description": "duplicate: stored before (same id, or same Idempotency-Key "
                "and position); rejected: see errors.",
            },
            "id": {"type": ["integer", "null"], "description": "The stored conversion."},
            "contact_matched": {
                "type": ["boolean", "null"],
                "description": "Whether a contact has that phone or user id (stored only).",
            },
            "campaign_id": {"type": ["integer", "null"]},
            "message_id": {"type": ["integer", "null"]},
            "attributed_by": {"enum": ["delivered", "clicked", "holdout", None]},
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "conversions[i].field -> what is wrong (rejected only).",
            },
        },
    },
    "ConversionsRecorded": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "received",
            "stored",
            "duplicates",
            "rejected",
            "attributed",
            "holdout",
            "unmatched",
            "results",
        ],
        "properties": {
            "received": {"type": "integer", "minimum": 0},
            "stored": {"type": "integer", "minimum": 0},
            "duplicates": {"type": "integer", "minimum": 0},
            "rejected": {"type": "integer", "minimum": 0},
            "attributed": {
                "type": "integer",
                "minimum": 0,
                "description": "Stored and counted for a campaign message (delivered or clicked).",
            },
            "holdout": {
                "type": "integer",
                "minimum": 0,
                "description": "Stored and counted as a campaign holdout's (control) conversion.",
            },
            "unmatched": {
                "type": "integer",
                "minimum": 0,
                "description": "Stored, but no contact has that phone or user id.",
            },
            "results": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/ConversionResult"},
                "description": "One per item, in the request's order.",
            },
        },
    },
    "Error": {
        "type": "object",
        "additionalProperties": False,
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "additionalProperties": False,
                "required": ["code", "message", "fields"],
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "Stable machine-readable reason.",
                        "enum": [
                            "invalid_request",
                            "invalid_json",
                            "unauthenticated",
                            "invalid_api_key",
                            "phone_number_not_allowed",
                            "not_found",
                            "method_not_allowed",
                            "idempotency_key_reused",
                            "payload_too_large",
                            "unsupported_media_type",
                            "unknown_phone_number",
                            "unknown_template",
                            "template_not_approved",
                            "template_params_mismatch",
                            "outside_service_window",
                            "rate_limited",
                            "scope_missing",
                            *openapi_contacts.ERROR_CODES,
                            *openapi_campaigns.ERROR_CODES,
                            *openapi_events.ERROR_CODES,
                        ],
                    },
                    "message": {"type": "string"},
                    "fields": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Field (dotted path, or header name) -> what is wrong.",
                    },
                },
            }
        },
    },
}


_PATHS: dict[str, Any] = {
    "/messages": {
        "post": {
            "operationId": "sendMessage",
            "summary": "Send one transactional message ahead of every campaign.",
            "description": (
                "Queues the message on the transactional queue, served before campaign work "
                "and allowed the phone number's whole rate. Checks run in this order: 401, "
                "429, 403 (scope), 415, 413, 400, then 409, 403 (number), 422."
            ),
            "parameters": [
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": (
                        "Retrying with the same key and body returns the same message (200) "
                        "and sends nothing again; the same key with another body is a 409."
                    ),
                    "schema": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": v.MAX_IDEMPOTENCY_KEY,
                        "pattern": "^[!-~]+$",
                    },
                }
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/MessageRequest"}}
                },
            },
            "responses": {
                "202": json_response("Accepted and queued.", "MessageAccepted", LOCATION),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body created it.",
                    "MessageAccepted",
                    {
                        **LOCATION,
                        "Idempotent-Replayed": {
                            "description": "Always true.",
                            "schema": {"type": "string", "enum": ["true"]},
                        },
                    },
                ),
                "400": error("Malformed JSON, or fields that fail validation (see fields)."),
                **AUTH_ERRORS,
                "403": error(
                    "The key lacks the send scope, or the phone number is not in its scope."
                ),
                "405": error("Only POST."),
                "409": error("The Idempotency-Key was used with another body."),
                "413": error("The body is over the size cap."),
                "415": error("The body is not application/json (UTF-8)."),
                "422": error(
                    "Unknown or unapproved template, params that do not fit it (body count or "
                    "names, header, buttons), unknown number, or text outside the 24 h "
                    "service window."
                ),
            },
        }
    },
    "/messages/{id}": {
        "get": {
            "operationId": "getMessage",
            "summary": "A transactional message's status, wamid, timestamps and last error.",
            "parameters": [
                {
                    "name": "id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 0},
                }
            ],
            "responses": {
                "200": json_response("The message.", "Message"),
                **AUTH_ERRORS,
                "403": error("The key has neither the send nor the read scope."),
                "404": error("No such message, or not on a number in this key's scope."),
                "405": error("Only GET."),
            },
        }
    },
    "/conversions": {
        "post": {
            "operationId": "recordConversions",
            "summary": "Report a batch of conversions; each is attributed to a campaign message.",
            "description": (
                "A key with the campaigns scope may report conversions. Checks run in this "
                "order: 401, 429, 403, 415, 413, 400. A body that "
                "does not match the schema is refused whole (400, every field named as "
                "conversions[i].field). A schema-valid batch is answered 200 with counts and "
                "one result per item, even when no item could be stored: items that cannot "
                "be read are rejected one by one and the others stored. A conversion is "
                "attributed to the contact's campaign message delivered or clicked latest "
                "within the campaign's attribution window before it, else to a holdout row "
                "of a campaign launched within the window, else to nothing. Retries store "
                "nothing twice: give each item an id, or send an Idempotency-Key."
            ),
            "parameters": [
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": (
                        "Items without an id are stored once per key and position: a retry "
                        "with the same key answers them as duplicates. Use a new key for "
                        "each new batch."
                    ),
                    "schema": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": v.MAX_IDEMPOTENCY_KEY,
                        "pattern": "^[!-~]+$",
                    },
                }
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/ConversionsRequest"}
                    }
                },
            },
            "responses": {
                "200": json_response("Counts and each item's outcome.", "ConversionsRecorded"),
                "400": error("Malformed JSON, or a body that does not match the schema."),
                **AUTH_ERRORS,
                "403": error("The key lacks the campaigns scope."),
                "405": error("Only POST."),
                "413": error("The body is over the size cap (CONVERSIONS_MAX_BODY_BYTES)."),
                "415": error("The body is not application/json (UTF-8)."),
            },
        }
    },
    "/openapi.json": {
        "get": {
            "operationId": "getOpenApi",
            "summary": "This description.",
            "security": [],
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1 document.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        }
    },
}

_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "whatsblast API",
        "version": "1.0.0",
        "description": (
            "Send OTP codes, order confirmations and replies through a WhatsApp business "
            "number while campaigns run on it. Errors are JSON: "
            '{"error": {"code", "message", "fields"}}.'
        ),
    },
    "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
    "servers": [{"url": "/api/v1"}],
    "security": [{"bearer": []}],
    "paths": {
        **_PATHS,
        **openapi_contacts.PATHS,
        **openapi_campaigns.PATHS,
        **openapi_events.PATHS,
    },
    "components": {
        "schemas": {
            **_SCHEMAS,
            **openapi_contacts.SCHEMAS,
            **openapi_campaigns.SCHEMAS,
            **openapi_events.SCHEMAS,
        },
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key from `manage.py apikey create` or the admin.",
            }
        },
    },
}


def document(*, server_url: str | None = None, parts: Sequence[ApiPart] = ()) -> dict[str, Any]:
    """The description; ``server_url`` names where this deployment serves it. ``parts``
    are the parts of apps above this one (the journeys'), added by the site that serves
    the whole: their paths, schemas and error codes."""
    result = copy.deepcopy(_DOCUMENT)
    codes = result["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]
    for part in parts:
        result["paths"].update(copy.deepcopy(part.paths))
        result["components"]["schemas"].update(copy.deepcopy(part.schemas))
        codes["enum"] = [*codes["enum"], *part.error_codes]
    if server_url:
        result["servers"] = [{"url": server_url}]
    return result
