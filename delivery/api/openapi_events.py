"""The OpenAPI document's part for event subscriptions.

A key sees and manages only the subscriptions it created: another key's, and those made
in the admin, answer 404 as if they did not exist. Reading takes the ``campaigns`` or the
``read`` scope, every change ``campaigns``.

The patterns below are the whole rule, not a hint: the views check names, URLs and cursors
with these very expressions (``whatsblast/views/api_events.py``), so a value the document
accepts is accepted, and one it refuses is refused.
"""

from __future__ import annotations

from typing import Any

from delivery.api.cursors import MAX_LIMIT
from delivery.api.openapi_parts import (
    AUTH_ERRORS,
    IDEMPOTENCY_KEY,
    REPLAYED,
    error,
    id_parameter,
    json_response,
    page_of,
)
from whatsblast.core.storable import BLANK_CLASS

# delivery.events.types.EVENT_TYPES by name (this layer may not import delivery.events;
# tests/api/test_subscriptions_api.py fails when the two lists differ).
EVENT_TYPE_NAMES = (
    "message.sent",
    "message.delivered",
    "message.read",
    "message.failed",
    "message.clicked",
    "reply.received",
    "contact.opted_out",
    "contact.opted_in",
    "conversion.attributed",
    "campaign.started",
    "campaign.paused",
    "campaign.resumed",
    "campaign.completed",
    "campaign.cancelled",
    "guard.acted",
    "journey.entered",
    "journey.step_fired",
    "journey.exited",
)
# A journey's own event (an emit step's: order.cancel_requested): a dotted name outside
# whatsblast's own families (delivery.events.types.CUSTOM_EVENT_TYPE, the same text).
CUSTOM_EVENT_TYPE = (
    r"^(?!(?:campaign|contact|conversion|guard|journey|message|ping|reply)\.)"
    r"[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"
)

NAME_MAX = 200  # EventSubscription.name
URL_MAX = 2000  # EventSubscription.url
# Characters a name may not hold (control characters); it needs one that is not blank
# (``BLANK_CLASS``) either.
_CONTROL = r"\x00-\x1f\x7f-\x9f"
NAME_PATTERN = rf"^[^{_CONTROL}]*[^{_CONTROL}{BLANK_CLASS}][^{_CONTROL}]*$"
# http(s), a host name or IPv4 address (no user info, no IPv6 literal), an optional port
# (1-65535, no leading zero), then any printable ASCII without spaces.
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
URL_PATTERN = rf"^https?://[A-Za-z0-9][A-Za-z0-9.-]*(?::{_PORT})?(?:[/?#][!-~]*)?$"

# A cursor this API gives out: base64url, unpadded, of "v1:" and the last id (at most 18
# digits, all below 2^63). Three digits encode to four characters: the groups below.
_DIGITS3 = "(?:(?:[MN][DTjz]|O[DT])[AEIMQUYcgk][w-z0-5])"
_DIGITS_REST = "(?:[MN][AQgw]|O[AQ]|(?:[MN][DTjz]|O[DT])[AEIMQUYcgk])"
CURSOR_PATTERN = f"^djE6(?:{_DIGITS3}{{1,6}}|{_DIGITS3}{{0,5}}{_DIGITS_REST})$"

PAGE_PARAMETERS = [
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "next_cursor from the previous page; omit for the first.",
        "schema": {"type": "string", "pattern": CURSOR_PATTERN},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    },
]

_TIME = {"type": "string", "format": "date-time"}
_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}

_SUBSCRIPTION_PROPERTIES: dict[str, Any] = {
    "id": {"type": "integer"},
    "name": {"type": "string"},
    "url": {"type": "string"},
    "event_types": {
        "type": "array",
        "items": {"$ref": "#/components/schemas/EventType"},
        "description": "The types delivered; empty: every type.",
    },
    "active": {
        "type": "boolean",
        "description": "false: paused (by hand, or after failing for EVENTS_PAUSE_AFTER_S).",
    },
    "paused_reason": {"type": "string", "description": "Why it is paused; empty when active."},
    "backlog": {
        "type": "integer",
        "minimum": 0,
        "description": (
            "Events after its position: exact for a subscription to every type, an upper "
            "bound for one to some types."
        ),
    },
    "delivered_total": {"type": "integer", "minimum": 0},
    "last_delivered_at": _TIME_OR_NULL,
    "failing_since": {
        **_TIME_OR_NULL,
        "description": "The first failed delivery of the current run of failures.",
    },
    "last_error": {"type": "string", "description": "The last failed delivery's error."},
    "dead_letters_waiting": {
        "type": "integer",
        "minimum": 0,
        "description": "Dead letters not replayed yet.",
    },
    "created_at": _TIME,
}

