"""Callbacks Meta sends on its own, not after a send: template status, category and quality
changes, ``account_update``, and the ``system`` messages of a user who changed their number
or their user id. Each is built in the shape of Meta's reference pages (the real payloads in
tests/fixtures/real/ and their README) and changes what the simulator then does: a paused
template refuses sends with 132015, a recategorised one is billed in its new category.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from delivery.simulator.config import NumberSpec, TemplateSpec, is_user_id

# What Meta writes under other_info when it pauses a template (message_template_status_update).
_PAUSE_INFO = {
    "title": "FIRST_PAUSE",
    "description": "Your WhatsApp message template has been paused for 3 hours until "
    "Wed, 1 Jan 2026 00:00:00 GMT due to low quality.",
}


class EventError(ValueError):
    """An event the simulator cannot build (unknown kind, template or number)."""


@dataclass(frozen=True)
class Event:
    """One callback to post: the WABA it comes from, its ``field`` and its ``value``."""

    waba_id: str
    field: str
    value: dict[str, Any]

    def envelope(self) -> dict[str, Any]:
        change = {"field": self.field, "value": self.value}
        entry = {"id": self.waba_id, "time": int(time.time()), "changes": [change]}
        return {"object": "whatsapp_business_account", "entry": [entry]}


@dataclass
class EventSources:
    """What the events read and change: the simulator's templates and numbers."""

    templates: dict[tuple[str, str], TemplateSpec]
    numbers: dict[str, NumberSpec]
    default_waba_id: str


def event_build(sources: EventSources, kind: str, data: dict[str, Any]) -> Event:
    """The callback of ``kind`` for ``data`` (see each builder), state changed to match."""
    builder = _BUILDERS.get(kind)
    if builder is None:
        raise EventError(f"unknown event {kind!r}; known: {', '.join(sorted(_BUILDERS))}")
    return builder(sources, data)


def _template(sources: EventSources, data: dict[str, Any]) -> TemplateSpec:
    key = (str(data.get("name", "")), str(data.get("language", "en_US")))
    template = sources.templates.get(key)
    if template is None:
        raise EventError(f"no template {key[0]} ({key[1]})")
    return template


def _template_value(template: TemplateSpec) -> dict[str, Any]:
    return {
        "message_template_id": int(template.id) if template.id.isdigit() else template.id,
        "message_template_name": template.name,
        "message_template_language": template.language,
    }


