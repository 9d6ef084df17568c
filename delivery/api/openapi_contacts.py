"""The OpenAPI document's part for contacts, lists, segments and templates.

Every string a body or a query takes is described as the parsers read it
(``delivery.api.contacts``, ``delivery.api.directory``): the same lengths, counted as sent,
no NUL character (PostgreSQL cannot store one), and for a name at least one character
that is not a space. A request the schema accepts is never refused whole; a contact the
batch cannot use is rejected on its own, with the reason.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from campaigns.models import TemplateCategory, TemplateStatus
from delivery.api import contacts as c
from delivery.api import directory as d
from delivery.api.openapi_parts import (
    AUTH_ERRORS,
    IDEMPOTENCY_KEY,
    PAGE_PARAMETERS,
    REPLAYED,
    error,
    id_parameter,
    json_response,
    page_of,
)
from whatsblast.core.storable import BLANK_CLASS

# Error codes these endpoints answer beyond the shared ones.
ERROR_CODES: list[str] = [
    "list_name_taken",
    "segment_name_taken",
    "invalid_segment_rules",
    "segment_unusable",
    "contacts_import_running",
]

# No NUL anywhere; for a name, something not blank (``BLANK_CLASS``: the API strips those).
_STORABLE = "^[^\\u0000]*$"
_NOT_BLANK = rf"^[^\u0000]*[^{BLANK_CLASS}\u0000][^\u0000]*$"


def _text(max_length: int, *, min_length: int = 0, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "maxLength": max_length, "pattern": _STORABLE}
    if min_length:
        schema["minLength"] = min_length
    return {**schema, **extra}


def _name(max_length: int, **extra: Any) -> dict[str, Any]:
    return _text(max_length, min_length=1, pattern=_NOT_BLANK, **extra)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Any], *, required: list[str] | None = None) -> dict[str, Any]:
    """A closed object; every property required unless ``required`` says otherwise."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties) if required is None else required,
        "properties": properties,
    }


_STAMP = {"type": "string", "format": "date-time"}
_NULL_STAMP = {"type": ["string", "null"], "format": "date-time"}
_ID = {"type": "integer", "minimum": 1}
_COUNT = {"type": "integer", "minimum": 0}


def _query(name: str, max_length: int, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": _text(max_length),
    }


def _errors(
    *,
    reads: bool,
    method: str,
    extra: dict[str, Any] | None = None,
    body: str | None = None,
) -> dict[str, Any]:
    """The refusals an operation shares: key, quota, scope, method; a body's 400/413/415."""
    scope = (
        "The key has neither the contacts nor the read scope."
        if reads
        else "The key lacks the contacts scope."
    )
    responses: dict[str, Any] = {**AUTH_ERRORS, "403": error(scope), "405": error(method)}
    if body is not None:
        responses["400"] = error(
            "Malformed JSON, a body that does not match the schema (every field named in "
            "fields), or a malformed Idempotency-Key."
        )
        responses["413"] = error(body)
        responses["415"] = error("The body is not application/json (UTF-8).")
    return {**responses, **(extra or {})}


_PAGE_400 = error("A cursor this API did not give out, a limit out of range, or a filter too long.")
_NOT_FOUND = error("No such contact.")

