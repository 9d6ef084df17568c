"""The OpenAPI document's part for campaigns: create a draft, read it, pre-flight it, launch,
pause, resume and cancel it, its report and its per-recipient results."""

from __future__ import annotations

from typing import Any

from campaigns.models import CampaignStatus, TemplateStatus
from delivery.api import campaigns as c
from delivery.api.openapi_parts import (
    AUTH_ERRORS,
    IDEMPOTENCY_KEY,
    LOCATION,
    PAGE_PARAMETERS,
    REPLAYED,
    error,
    id_parameter,
    json_response,
    page_of,
)
from delivery.models import MessageStatus

# Error codes these endpoints answer beyond the shared ones.
ERROR_CODES: list[str] = [
    "unknown_list",
    "unknown_segment",
    "param_mapping_mismatch",
    "invalid_campaign",
    "campaign_status_conflict",
    "launch_refused",
]


def _text(max_length: int, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length, **extra}


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


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [schema, {"type": "null"}]}


_INT = {"type": "integer", "minimum": 0}
_NAMES = {
    "type": "array",
    "maxItems": c.MAX_AUDIENCE_NAMES,
    "items": _text(c.MAX_NAME),
}
_STAMP = {"type": "string", "format": "date-time"}
_NULL_STAMP = {"type": ["string", "null"], "format": "date-time"}
_MONEY = {"type": ["string", "null"], "description": "A decimal with four places, e.g. 12.5000."}
_RATE = {"type": ["number", "null"], "minimum": 0, "description": "null when the base is 0."}

_COUNTS = _object({status: _INT for status in MessageStatus.values})
_COUNTS["description"] = "The campaign's messages by status (every status, 0 when none)."

_SOURCE = {
    "description": (
        "Where a parameter's value comes from: a contact field (a column or an uploaded "
        'attribute, with an optional fallback), a constant, or {"click": true} for the '
        "recipient's tracked link (a body parameter or a URL button's suffix)."
    ),
    "oneOf": [
        _object({"field": _text(200), "fallback": {"type": "string"}}, required=["field"]),
        _object({"value": {"type": "string"}}),
        _object({"click": {"const": True}}),
    ],
}
_PART = {
    "body": {"type": "object", "additionalProperties": _SOURCE, "description": "Param -> source."},
    "header": _SOURCE,
    "buttons": {
        "type": "object",
        "additionalProperties": _SOURCE,
        "description": "Button index -> source.",
    },
}

