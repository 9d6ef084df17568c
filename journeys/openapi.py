"""The OpenAPI document's part for events in and journeys (merged into the document the
API serves by the site: whatsblast.views.api).

Events in (``POST /events``) take the ``campaigns`` scope, as conversions do; reading
journeys takes ``campaigns`` or ``read``, pausing and resuming one ``campaigns``. A key
sees the journeys of its numbers; another number's journey is a 404.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from delivery.api.openapi_events import PAGE_PARAMETERS
from delivery.api.openapi_parts import (
    AUTH_ERRORS,
    IDEMPOTENCY_KEY,
    ApiPart,
    error,
    id_parameter,
    json_response,
    page_of,
)
from journeys import events_in as ev
from journeys.models import JourneyStatus

JOURNEY_STATUS_CONFLICT = "journey_status_conflict"
_READ_403 = error("The key has neither the campaigns nor the read scope.")
_WRITE_403 = error("The key lacks the campaigns scope.")
_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}

_JOURNEY_REQUIRED = [
    "id", "name", "status", "status_reason", "version", "phone_number_id", "entry",
    "live_since", "created_at", "url",
]  # fmt: skip
_JOURNEY_PROPERTIES: dict[str, Any] = {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "status": {"enum": list(JourneyStatus.values)},
    "status_reason": {"type": "string"},
    "version": {"type": "integer", "minimum": 1},
    "phone_number_id": {"type": "string"},
    "entry": {"enum": ["event", "segment", "date", "schedule"]},
    "live_since": _TIME_OR_NULL,
    "created_at": _TIME,
    "url": {"type": "string"},
}

SCHEMAS: dict[str, Any] = {
    "EventIn": {
        "description": (
            "Something a person did, in your systems: a cart updated, an order placed, a "
            "checkout. The person by phone (E.164: +5511987654321) or WhatsApp user id; "
            "both may be given (the phone is looked up first); a person not known yet "
            "becomes a contact. id (yours) makes a retry harmless: an event with an id "
            "stored before is a duplicate. A schema-valid item may still be rejected on "
            "its own, with the reason in its result: a phone libphonenumber does not "
            "accept, a user id that is not one, an occurred_at that is not ISO 8601 with "
            "an offset or is in the future, a name in the whatsapp. family (whatsblast's own)."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "anyOf": [{"required": ["phone"]}, {"required": ["user_id"]}],
        "properties": {
            "id": {
                "oneOf": [
                    {"type": "string", "minLength": 1, "maxLength": ev.MAX_ITEM_ID},
                    {"type": "integer"},
                ],
                "examples": ["cart-7781-v3"],
            },
            "phone": {
                "type": "string",
                "minLength": 1,
                "maxLength": ev.MAX_PHONE,
                "examples": ["+5511987654321"],
            },
            "user_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": ev.MAX_USER_ID,
                "examples": ["US.13491208655302741918"],
            },
            "name": {
                "type": "string",
                "pattern": ev.NAME_PATTERN,
                "examples": ["cart_updated"],
            },
            "properties": {
                "type": "object",
                "maxProperties": ev.MAX_PROPERTIES,
                "description": (
                    "Anything the journeys may use: a key (cart_id), values for a template "
                    f"(a URL suffix, an order id), values to branch on; at most "
                    f"{ev.MAX_PROPERTIES_BYTES} characters as JSON."
                ),
                "examples": [{"cart_id": "7781", "cart_path": "c/7781", "total": 129.9}],
            },
            "occurred_at": {
                "type": "string",
                "minLength": 1,
                "maxLength": ev.MAX_OCCURRED_AT,
                "description": "ISO 8601 with its offset; absent: when received.",
                "examples": ["2026-12-07T18:05:00-03:00"],
            },
        },
    },
    "EventsRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["events"],
        "properties": {
            "events": {
                "type": "array",
                "minItems": 1,
                "maxItems": settings.EVENTS_IN_MAX_BATCH,
                "items": {"$ref": "#/components/schemas/EventIn"},
            }
        },
    },
    "EventInResult": {
        "type": "object",
        "additionalProperties": False,
        "required": ["index", "status", "id", "contact_id", "errors"],
        "properties": {
            "index": {"type": "integer", "minimum": 0},
            "status": {
                "enum": [ev.STORED, ev.DUPLICATE, ev.REJECTED],
                "description": "duplicate: stored before (same id, or same Idempotency-Key "
                "and position); rejected: see errors.",
            },
            "id": {"type": ["integer", "null"], "description": "The stored event."},
            "contact_id": {"type": ["integer", "null"]},
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "By path (events[3].phone): what is wrong.",
            },
        },
    },
    "EventsStored": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "received",
            "stored",
            "duplicates",
            "rejected",
            "contacts_created",
            "results",
        ],  # fmt: skip
        "properties": {
            "received": {"type": "integer", "minimum": 0},
            "stored": {"type": "integer", "minimum": 0},
            "duplicates": {"type": "integer", "minimum": 0},
            "rejected": {"type": "integer", "minimum": 0},
            "contacts_created": {"type": "integer", "minimum": 0},
            "results": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/EventInResult"},
            },
        },
    },
    "Journey": {
        "type": "object",
        "additionalProperties": False,
        "required": _JOURNEY_REQUIRED,
        "properties": _JOURNEY_PROPERTIES,
    },
    "JourneyDetail": {
        "type": "object",
        "additionalProperties": False,
        "required": [*_JOURNEY_REQUIRED, "definition", "figures", "next_runs"],
        "properties": {
            **_JOURNEY_PROPERTIES,
            "definition": {
                "type": "object",
                "description": "The current version's definition (docs/journeys.md).",
            },
            "figures": {"$ref": "#/components/schemas/JourneyFigures"},
            "next_runs": {
                "type": "array",
                "items": _TIME,
                "description": "A live recurring campaign's next runs; [] otherwise.",
            },
        },
    },
    "JourneyFigures": {
        "type": "object",
        "required": [
            "entered",
            "held_out",
            "active",
            "exited",
            "exit_kinds",
            "refused",
            "sent",
            "steps",
            "goal",
        ],  # fmt: skip
        "properties": {
            "entered": {"type": "integer", "minimum": 0},
            "held_out": {"type": "integer", "minimum": 0},
            "active": {"type": "integer", "minimum": 0},
            "exited": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "People who left, by reason.",
            },
            "exit_kinds": {"type": "object", "additionalProperties": {"type": "integer"}},
            "refused": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "Entries refused, by why (paused, once, after_days, no key).",
            },
            "sent": {"type": "integer", "minimum": 0},
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["step", "type", "waiting", "sent", "skipped", "deferred"],
                    "properties": {
                        "step": {"type": "string"},
                        "type": {"type": "string"},
                        "waiting": {"type": "integer", "minimum": 0},
                        "sent": {"type": "integer", "minimum": 0},
                        "skipped": {"type": "integer", "minimum": 0},
                        "deferred": {"type": "integer", "minimum": 0},
                        "messages": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "skip_reasons": {
                            "type": "object",
                            "additionalProperties": {"type": "integer"},
                        },
                    },
                },
            },
            "goal": {
                "type": "object",
                "required": ["event", "converted", "converted_held_out", "lift"],
                "properties": {
                    "event": {"type": ["string", "null"]},
                    "converted": {"type": "integer", "minimum": 0},
                    "converted_held_out": {"type": "integer", "minimum": 0},
                    "lift": {"type": ["object", "null"]},
                },
            },
        },
    },
    "JourneyPage": page_of("Journey"),
}

_ONE = [id_parameter()]
_NOT_FOUND = error("No such journey (or it is on a number outside the key's scope).")

PATHS: dict[str, Any] = {
    "/events": {
        "post": {
            "operationId": "recordEvents",
            "summary": "Events your systems saw people do: they start, reset and end journeys.",
            "description": (
                "Stored in order, then routed to the journeys within about a second: an "
                "entry event starts (or, with the same key, resets) an instance, an exit "
                "event ends it, a wait for the event ends early. Checks run in this order: "
                "401, 429, 403, 415, 413, 400."
            ),
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/EventsRequest"}}
                },
            },
            "responses": {
                "200": json_response("Counts and each item's outcome.", "EventsStored"),
                "400": error("Malformed JSON, or fields of the wrong type or size (see fields)."),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "405": error("Only POST."),
                "413": error("The body is over the size cap."),
                "415": error("The body is not application/json (UTF-8)."),
            },
        }
    },
    "/journeys": {
        "get": {
            "operationId": "listJourneys",
            "summary": "The journeys of the key's numbers, in id order.",
            "parameters": [
                *PAGE_PARAMETERS,
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": {"enum": list(JourneyStatus.values)},
                },
            ],
            "responses": {
                "200": json_response("A page of journeys.", "JourneyPage"),
                "400": error("A cursor this API did not give out, a limit or status out of range."),
                **AUTH_ERRORS,
                "403": _READ_403,
                "405": error("Only GET."),
            },
        }
    },
    "/journeys/{id}": {
        "get": {
            "operationId": "getJourney",
            "summary": "A journey: its definition, where everyone is, what it sent, its lift.",
            "parameters": _ONE,
            "responses": {
                "200": json_response("The journey and its figures.", "JourneyDetail"),
                **AUTH_ERRORS,
                "403": _READ_403,
                "404": _NOT_FOUND,
                "405": error("Only GET."),
            },
        }
    },
    "/journeys/{id}/pause": {
        "post": {
            "operationId": "pauseJourney",
            "summary": "Pause a live journey: nothing fires and nobody enters until resumed.",
            "parameters": _ONE,
            "responses": {
                "200": json_response("The journey, paused.", "Journey"),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only POST."),
                "409": error("The journey is not live (its status is in the message)."),
            },
        }
    },
    "/journeys/{id}/resume": {
        "post": {
            "operationId": "resumeJourney",
            "summary": "Resume a paused journey; steps late past its lateness limit are skipped.",
            "parameters": _ONE,
            "responses": {
                "200": json_response("The journey, live.", "Journey"),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only POST."),
                "409": error("The journey is not paused (its status is in the message)."),
            },
        }
    },
}


PART = ApiPart(PATHS, SCHEMAS, error_codes=(JOURNEY_STATUS_CONFLICT,))