_SCHEMAS: dict[str, Any] = {
    "ContactInput": {
        "description": (
            "One contact, by phone or by WhatsApp user id (not both). A contact that exists"
            " (the same phone, or the same user id) is updated: a non-blank name replaces"
            " its name, the attributes are merged key by key (null removes one), it is added"
            " to the lists (created when missing; never removed from any), and opted_in:"
            " false opts it out (its pending campaign messages skipped) while opted_in: true"
            " records its consent unless it opted out (lift an opt-out with"
            " POST /contacts/{id}/opt-in). An item the schema accepts may still be rejected"
            " on its own, with the reason: a phone libphonenumber does not accept or without"
            " its + and country code, a user id not of the form US.1349…, the same contact"
            " twice in one batch."
        ),
        "type": "object",
        "additionalProperties": False,
        "oneOf": [{"required": ["phone"]}, {"required": ["user_id"]}],
        "properties": {
            "phone": _text(
                c.MAX_PHONE,
                min_length=1,
                description="International form with its + (E.164): +5511987654321.",
                examples=["+5511987654321"],
            ),
            "user_id": _text(
                c.MAX_USER_ID,
                min_length=1,
                description="The business-scoped user id of a user who shares no phone.",
                examples=["US.13491208655302741918"],
            ),
            "name": _text(c.MAX_NAME, description="Blank keeps the contact's name."),
            "attributes": {
                "type": "object",
                "maxProperties": c.MAX_ATTRIBUTES,
                "propertyNames": {
                    **_text(c.MAX_ATTRIBUTE_NAME, min_length=1),
                    "not": {"enum": list(c.RESERVED_ATTRIBUTES)},
                },
                "additionalProperties": {
                    "type": ["string", "number", "boolean", "null"],
                    "maxLength": c.MAX_ATTRIBUTE_TEXT,
                    "pattern": _STORABLE,
                },
                "description": "Merged into the contact's attributes; null removes one.",
                "examples": [{"city": "Recife", "orders": 3, "vip": True}],
            },
            "lists": {
                "type": "array",
                "maxItems": c.MAX_LISTS,
                "items": _name(c.MAX_LIST_NAME),
                "description": "Lists to add the contact to, by name (created when missing).",
            },
            "opted_in": {"type": "boolean"},
        },
    },
    "ContactsRequest": _object(
        {
            "contacts": {
                "type": "array",
                "minItems": 1,
                "maxItems": c.MAX_CONTACTS,
                "items": _ref("ContactInput"),
            }
        }
    ),
    "ContactsWritten": _object(
        {
            "created": _COUNT,
            "updated": _COUNT,
            "rejected": _COUNT,
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Why each rejected item was, by field: contacts[3].phone.",
            },
        }
    ),
    "Contact": _object(
        {
            "id": _ID,
            "phone": {"type": ["string", "null"]},
            "user_id": {"type": ["string", "null"]},
            "username": {"type": ["string", "null"]},
            "name": {"type": "string"},
            "attributes": {"type": "object"},
            "lists": {"type": "array", "items": {"type": "string"}},
            "opted_in_at": _NULL_STAMP,
            "opted_out": {"type": "boolean"},
            "opted_out_at": _NULL_STAMP,
            "opted_out_reason": {"type": "string"},
            "created_at": _STAMP,
            "updated_at": _STAMP,
        }
    ),
    "ContactPage": page_of("Contact"),
    "ContactErased": _object(
        {
            "contact_id": _ID,
            "placeholder": {
                "type": "string",
                "description": "What the person's messages and replies name them by now.",
            },
            "messages": _COUNT,
            "replies": _COUNT,
            "list_memberships": _COUNT,
            "clicks": _COUNT,
            "conversions": _COUNT,
            "dead_letters": _COUNT,
            "service_windows": _COUNT,
            "webhook_events": _COUNT,
            "events": _COUNT,
            "other_rows": _COUNT,
        }
    ),
    "ListRequest": _object(
        {"name": _name(c.MAX_LIST_NAME), "description": _text(c.MAX_DESCRIPTION)},
        required=["name"],
    ),
    "List": _object(
        {
            "id": _ID,
            "name": {"type": "string"},
            "description": {"type": "string"},
            "suppression": {
                "type": "boolean",
                "description": "Its contacts are left out of every campaign.",
            },
            "members": _COUNT,
            "created_at": _STAMP,
        }
    ),
    "ListPage": page_of("List"),
    "SegmentRequest": _object(
        {
            "name": _name(d.MAX_SEGMENT_NAME),
            "description": _text(c.MAX_DESCRIPTION),
            "rules": {
                "type": "object",
                "description": (
                    'The rules, as delivery/segments/rules.py reads them: {"all": [...]}, '
                    '{"any": [...]}, {"not": rule}, {"field", "op", "value"}, {"list": name}, '
                    '{"campaign": id, "outcome": ...}, {"marketing_within_days": n}.'
                ),
                "examples": [{"all": [{"field": "city", "op": "eq", "value": "Recife"}]}],
            },
        },
        required=["name", "rules"],
    ),
    "Segment": _object(
        {
            "id": _ID,
            "name": {"type": "string"},
            "description": {"type": "string"},
            "rules": {"type": "object"},
            "created_at": _STAMP,
            "updated_at": _STAMP,
        }
    ),
    "SegmentPage": page_of("Segment"),
    "SegmentCount": _object({"id": _ID, "name": {"type": "string"}, "count": _COUNT}),
    "TemplateSlot": _object(
        {
            "path": {
                "type": "array",
                "items": {"type": ["string", "integer"]},
                "description": 'Where the parameter goes: ["body", "1"], ["buttons", "0"].',
            },
            "label": {"type": "string"},
            "required": {"type": "boolean"},
            "kind": {"type": "string"},
            "example": {"type": "string"},
        }
    ),
    "Template": {
        **_object(
            {
                "id": _ID,
                "name": {"type": "string"},
                "language": {"type": "string"},
                "category": {"type": "string", "examples": list(TemplateCategory.values)},
                "status": {
                    "type": "string",
                    "description": "Meta's review status; only APPROVED templates send.",
                    "examples": list(TemplateStatus.values),
                },
                "waba_id": {"type": "string"},
                "parameter_format": {"type": ["string", "null"]},
                "quality_score": {"type": ["string", "null"]},
                "header": {
                    "oneOf": [
                        _object({"format": {"type": "string"}, "text": {"type": "string"}}),
                        {"type": "null"},
                    ]
                },
                "body": {"type": "string"},
                "buttons": {
                    "type": "array",
                    "items": _object(
                        {
                            "index": {"type": ["integer", "null"]},
                            "type": {"type": "string"},
                            "text": {"type": "string"},
                            "param": {
                                "type": "string",
                                "description": "none, optional, required or unsupported.",
                            },
                        }
                    ),
                },
                "has_carousel": {"type": "boolean"},
                "param_slots": {
                    "type": "array",
                    "items": _ref("TemplateSlot"),
                    "description": "Every parameter a send or a campaign gives it, in order.",
                },
                "sendable": {
                    "type": "boolean",
                    "description": "Whether campaigns can send it (its kind is supported).",
                },
                "unusable_reasons": {"type": "array", "items": {"type": "string"}},
                "removed_upstream": {
                    "type": "boolean",
                    "description": "Meta no longer lists it.",
                },
                "updated_at": _STAMP,
                "components": {
                    "type": "array",
                    "description": "Meta's components as last listed (GET /templates/{id}).",
                },
            },
            required=[
                "id",
                "name",
                "language",
                "category",
                "status",
                "waba_id",
                "parameter_format",
                "quality_score",
                "header",
                "body",
                "buttons",
                "has_carousel",
                "param_slots",
                "sendable",
                "unusable_reasons",
                "removed_upstream",
                "updated_at",
            ],
        )
    },
    "TemplatePage": page_of("Template"),
}