SCHEMAS: dict[str, Any] = {
    "EventType": {
        "description": "One of whatsblast's event types, or a dotted name a journey sends "
        "out (its emit step's, e.g. order.cancel_requested).",
        "anyOf": [
            {"enum": list(EVENT_TYPE_NAMES)},
            {"type": "string", "pattern": CUSTOM_EVENT_TYPE, "maxLength": 40},
        ],
    },
    "SubscriptionRequest": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "url"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": NAME_MAX,
                "pattern": NAME_PATTERN,
                "description": "One line, not blank.",
                "examples": ["Order system"],
            },
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": URL_MAX,
                "pattern": URL_PATTERN,
                "description": "Where each batch is POSTed.",
                "examples": ["https://hooks.example.com/whatsblast"],
            },
            "event_types": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/EventType"},
                "description": "Types to deliver (repeats ignored); empty or left out: all.",
            },
        },
    },
    "Subscription": {
        "type": "object",
        "additionalProperties": False,
        "required": list(_SUBSCRIPTION_PROPERTIES),
        "properties": _SUBSCRIPTION_PROPERTIES,
    },
    "SubscriptionCreated": {
        "type": "object",
        "additionalProperties": False,
        "required": [*_SUBSCRIPTION_PROPERTIES, "secret"],
        "properties": {
            **_SUBSCRIPTION_PROPERTIES,
            "secret": {
                "type": "string",
                "description": (
                    "Signs every delivery (Whatsblast-Signature: HMAC-SHA256). Returned only "
                    "here, and to a retry of this same request with its Idempotency-Key: "
                    "store it now."
                ),
            },
        },
    },
    "SubscriptionPage": page_of("Subscription"),
    "EventDeadLetter": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "id",
            "event_id",
            "event_type",
            "sequence",
            "occurred_at",
            "message_id",
            "data",
            "failed_at",
            "attempts",
            "last_error",
            "replayed_at",
        ],
        "properties": {
            "id": {"type": "integer"},
            "event_id": {"type": "string", "format": "uuid", "description": "The event's id."},
            "event_type": {"$ref": "#/components/schemas/EventType"},
            "sequence": {"type": "integer"},
            "occurred_at": _TIME,
            "message_id": {"type": ["integer", "null"]},
            "data": {"type": "object", "description": "As the event was (and is) delivered."},
            "failed_at": _TIME,
            "attempts": {"type": "integer", "minimum": 0},
            "last_error": {"type": "string"},
            "replayed_at": {
                **_TIME_OR_NULL,
                "description": "When a replay was taken by the receiver; null: waiting.",
            },
        },
    },
    "EventDeadLetterPage": page_of("EventDeadLetter"),
    "SubscriptionPinged": {
        "type": "object",
        "additionalProperties": False,
        "required": ["delivered", "error"],
        "properties": {
            "delivered": {
                "type": "boolean",
                "description": "The receiver answered the test event with a 2xx.",
            },
            "error": {
                "type": ["string", "null"],
                "description": (
                    "Why it did not: the status and the start of the body it answered, or "
                    "why it could not be reached (refused, timed out, not a public address)."
                ),
            },
        },
    },
    "DeadLettersReplayed": {
        "type": "object",
        "additionalProperties": False,
        "required": ["replayed"],
        "properties": {
            "replayed": {
                "type": "integer",
                "minimum": 0,
                "description": "Dead letters the receiver took (0: none was waiting).",
            }
        },
    },
}

# Error codes these endpoints answer beyond the shared ones.
ERROR_CODES: list[str] = ["receiver_failed"]

_OWN = (
    "A key sees and manages only the subscriptions it created: another key's, and those "
    "made in the admin, answer 404."
)
_SUBSCRIPTION_ID = id_parameter()
_READ_403 = error("The key has neither the campaigns nor the read scope.")
_WRITE_403 = error("The key lacks the campaigns scope.")
_NOT_FOUND = error("No such subscription, or not one this key created.")
_BAD_PAGE = error("A cursor this API did not give out, or a limit out of range.")

