"""Meta's error bodies, synchronous (Graph ``{"error": ...}``) and in status webhooks."""

from __future__ import annotations

import json
import secrets
from typing import Any

HREF = "/documentation/business-messaging/whatsapp/support/error-codes"

# code -> (title, details), per Meta's error-code table.
TITLES: dict[int, tuple[str, str]] = {
    1: ("API Unknown", "Invalid request or possible server error."),
    2: ("Service temporarily unavailable", "Service temporarily unavailable"),
    4: ("Application request limit reached", "Too many API calls from this app."),
    100: ("Invalid parameter", "Invalid parameter"),
    130429: (
        "Rate limit hit",
        "Message failed to send because there were too many messages sent from this phone "
        "number in a short period of time",
    ),
    131000: ("Something went wrong", "Message failed to send due to an unknown error."),
    131026: (
        "Message undeliverable",
        "Message Undeliverable.",
    ),
    131047: (
        "Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    ),
    131048: (
        "Spam rate limit hit",
        "Message failed to send because there are restrictions on how many messages can be "
        "sent from this phone number.",
    ),
    131049: (
        "This message was not delivered to maintain healthy ecosystem engagement.",
        "In order to maintain a healthy ecosystem engagement, the message failed to be delivered.",
    ),
    131050: (
        "Unable to deliver the message. This recipient has chosen to stop receiving "
        "marketing messages on WhatsApp from your business.",
        "The user has stopped marketing messages from this business.",
    ),
    131056: (
        "(Business Account, Consumer Account) pair rate limit hit",
        "Message failed to send because there were too many messages sent from this phone "
        "number to the same phone number in a short period of time.",
    ),
    131055: (
        "Method not allowed",
        "The Marketing Messages API sends marketing templates only.",
    ),
    131063: (
        "Marketing messages disabled on Cloud API",
        "This business has turned off marketing templates on Cloud API: send them through "
        "the Marketing Messages API.",
    ),
    131062: (
        "Business-scoped User ID recipients are not supported",
        "Business-scoped User ID recipients are not supported for this message.",
    ),
    132000: (
        "Number of parameters does not match the expected number of params",
        "The number of variable parameter values included in the request did not match "
        "the number of variable parameters defined in the template.",
    ),
    132001: (
        "Template name does not exist in the translation",
        "The template does not exist in the specified language or it has not been approved.",
    ),
    132012: (
        "Parameter format does not match format in the created template",
        "Variable parameter values formatted incorrectly.",
    ),
    132015: ("Template is Paused", "Template is paused due to low quality."),
    132016: ("Template is Disabled", "Template has been paused too many times."),
    133004: ("Server temporarily unavailable", "Server temporarily unavailable."),
}

USER_ID_NOT_SUPPORTED = TITLES[131062][1]

# HTTP status per code (Meta's table); everything else is 400.
_STATUS: dict[int, int] = {0: 401, 190: 401, 10: 403, 368: 403, 131005: 403, 131031: 403}
_STATUS.update({132001: 404, 3: 500, 131000: 500, 131016: 500, 131045: 500, 133000: 500})
_STATUS.update({131057: 500, 2: 503, 133004: 503})


def http_status_for(code: int) -> int:
    if 200 <= code <= 299:
        return 403
    return _STATUS.get(code, 400)


def fbtrace_id() -> str:
    return secrets.token_urlsafe(16)


def graph_error(code: int, details: str | None = None) -> tuple[int, bytes]:
    """(HTTP status, body) of a WhatsApp error in Meta's synchronous shape."""
    title, default_details = TITLES.get(code, ("Error", f"Error {code}"))
    error: dict[str, Any] = {
        "message": f"(#{code}) {title}",
        "type": "OAuthException",
        "code": code,
        "error_data": {"messaging_product": "whatsapp", "details": details or default_details},
        "fbtrace_id": fbtrace_id(),
    }
    if code in (1, 2, 131000, 131016, 133004):
        error["is_transient"] = True
    return http_status_for(code), json.dumps({"error": error}).encode()


def auth_error() -> tuple[int, bytes]:
    """Graph's answer to a missing or wrong token (no ``error_data``)."""
    error = {
        "message": "Invalid OAuth access token - Cannot parse access token",
        "type": "OAuthException",
        "code": 190,
        "fbtrace_id": fbtrace_id(),
    }
    return 401, json.dumps({"error": error}).encode()


def unknown_object_error(object_id: str) -> tuple[int, bytes]:
    """Graph's answer to a path id that does not exist (code 100, subcode 33)."""
    error = {
        "message": (
            f"Unsupported post request. Object with ID '{object_id}' does not exist, cannot be "
            "loaded due to missing permissions, or does not support this operation. Please "
            "read the Graph API documentation at https://developers.facebook.com/docs/graph-api"
        ),
        "type": "GraphMethodException",
        "code": 100,
        "error_subcode": 33,
        "fbtrace_id": fbtrace_id(),
    }
    return 400, json.dumps({"error": error}).encode()


def webhook_error(code: int) -> dict[str, Any]:
    """The error object inside a ``failed`` status (``title == message``)."""
    title, details = TITLES.get(code, ("Error", f"Error {code}"))
    return {
        "code": code,
        "title": title,
        "message": title,
        "error_data": {"details": details},
        "href": HREF,
    }
