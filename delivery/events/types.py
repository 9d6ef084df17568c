"""The events whatsblast tells subscribers about, each written by a trigger (migrations
delivery 0020, journeys 0002) in the transaction of the change it reports, and the events
journeys send out under names of their own (``order.cancel_requested``)."""

from __future__ import annotations

import re

EVENT_TYPES: dict[str, str] = {
    "message.sent": "Meta accepted a message (a campaign's or a transactional one).",
    "message.delivered": "The message reached the recipient's phone.",
    "message.read": "The recipient read it (when read receipts are on).",
    "message.failed": "The message failed for good; error gives Meta's code and title.",
    "message.clicked": "A person (not a link-preview fetcher) opened its tracked link.",
    "reply.received": "A contact wrote to the number; replied_to_message_id when it answers one.",
    "contact.opted_out": "A contact opted out (STOP, Meta's user_preferences, 131050, by hand).",
    "contact.opted_in": "A contact opted back in.",
    "conversion.attributed": "A conversion was attributed to a campaign message.",
    "campaign.started": "A campaign started sending.",
    "campaign.paused": "A campaign paused (by a person, a template or the quality guard).",
    "campaign.resumed": "A paused campaign resumed.",
    "campaign.completed": "Every message of the campaign settled.",
    "campaign.cancelled": "A campaign was cancelled.",
    "guard.acted": "The quality guard slowed, eased or paused a campaign.",
    "journey.entered": "A contact entered a journey.",
    "journey.step_fired": "A journey's step fired for a contact: sent, skipped (why), "
    "branched, or a wait ended.",
    "journey.exited": "A contact left a journey; exit_kind and detail say why.",
}

# An event a journey's emit step sends out: a dotted lower-case name outside the families
# above, which are whatsblast's own (a journey cannot pretend a message was sent). The
# pattern is the whole rule, the OpenAPI document's too (delivery/api/openapi_events.py).
RESERVED_FAMILIES = tuple(sorted({name.split(".")[0] for name in EVENT_TYPES} | {"ping"}))
CUSTOM_EVENT_TYPE = rf"^(?!(?:{'|'.join(RESERVED_FAMILIES)})\.)[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"
_CUSTOM = re.compile(CUSTOM_EVENT_TYPE)
CUSTOM_EVENT_TYPE_MAX = 40  # EventOutbox.event_type, EventSubscription.event_types


def custom_event_type_error(name: str) -> str | None:
    """Why ``name`` cannot be a journey's own event type, or None."""
    if name.split(".")[0] in RESERVED_FAMILIES:
        return f"{name!r} is in a family whatsblast sends itself"
    if not _CUSTOM.match(name) or len(name) > CUSTOM_EVENT_TYPE_MAX:
        return "a dotted lower-case event type of up to 40 characters, e.g. order.cancel_requested"
    return None


def event_types_errors(types: object) -> str | None:
    """Why ``types`` is not a list of known event types (empty means all), or ``None``."""
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return "A list of event types (empty for all)."
    unknown = sorted(t for t in set(types) - set(EVENT_TYPES) if custom_event_type_error(t))
    if unknown:
        return (
            f"Unknown event type(s): {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}, "
            "and the dotted names journeys send out (e.g. order.cancel_requested)."
        )
    return None