SCHEMAS: dict[str, Any] = {
    "CampaignMapping": {
        "description": (
            "Each template parameter mapped to a source (README: the mapping format). "
            "Every body parameter, the header's and every required button parameter must "
            "be mapped, nothing else may be: a mapping that does not fit the template is "
            "a 422 naming the section."
        ),
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **_PART,
            "cards": {
                "type": "array",
                "items": {"type": "object", "additionalProperties": False, "properties": _PART},
                "description": "A carousel: one per approved card.",
            },
            "offer": _SOURCE,
            "catalog": _SOURCE,
            "sections": {
                "type": "array",
                "items": _object({"title": _SOURCE, "items": _SOURCE}),
            },
        },
        "examples": [{"body": {"1": {"field": "name"}, "2": {"value": "SALE20"}}}],
    },
    "CampaignCreate": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "phone_number_id", "template", "audience"],
        "properties": {
            "name": _text(c.MAX_NAME),
            "phone_number_id": _text(
                c.MAX_PHONE_NUMBER_ID, description="Meta's id of the number to send from."
            ),
            "template": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": _text(c.MAX_TEMPLATE_NAME),
                    "language": _text(
                        c.MAX_LANGUAGE,
                        description="Needed when the name exists in several languages.",
                        examples=["en_US"],
                    ),
                    "languages": {
                        "description": (
                            "Send each recipient the approved version in their language, read "
                            "from the contact field ``field`` (else their number's country); "
                            "recipients with none get ``fallback``, or nothing when it is empty."
                        ),
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "field": _text(c.MAX_LANGUAGE_FIELD, default="language"),
                            "fallback": {"type": "string", "maxLength": c.MAX_LANGUAGE},
                        },
                    },
                },
            },
            "mapping": _ref("CampaignMapping"),
            "audience": {
                "description": (
                    "Contact lists and segments by name (at least one list or segment), "
                    "less the lists and segments left out."
                ),
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "lists": _NAMES,
                    "segments": _NAMES,
                    "exclude_lists": _NAMES,
                    "exclude_segments": _NAMES,
                },
                "anyOf": [
                    {"required": ["lists"], "properties": {"lists": {"minItems": 1}}},
                    {"required": ["segments"], "properties": {"segments": {"minItems": 1}}},
                ],
            },
            "frequency_cap": {
                "type": "string",
                "maxLength": c.MAX_FREQUENCY_CAP,
                "pattern": c.FREQUENCY_CAP_PATTERN,
                "description": (
                    "At most N marketing messages per contact in D days (N/Dd) or H hours "
                    "(N/Hh), or off; empty or absent keeps the site's cap."
                ),
                "examples": ["1/3d", "off"],
            },
            "frequency_cap_defer": {
                "type": "boolean",
                "description": "Send a capped recipient once the cap allows, not skip them.",
            },
            "send_window": {
                "description": "Send only inside this daily window, in each recipient's time.",
                "type": "object",
                "additionalProperties": False,
                "required": ["start", "end"],
                "properties": {
                    "start": {"type": "string", "pattern": c.WINDOW_TIME_PATTERN},
                    "end": {"type": "string", "pattern": c.WINDOW_TIME_PATTERN},
                    "time_zone": _text(
                        c.MAX_ZONE,
                        description="IANA zone for recipients whose number gives none (UTC).",
                    ),
                    "time_zone_attribute": _text(
                        c.MAX_ZONE_ATTRIBUTE,
                        description="Contact attribute whose zone overrides the number's.",
                    ),
                },
            },
            "link": {
                "description": (
                    "Where a tracked link sends people ({{field}} fills in the contact's); "
                    'map a body parameter or URL button to {"click": true}.'
                ),
                "type": "object",
                "additionalProperties": False,
                "required": ["destination"],
                "properties": {
                    "destination": _text(
                        c.MAX_LINK,
                        pattern=c.LINK_PATTERN,
                        examples=["https://shop.example.com/sale?c={{city}}"],
                    ),
                    "utm": {"type": "boolean", "default": True},
                },
            },
            "holdout_percent": {
                "type": "number",
                "minimum": 0,
                "maximum": 50,
                "description": "Share of the audience deliberately not sent, to measure lift.",
            },
            "attribution_days": {
                "type": "integer",
                "minimum": 1,
                "maximum": 90,
                "default": 7,
                "description": "A conversion counts within this many days of the message.",
            },
        },
    },
    "CampaignStatus": {"enum": list(CampaignStatus.values)},
    "CampaignProgress": _object(
        {
            "total": _INT,
            "done": {**_INT, "description": "Settled: sent, failed, skipped, cancelled..."},
            "remaining": {**_INT, "description": "Pending, sending, or being reconciled."},
            "percent": {"type": "number", "minimum": 0, "maximum": 100},
        }
    ),
    "Campaign": _object(
        {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "status": _ref("CampaignStatus"),
            "status_reason": {
                "type": "string",
                "description": "Why it is paused (or cancelled), when it is; else empty.",
            },
            "phone_number_id": {"type": "string"},
            "template": _object(
                {
                    "name": {"type": "string"},
                    "language": {"type": "string"},
                    "category": {"type": "string"},
                    "status": {"enum": list(TemplateStatus.values)},
                }
            ),
            "languages": _nullable(
                _object({"field": {"type": "string"}, "fallback": {"type": "string"}})
            ),
            "mapping": {"type": "object"},
            "audience": _object(
                {part: {"type": "array", "items": {"type": "string"}} for part in c.AUDIENCE_PARTS}
            ),
            "frequency_cap": {"type": "string", "description": "'' keeps the site's cap."},
            "frequency_cap_defer": {"type": "boolean"},
            "send_window": _nullable(
                _object(
                    {
                        "start": {"type": "string"},
                        "end": {"type": "string"},
                        "time_zone": {"type": "string"},
                        "time_zone_attribute": {"type": "string"},
                    }
                )
            ),
            "link": _nullable(
                _object({"destination": {"type": "string"}, "utm": {"type": "boolean"}})
            ),
            "holdout_percent": {"type": "number"},
            "attribution_days": {"type": "integer"},
            "counts": _COUNTS,
            "progress": _ref("CampaignProgress"),
            "created_at": _STAMP,
            "updated_at": _STAMP,
            "scheduled_at": _NULL_STAMP,
            "started_at": _NULL_STAMP,
            "completed_at": _NULL_STAMP,
            "url": {"type": "string", "format": "uri"},
        }
    ),
    "CampaignPage": page_of("Campaign"),
    "CampaignLaunch": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "at": {
                "type": "string",
                "format": "date-time",
                "maxLength": 64,
                "description": (
                    "Launch at this moment (with an offset) instead of now; a moment already "
                    "past launches now."
                ),
            }
        },
    },
    "CampaignLaunched": _object(
        {
            "campaign": _ref("Campaign"),
            "launch": _object(
                {
                    "already_started": {
                        "type": "boolean",
                        "description": "It was running already: nothing changed.",
                    },
                    "recipients": _INT,
                    "pending": _INT,
                    "skipped": _INT,
                    "waiting_for_window": _INT,
                }
            ),
        }
    ),
    "CampaignCancelled": _object(
        {
            "campaign": _ref("Campaign"),
            "cancelled_messages": {
                **_INT,
                "description": "Messages not yet handed to Meta, now cancelled.",
            },
        }
    ),
    "Finding": _object(
        {
            "level": {
                "enum": ["error", "warning", "info"],
                "description": "error: the launch refuses; warning: slows or surprises.",
            },
            "text": {"type": "string"},
        }
    ),
    "Preflight": {
        "description": (
            "What a launch would do: the audience and each subtraction from it, languages, "
            "countries, contacts lacking a mapped field, the messaging limit, the ETA and "
            "the cost estimate, with findings by severity. Nothing is written."
        ),
        **_object(
            {
                "campaign_id": {"type": "integer"},
                "ok": {"type": "boolean", "description": "No finding is an error."},
                "lists": _INT,
                "segments": _INT,
                "memberships": _INT,
                "list_contacts": _INT,
                "contacts": _INT,
                "duplicates": _INT,
                "opted_out": _INT,
                "left_out": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "Suppression and excluded lists and segments: reason -> n.",
                },
                "frequency_cap": {"type": "string"},
                "capped_now": _INT,
                "us_blocked": _INT,
                "user_id_refused": _INT,
                "holdout": _INT,
                "languages": {"type": "object", "additionalProperties": {"type": "integer"}},
                "no_language": _INT,
                "language_fallback": {"type": "string"},
                "languages_left_out": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                },
                "countries": {
                    "type": "array",
                    "items": _object(
                        {
                            "region": {"type": "string"},
                            "name": {"type": "string"},
                            "contacts": _INT,
                            "sent": {"type": "integer"},
                            "skipped": {
                                "type": "object",
                                "additionalProperties": {"type": "integer"},
                            },
                        }
                    ),
                },
                "audience": {
                    "type": "integer",
                    "description": "Messages the launch would make pending.",
                },
                "missing": {
                    "type": "array",
                    "items": _object(
                        {
                            "field": {"type": "string"},
                            "contacts": _INT,
                            "examples": {"type": "array", "items": {"type": "string"}},
                        }
                    ),
                },
                "tier": {"type": "string"},
                "tier_limit": {"type": ["integer", "null"]},
                "reach_used": _INT,
                "audience_reached": _INT,
                "audience_reached_here": _INT,
                "headroom": {"type": ["integer", "null"]},
                "over_headroom": _INT,
                "rate_per_second": {"type": "number"},
                "eta_seconds": {"type": ["number", "null"]},
                "eta": _NULL_STAMP,
                "window": {"type": "string"},
                "cost": _nullable(
                    _object(
                        {
                            "messages": _INT,
                            "category": {"type": "string"},
                            "cost": {"type": "string"},
                            "unpriced": _INT,
                            "currency": {"type": "string"},
                            "text": {"type": "string"},
                        }
                    )
                ),
                "findings": {"type": "array", "items": _ref("Finding")},
            }
        ),
    },
    "CostTotal": _object(
        {
            "charged": _INT,
            "cost": {"type": "string"},
            "unpriced": _INT,
            "currency": {"type": "string"},
            "text": {"type": "string"},
        }
    ),
    "CampaignReport": _object(
        {
            "campaign_id": {"type": "integer"},
            "status": _ref("CampaignStatus"),
            "counts": _COUNTS,
            "figures": {
                "description": (
                    "audience, sent (delivered and read included), delivered (read "
                    "included), read, failed, to_send, skipped, cancelled; replies and "
                    "opt_outs count people."
                ),
                **_object(
                    {
                        key: _INT
                        for key in (
                            "audience",
                            "sent",
                            "delivered",
                            "read",
                            "failed",
                            "to_send",
                            "skipped",
                            "cancelled",
                            "replies",
                            "opt_outs",
                        )
                    }
                ),
            },
            "rates": {
                "description": (
                    "Fractions of the stage before: delivered of sent, read of delivered, "
                    "replied and clicked of delivered, failed of the audience."
                ),
                **_object({name: _RATE for name, _, _ in c.RATES}),
            },
            "failures": {
                "type": "array",
                "items": _object(
                    {
                        "status": {"type": "string"},
                        "code": {"type": ["integer", "null"]},
                        "title": {"type": "string"},
                        "count": _INT,
                    }
                ),
            },
            "skips": {
                "type": "array",
                "items": _object({"reason": {"type": "string"}, "messages": _INT}),
            },
            "by_language": {
                "type": "array",
                "items": _object(
                    {
                        "language": {"type": "string"},
                        **{
                            k: _INT
                            for k in ("audience", "sent", "delivered", "read", "failed", "skipped")
                        },
                    }
                ),
            },
            "cost": _ref("CostTotal"),
            "costs": {
                "type": "array",
                "items": _object(
                    {
                        "category": {"type": "string"},
                        "type": {"type": "string"},
                        "messages": _INT,
                        "charged": _INT,
                        "cost": {"type": "string"},
                        "unpriced": _INT,
                        "currency": {"type": "string"},
                        "text": {"type": "string"},
                    }
                ),
            },
            "clicks": _object(
                {
                    "total": {**_INT, "description": "People's taps."},
                    "unique": {**_INT, "description": "Messages tapped."},
                    "previews": {**_INT, "description": "Link-preview fetches."},
                }
            ),
            "conversions": _object(
                {
                    "attribution_days": {"type": "integer"},
                    "conversions": _INT,
                    "holdout_conversions": _INT,
                    "currency": {"type": "string"},
                    "revenue": _MONEY,
                    "revenue_by_currency": {"type": "object", "additionalProperties": _MONEY},
                    "conversions_by_currency": {
                        "type": "object",
                        "additionalProperties": {"type": "integer"},
                    },
                    "messages_sent": _INT,
                    "revenue_per_message": _MONEY,
                    "cost_known": {"type": "boolean"},
                    "return_on_spend": _MONEY,
                    "lift": _nullable(
                        _object(
                            {
                                "treated": _INT,
                                "treated_converted": _INT,
                                "control": _INT,
                                "control_converted": _INT,
                                "treated_rate": {"type": ["number", "null"]},
                                "control_rate": {"type": ["number", "null"]},
                                "window_days": {"type": "integer"},
                                "complete": {"type": "boolean"},
                            }
                        )
                    ),
                    "notes": {"type": "array", "items": {"type": "string"}},
                }
            ),
            "started_at": _NULL_STAMP,
            "completed_at": _NULL_STAMP,
            "duration_seconds": {"type": ["number", "null"]},
        }
    ),
}