PATHS: dict[str, Any] = {
    "/subscriptions": {
        "get": {
            "operationId": "listSubscriptions",
            "summary": "The event subscriptions this key created, in id order.",
            "description": _OWN,
            "parameters": PAGE_PARAMETERS,
            "responses": {
                "200": json_response("A page of subscriptions.", "SubscriptionPage"),
                "400": _BAD_PAGE,
                **AUTH_ERRORS,
                "403": _READ_403,
                "405": error("Only GET or POST."),
            },
        },
        "post": {
            "operationId": "createSubscription",
            "summary": "Subscribe a URL to events; the answer holds its signing secret, once.",
            "description": (
                "Events that happen from now on are POSTed to the URL in signed batches "
                "(docs/events.md). The secret is in this answer and nowhere else: no GET "
                "returns it. Checks run in this order: 401, 429, 403, 415, 413, 400, 409."
            ),
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/SubscriptionRequest"}
                    }
                },
            },
            "responses": {
                "201": json_response(
                    "Created; the secret is shown this once.",
                    "SubscriptionCreated",
                    {"Location": {"description": "Its URL.", "schema": {"type": "string"}}},
                ),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body created it.",
                    "SubscriptionCreated",
                    REPLAYED,
                ),
                "400": error(
                    "Malformed JSON, or fields that fail validation (see fields), including a "
                    "URL whose host is, or resolves to, a loopback, private, link-local or "
                    "other internal address: events go to public addresses only."
                ),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "405": error("Only GET or POST."),
                "409": error("The Idempotency-Key was used with another body."),
                "413": error("The body is over the size cap."),
                "415": error("The body is not application/json (UTF-8)."),
            },
        },
    },
    "/subscriptions/{id}": {
        "get": {
            "operationId": "getSubscription",
            "summary": "A subscription: its state, backlog and last error (never its secret).",
            "description": _OWN,
            "parameters": [_SUBSCRIPTION_ID],
            "responses": {
                "200": json_response("The subscription.", "Subscription"),
                **AUTH_ERRORS,
                "403": _READ_403,
                "404": _NOT_FOUND,
                "405": error("Only GET or DELETE."),
            },
        },
        "delete": {
            "operationId": "deleteSubscription",
            "summary": "Stop delivering to it and forget it, its dead letters with it.",
            "description": _OWN,
            "parameters": [_SUBSCRIPTION_ID],
            "responses": {
                "204": {"description": "Deleted."},
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only GET or DELETE."),
            },
        },
    },
    "/subscriptions/{id}/resume": {
        "post": {
            "operationId": "resumeSubscription",
            "summary": "Resume a paused subscription: deliveries carry on from where it stopped.",
            "description": (
                "A subscription failing for EVENTS_PAUSE_AFTER_S (an hour) is paused. Resuming "
                "one that is active changes nothing. " + _OWN
            ),
            "parameters": [_SUBSCRIPTION_ID],
            "responses": {
                "200": json_response("The subscription, active.", "Subscription"),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only POST."),
            },
        }
    },
    "/subscriptions/{id}/dead-letters": {
        "get": {
            "operationId": "listSubscriptionDeadLetters",
            "summary": "Events the subscription's receiver did not take in time, in id order.",
            "description": (
                "An event not taken within EVENTS_RETRY_FOR_S (a day) of happening is set "
                "aside so the ones after it flow. " + _OWN
            ),
            "parameters": [_SUBSCRIPTION_ID, *PAGE_PARAMETERS],
            "responses": {
                "200": json_response("A page of dead letters.", "EventDeadLetterPage"),
                "400": _BAD_PAGE,
                **AUTH_ERRORS,
                "403": _READ_403,
                "404": _NOT_FOUND,
                "405": error("Only GET."),
            },
        }
    },
    "/subscriptions/{id}/ping": {
        "post": {
            "operationId": "pingSubscription",
            "summary": "Send the subscription one signed test event now, to check its receiver.",
            "description": (
                'A batch like any other holding one event of type "ping" (sequence 0, a fresh '
                "id, data naming the subscription), sent at once whether the subscription is "
                "active or paused; its cursor, retries and dead letters are untouched. The answer "
                "says whether the receiver took it. " + _OWN
            ),
            "parameters": [_SUBSCRIPTION_ID],
            "responses": {
                "200": json_response(
                    "Sent: whether the receiver took it, and if not, why.", "SubscriptionPinged"
                ),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only POST."),
            },
        }
    },
    "/subscriptions/{id}/dead-letters/replay": {
        "post": {
            "operationId": "replaySubscriptionDeadLetters",
            "summary": "Send the dead letters not replayed yet again, now, in one signed batch.",
            "description": (
                "Up to 1,000 at a time, oldest event first, with their original event ids; "
                "call again for more. Those the receiver takes are marked replayed. " + _OWN
            ),
            "parameters": [_SUBSCRIPTION_ID],
            "responses": {
                "200": json_response("How many the receiver took.", "DeadLettersReplayed"),
                **AUTH_ERRORS,
                "403": _WRITE_403,
                "404": _NOT_FOUND,
                "405": error("Only POST."),
                "502": error(
                    "The receiver did not take them (the message says what it answered); "
                    "they stay waiting for another replay."
                ),
            },
        }
    },
}
