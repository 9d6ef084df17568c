"""The events whatsblast tells subscribers about, each written by a trigger (migration
delivery 0020) in the transaction of the change it reports."""

from __future__ import annotations

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
}


def event_types_errors(types: object) -> str | None:
    """Why ``types`` is not a list of known event types (empty means all), or ``None``."""
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return "A list of event types (empty for all)."
    unknown = sorted(set(types) - set(EVENT_TYPES))
    if unknown:
        return f"Unknown event type(s): {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}."
    return None