_ID = id_parameter()
_NOT_FOUND = error("No such campaign, or it is on a number outside this key's scope.")
_READ_403 = error("The key has neither the campaigns nor the read scope.")
_WRITE_403 = error("The key lacks the campaigns scope (a read key may only read).")
_CONFLICT = error(
    "The transition does not apply to the campaign's status (campaign_status_conflict; "
    "fields.status names it)."
)


def _reading(operation_id: str, summary: str, schema: str, **extra: Any) -> dict[str, Any]:
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [_ID],
            "responses": {
                "200": json_response("OK.", schema),
                **AUTH_ERRORS,
                "403": _READ_403,
                "404": _NOT_FOUND,
                "405": error("Only GET."),
            },
            **extra,
        }
    }


def _transition(
    operation_id: str,
    summary: str,
    description: str,
    schema: str,
    *,
    refused: str | None = None,
    body: bool = False,
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": json_response("Done (or nothing to do: see the description).", schema),
        **AUTH_ERRORS,
        "403": _WRITE_403,
        "404": _NOT_FOUND,
        "405": error("Only POST."),
        "409": _CONFLICT,
    }
    if body:
        responses["400"] = error("Malformed JSON, or an ``at`` that is not a date-time.")
        responses["413"] = error("The body is over the size cap.")
        responses["415"] = error("A body was sent, not as application/json (UTF-8).")
    if refused:
        responses["422"] = error(refused)
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "description": description,
        "parameters": [_ID],
        "responses": responses,
    }
    if body:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": _ref("CampaignLaunch")}},
        }
    return {"post": operation}