def _template_status(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{name, language, event, reason?}``: PAUSED, DISABLED, APPROVED, REJECTED, …"""
    template = _template(sources, data)
    event = str(data["event"]).upper()
    value = {
        "event": event,
        **_template_value(template),
        "reason": data.get("reason") or "NONE",
        "message_template_category": template.category,
    }
    if event == "PAUSED":
        value["other_info"] = _PAUSE_INFO
    if event in ("APPROVED", "PAUSED", "DISABLED", "REJECTED", "PENDING"):
        template.status = event
    elif event == "REINSTATED":
        template.status = "APPROVED"
    return Event(
        template.waba_id or sources.default_waba_id, "message_template_status_update", value
    )


def _template_category(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{name, language, new_category}``: a completed recategorisation."""
    template = _template(sources, data)
    new = str(data["new_category"]).upper()
    value = {**_template_value(template), "previous_category": template.category}
    value["new_category"] = new
    template.category = new
    return Event(template.waba_id or sources.default_waba_id, "template_category_update", value)


def _template_quality(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{name, language, new_quality_score}``: GREEN, YELLOW, RED, UNKNOWN."""
    template = _template(sources, data)
    new = str(data["new_quality_score"]).upper()
    value = {"previous_quality_score": template.quality_score, "new_quality_score": new}
    value.update(_template_value(template))
    template.quality_score = new
    return Event(
        template.waba_id or sources.default_waba_id, "message_template_quality_update", value
    )


def _number(sources: EventSources, data: dict[str, Any]) -> NumberSpec:
    number = sources.numbers.get(str(data.get("phone_number_id", "")))
    if number is None:
        raise EventError(f"no number {data.get('phone_number_id')!r}")
    return number


def _display(number: NumberSpec) -> str:
    return number.display_phone_number or "".join(c for c in number.phone_number_id if c.isdigit())


def _account_update(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{event, waba_id? | phone_number_id?, ...}``: ACCOUNT_DELETED, ACCOUNT_RESTRICTION
    (with ``restriction_info``), ACCOUNT_VIOLATION (with ``violation_info``), …"""
    value: dict[str, Any] = {}
    waba_id = str(data.get("waba_id") or "")
    if data.get("phone_number_id"):
        number = _number(sources, data)
        value["phone_number"] = _display(number)
        waba_id = waba_id or number.waba_id or ""
    value["event"] = str(data["event"]).upper()
    for key in ("restriction_info", "violation_info", "ban_info", "lock_info"):
        if key in data:
            value[key] = data[key]
    return Event(waba_id or sources.default_waba_id, "account_update", value)


def _system_event(
    sources: EventSources,
    data: dict[str, Any],
    *,
    system_type: str,
    change: tuple[str, str],
    new_field: str,
    sender: dict[str, str],
) -> Event:
    """A ``messages`` change with one ``system`` message (no ``contacts``, as Meta sends it):
    ``change`` is (old, new), ``new_field`` where the system object names the new one."""
    number = _number(sources, data)
    old, new = change
    system = {
        "body": f"User {data.get('name', 'Sim User')} changed from {old} to {new}",
        new_field: new,
        "type": system_type,
    }
    if data.get("phone") and new_field != "wa_id":
        system["wa_id"] = sender["from"] = _digits(data["phone"])
    stamp = str(int(time.time()))
    seed = f"{number.phone_number_id}:{system_type}:{old}:{new}:{stamp}".encode()
    wamid = "wamid.sys." + hashlib.blake2b(seed, digest_size=12).hexdigest()
    message = {**sender, "id": wamid, "timestamp": stamp, "type": "system", "system": system}
    metadata = {"display_phone_number": _display(number), "phone_number_id": number.phone_number_id}
    value = {"messaging_product": "whatsapp", "metadata": metadata, "messages": [message]}
    return Event(number.waba_id or sources.default_waba_id, "messages", value)


def _digits(phone: Any) -> str:
    return "".join(ch for ch in str(phone) if ch.isdigit())


def _user_changed_number(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{phone_number_id, old, new, name?}``: the user wrote in from ``old``, now ``new``."""
    old, new = _digits(data["old"]), _digits(data["new"])
    return _system_event(
        sources,
        data,
        system_type="user_changed_number",
        change=(old, new),
        new_field="wa_id",
        sender={"from": old},
    )


def _user_changed_user_id(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{phone_number_id, old_user_id, new_user_id, phone?, name?}``; the phone only when
    the user shows it."""
    old, new = str(data["old_user_id"]), str(data["new_user_id"])
    return _system_event(
        sources,
        data,
        system_type="user_changed_user_id",
        change=(old, new),
        new_field="user_id",
        sender={"from_user_id": old},
    )


def _button_reply(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{wamid, text, payload?}``: the recipient of the send ``wamid`` tapped its quick
    reply ``text`` (the simulator adds the send's ``to`` and ``phone_number_id``). Shaped as
    Meta's "Button messages webhook reference" (tests/fixtures/real/inbound/
    meta_doc_button_quick_reply.json): ``type: button``, ``button{payload, text}`` (the
    payload is the text when the send set none) and ``context{from, id}`` naming the send."""
    number = _number(sources, data)
    text, to, answered = str(data.get("text") or ""), str(data["to"]), str(data["wamid"])
    if not text:
        raise EventError("a button_reply needs the button's text")
    stamp = str(int(data.get("timestamp") or time.time()))
    seed = f"{answered}:{text}:{time.monotonic_ns()}".encode()
    message: dict[str, Any] = {
        "context": {"from": _display(number), "id": answered},
        "id": "wamid.tap." + hashlib.blake2b(seed, digest_size=12).hexdigest(),
        "timestamp": stamp,
        "type": "button",
        "button": {"payload": str(data.get("payload") or text), "text": text},
    }
    contact: dict[str, Any] = {"profile": {"name": "Sim User"}}
    if is_user_id(to):
        message["from_user_id"] = contact["user_id"] = to
    else:
        message["from"] = contact["wa_id"] = _digits(to)
    metadata = {"display_phone_number": _display(number), "phone_number_id": number.phone_number_id}
    value = {
        "messaging_product": "whatsapp",
        "metadata": metadata,
        "contacts": [contact],
        "messages": [message],
    }
    return Event(number.waba_id or sources.default_waba_id, "messages", value)


def _link_click(sources: EventSources, data: dict[str, Any]) -> Event:
    """``{phone_number_id, click_component?, product_id?, click_id?, tracking_token?,
    wamid?, button?}``: a click on a Marketing Messages API send, as Meta's "Track click
    events" page shows it (``value.user_actions[]``, no ``statuses`` or ``messages``, and no
    wamid or recipient). ``wamid`` (and the URL button's text, ``button``) only tell the
    simulator which send's template analytics count the click; neither is posted."""
    number = _number(sources, data)
    click = {
        "click_component": str(data.get("click_component") or "cta"),
        "click_id": str(data.get("click_id") or hashlib.sha1(repr(data).encode()).hexdigest()[:16]),  # noqa: S324
        "tracking_token": str(data.get("tracking_token") or ""),
    }
    if data.get("product_id"):
        click["product_id"] = str(data["product_id"])
    value = {
        "messaging_product": "whatsapp",
        "metadata": {
            "display_phone_number": _display(number),
            "phone_number_id": number.phone_number_id,
        },
        "user_actions": [
            {
                "action_type": "marketing_messages_link_click",
                "timestamp": str(int(data.get("timestamp") or time.time())),
                "marketing_messages_link_click_data": click,
            }
        ],
    }
    return Event(number.waba_id or sources.default_waba_id, "messages", value)


_BUILDERS: dict[str, Callable[[EventSources, dict[str, Any]], Event]] = {
    "button_reply": _button_reply,
    "link_click": _link_click,
    "template_status": _template_status,
    "template_category": _template_category,
    "template_quality": _template_quality,
    "account_update": _account_update,
    "user_changed_number": _user_changed_number,
    "user_changed_user_id": _user_changed_user_id,
}