_CONTACT_ID = id_parameter()

_PATHS: dict[str, Any] = {
    "/contacts": {
        "get": {
            "operationId": "listContacts",
            "summary": "Contacts, in id order, a page at a time; filters combine.",
            "description": (
                "A filter that names nothing (a list or segment no one has, a phone that is "
                "not a number) selects no contact. Rows inserted between pages are not missed "
                "or repeated: the cursor is the last id seen."
            ),
            "parameters": [
                *PAGE_PARAMETERS,
                _query("phone", c.MAX_PHONE, "The contact with this phone (E.164, +55…)."),
                _query("user_id", c.MAX_USER_ID, "The contact with this WhatsApp user id."),
                _query("list", c.MAX_LIST_NAME, "Members of the list of this name."),
                _query(
                    "segment", d.MAX_SEGMENT_NAME, "Contacts the segment of this name matches now."
                ),
            ],
            "responses": {
                "200": json_response("A page of contacts.", "ContactPage"),
                "400": _PAGE_400,
                **_errors(
                    reads=True,
                    method="GET or POST.",
                    extra={
                        "422": error(
                            "The segment's rules no longer hold (a list they name was deleted)."
                        )
                    },
                ),
            },
        },
        "post": {
            "operationId": "upsertContacts",
            "summary": "Create or update up to 10,000 contacts in one batch.",
            "description": (
                "One statement writes the batch. Checks run in this order: 401, 429, 403, 415,"
                " 413, 400 (the body refused whole, every field named as contacts[i].field),"
                " 409 (the Idempotency-Key reused). A schema-valid batch is answered 201 with"
                " counts and the reason each rejected item was, by index, even when every item"
                " was rejected. The body may be up to API_CONTACTS_MAX_BODY_BYTES (8 MiB)."
            ),
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ContactsRequest")}},
            },
            "responses": {
                "201": json_response("The batch was written.", "ContactsWritten"),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body wrote it.",
                    "ContactsWritten",
                    REPLAYED,
                ),
                **_errors(
                    reads=False,
                    method="GET or POST.",
                    body=(
                        "The body is over API_CONTACTS_MAX_BODY_BYTES "
                        f"({settings.API_CONTACTS_MAX_BODY_BYTES} bytes here)."
                    ),
                    extra={
                        "409": error(
                            "The Idempotency-Key was used with another body "
                            "(idempotency_key_reused), or a contact file is being imported "
                            "(contacts_import_running: nothing was written; send it again "
                            "after the seconds its Retry-After header gives).",
                        )
                    },
                ),
            },
        },
    },
    "/contacts/{id}": {
        "get": {
            "operationId": "getContact",
            "parameters": [_CONTACT_ID],
            "summary": "A contact: its fields, attributes, lists and opt-out state.",
            "responses": {
                "200": json_response("The contact.", "Contact"),
                **_errors(reads=True, method="GET or DELETE.", extra={"404": _NOT_FOUND}),
            },
        },
        "delete": {
            "operationId": "eraseContact",
            "parameters": [_CONTACT_ID],
            "summary": "Erase a contact: its personal data removed, its history anonymised.",
            "description": (
                "The contact, its list memberships and everything that names the person (the "
                "number, the user id, the name, what they wrote) are removed. Their messages "
                "and replies are kept, so every count and report still adds up, under a "
                "placeholder that leads back to nobody. Pending messages to them are skipped."
                " Cannot be undone."
            ),
            "responses": {
                "200": json_response("What the erasure changed.", "ContactErased"),
                **_errors(reads=False, method="GET or DELETE.", extra={"404": _NOT_FOUND}),
            },
        },
    },
    "/contacts/{id}/opt-out": {
        "post": {
            "operationId": "optOutContact",
            "parameters": [_CONTACT_ID],
            "summary": "The contact stops marketing messages; its pending campaign rows skip.",
            "description": "Opting out twice keeps the first time and reason.",
            "responses": {
                "200": json_response("The contact, opted out.", "Contact"),
                **_errors(reads=False, method="Only POST.", extra={"404": _NOT_FOUND}),
            },
        },
    },
    "/contacts/{id}/opt-in": {
        "post": {
            "operationId": "optInContact",
            "parameters": [_CONTACT_ID],
            "summary": "The contact asked for marketing messages again: its opt-out lifted.",
            "responses": {
                "200": json_response("The contact, opted in.", "Contact"),
                **_errors(reads=False, method="Only POST.", extra={"404": _NOT_FOUND}),
            },
        },
    },
    "/lists": {
        "get": {
            "operationId": "listLists",
            "summary": "Contact lists with their member counts, in id order.",
            "parameters": PAGE_PARAMETERS,
            "responses": {
                "200": json_response("A page of lists.", "ListPage"),
                "400": error("A cursor this API did not give out, or a limit out of range."),
                **_errors(reads=True, method="GET or POST."),
            },
        },
        "post": {
            "operationId": "createList",
            "summary": "Create a contact list.",
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("ListRequest")}},
            },
            "responses": {
                "201": json_response("Created.", "List"),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body created it.",
                    "List",
                    REPLAYED,
                ),
                **_errors(
                    reads=False,
                    method="GET or POST.",
                    body="The body is over API_MAX_BODY_BYTES.",
                    extra={
                        "409": error(
                            "A list has this name already, or the Idempotency-Key was used "
                            "with another body."
                        )
                    },
                ),
            },
        },
    },
    "/segments": {
        "get": {
            "operationId": "listSegments",
            "summary": "Saved segments with their rules, in id order.",
            "parameters": PAGE_PARAMETERS,
            "responses": {
                "200": json_response("A page of segments.", "SegmentPage"),
                "400": error("A cursor this API did not give out, or a limit out of range."),
                **_errors(reads=True, method="GET or POST."),
            },
        },
        "post": {
            "operationId": "createSegment",
            "summary": "Save a segment: a name and its rules, checked before anything is saved.",
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("SegmentRequest")}},
            },
            "responses": {
                "201": json_response("Created.", "Segment"),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body created it.",
                    "Segment",
                    REPLAYED,
                ),
                **_errors(
                    reads=False,
                    method="GET or POST.",
                    body="The body is over API_MAX_BODY_BYTES.",
                    extra={
                        "409": error(
                            "A segment has this name already, or the Idempotency-Key was used "
                            "with another body."
                        ),
                        "422": error(
                            "A rule cannot be used: fields names it by its path "
                            "(rules.all[2].op) and says what would be right; a list or "
                            "campaign it names does not exist."
                        ),
                    },
                ),
            },
        },
    },
    "/segments/{id}/count": {
        "get": {
            "operationId": "countSegment",
            "parameters": [id_parameter()],
            "summary": "How many contacts the segment matches now.",
            "responses": {
                "200": json_response("The count.", "SegmentCount"),
                **_errors(
                    reads=True,
                    method="Only GET.",
                    extra={
                        "404": error("No such segment."),
                        "422": error(
                            "The segment's rules no longer hold (a list they name was deleted)."
                        ),
                    },
                ),
            },
        },
    },
    "/templates": {
        "get": {
            "operationId": "listTemplates",
            "summary": "Message templates: status, category, what they show, their parameters.",
            "description": (
                "The templates of the business accounts the key's phone numbers belong to "
                "(every account's for a key on all numbers)."
            ),
            "parameters": [
                *PAGE_PARAMETERS,
                _query("name", d.MAX_TEMPLATE_NAME, "Templates of this name."),
                _query("language", d.MAX_LANGUAGE, "Templates in this language (en_US)."),
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": {"enum": list(TemplateStatus.values)},
                },
            ],
            "responses": {
                "200": json_response("A page of templates.", "TemplatePage"),
                "400": error(
                    "A cursor this API did not give out, a limit out of range, an unknown "
                    "status, or a filter too long."
                ),
                **_errors(reads=True, method="Only GET."),
            },
        },
    },
    "/templates/{id}": {
        "get": {
            "operationId": "getTemplate",
            "parameters": [id_parameter()],
            "summary": "A template, with Meta's components.",
            "responses": {
                "200": json_response("The template.", "Template"),
                **_errors(
                    reads=True,
                    method="Only GET.",
                    extra={"404": error("No such template, or one of another account.")},
                ),
            },
        },
    },
}

PATHS: dict[str, Any] = _PATHS
SCHEMAS: dict[str, Any] = _SCHEMAS