_LAUNCH_REFUSED = (
    "The launch's checks refuse (launch_refused): fields.launch says why, findings.N "
    "each blocking finding of the pre-flight."
)

PATHS: dict[str, Any] = {
    "/campaigns": {
        "get": {
            "operationId": "listCampaigns",
            "summary": "The campaigns on this key's numbers, oldest first, a page at a time.",
            "parameters": [
                *PAGE_PARAMETERS,
                {
                    "name": "status",
                    "in": "query",
                    "required": False,
                    "schema": _ref("CampaignStatus"),
                },
            ],
            "responses": {
                "200": json_response("A page of campaigns.", "CampaignPage"),
                "400": error("A cursor this API did not give, a bad limit or status."),
                **AUTH_ERRORS,
                "403": _READ_403,
                "405": error("Only GET or POST."),
            },
        },
        "post": {
            "operationId": "createCampaign",
            "summary": "Create a draft campaign: a number, a template, a mapping, an audience.",
            "description": (
                "Nothing is sent: pre-flight and launch it. Checks run in this order: 401, "
                "429, 403 (scope), 415, 413, 400 (the body: every field at fault named), "
                "409 (Idempotency-Key), 403 (a number outside the key's scope), then 422: "
                "an unknown number (a key for all numbers), template or language, a "
                "template rejected, disabled or deleted, lists or segments that do not "
                "exist (each named as audience.lists.N ...), a mapping that does not fit "
                "(named mapping.SECTION)."
            ),
            "parameters": [IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref("CampaignCreate")}},
            },
            "responses": {
                "201": json_response("Created, a draft.", "Campaign", LOCATION),
                "200": json_response(
                    "An earlier request with this Idempotency-Key and body created it.",
                    "Campaign",
                    {**LOCATION, **REPLAYED},
                ),
                "400": error("Malformed JSON, or fields that fail validation (see fields)."),
                **AUTH_ERRORS,
                "403": error(
                    "The key lacks the campaigns scope, or the number is not in its scope."
                ),
                "405": error("Only GET or POST."),
                "409": error("The Idempotency-Key was used with another body."),
                "413": error("The body is over the size cap."),
                "415": error("The body is not application/json (UTF-8)."),
                "422": error(
                    "Unknown number, template or language; an unusable template; unknown "
                    "lists or segments; a mapping that does not fit (see fields)."
                ),
            },
        },
    },
    "/campaigns/{id}": _reading(
        "getCampaign",
        "A campaign: its status and why, its messages by status, progress and timestamps.",
        "Campaign",
    ),
    "/campaigns/{id}/preflight": _reading(
        "preflightCampaign",
        "What launching it would do, and what would stop or slow it.",
        "Preflight",
    ),
    "/campaigns/{id}/launch": _transition(
        "launchCampaign",
        "Launch a draft (or a scheduled campaign) now, or schedule it with ``at``.",
        "One message per recipient is created and the senders start. Launching a running "
        "campaign again changes nothing and answers 200 with launch.already_started true "
        "(a retry is harmless); a paused campaign is resumed, not launched, and a completed "
        "or cancelled one cannot launch: 409 naming the status.",
        "CampaignLaunched",
        refused=_LAUNCH_REFUSED,
        body=True,
    ),
    "/campaigns/{id}/pause": _transition(
        "pauseCampaign",
        "Pause a running or scheduled campaign: sends in flight finish.",
        "Pausing a paused campaign changes nothing (200); a draft, completed or cancelled "
        "campaign cannot pause: 409 naming the status.",
        "Campaign",
    ),
    "/campaigns/{id}/resume": _transition(
        "resumeCampaign",
        "Resume a paused campaign where it stopped.",
        "Resuming a running campaign changes nothing (200); a campaign paused before its "
        "scheduled launch is launched now (422 when the launch refuses); a draft, "
        "scheduled, completed or cancelled one cannot resume: 409 naming the status.",
        "Campaign",
        refused=_LAUNCH_REFUSED,
    ),
    "/campaigns/{id}/cancel": _transition(
        "cancelCampaign",
        "Cancel a campaign: every message not yet handed to Meta is cancelled.",
        "A completed or cancelled campaign cannot be cancelled: 409 naming the status.",
        "CampaignCancelled",
    ),
    "/campaigns/{id}/report": _reading(
        "getCampaignReport",
        "The report's figures: outcomes and rates, failures, skips, cost, clicks, "
        "conversions, revenue and return on spend.",
        "CampaignReport",
    ),
    "/campaigns/{id}/results.csv": {
        "get": {
            "operationId": "getCampaignResults",
            "summary": "One CSV row per recipient (the admin's export), streamed.",
            "description": (
                "Columns: message_id, phone, name, status, skip_reason, attempts, error_code, "
                "error_title, sent_at, delivered_at, read_at, failed_at, pricing_category, "
                "billable, pricing_type, cost, currency, wamid, language, sent_through, "
                "replies, opted_out, clicks, conversions, conversion_value. A header row, "
                "then the recipients in message id order."
            ),
            "parameters": [_ID],
            "responses": {
                "200": {
                    "description": "The results, as an attachment.",
                    "content": {"text/csv": {"schema": {"type": "string"}}},
                    "headers": {
                        "Content-Disposition": {
                            "description": 'attachment; filename="campaign-ID-results.csv"',
                            "schema": {"type": "string"},
                        }
                    },
                },
                **AUTH_ERRORS,
                "403": _READ_403,
                "404": _NOT_FOUND,
                "405": error("Only GET."),
            },
        }
    },
}
