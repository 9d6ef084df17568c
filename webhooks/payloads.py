"""Typed parsing of Meta's callback bodies: pure functions, no database.

One body is ``entry[] × changes[] × value``; a ``messages`` value carries ``statuses[]``,
``messages[]`` and ``errors[]``, each of which may hold many items. Every item is read.
Items that are not the shape Meta documents are counted as malformed and skipped, so one
bad item never costs the rest of the body; fields not listed here are ignored.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeGuard

OBJECT_WHATSAPP = "whatsapp_business_account"
# Our message id rides in ``biz_opaque_callback_data`` (Message.callback_data).
CALLBACK_RE = re.compile(r"^wb:([1-9][0-9]{0,17})$")
DIGITS_RE = re.compile(r"-?[0-9]{1,18}")
SENDER_RE = re.compile(r"\+?([1-9][0-9]{5,17})")

# Column sizes the parsed values are stored into.
WAMID_MAX = 128
CALLBACK_MAX = 512


class PayloadRejected(ValueError):
    """The body is not a WhatsApp Business Account callback at all."""


@dataclass(frozen=True)
class StatusUpdate:
    wamid: str
    status: str
    timestamp: datetime | None
    recipient_id: str
    callback_data: str
    message_id: int | None  # from callback_data, when it is ours
    phone_number_id: str
    conversation_id: str | None = None
    pricing_category: str | None = None
    billable: bool | None = None
    error_code: int | None = None
    error_title: str = ""
    error_details: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Inbound:
    wamid: str
    from_phone: str  # E.164
    type: str
    text: str
    button_payload: str
    profile_name: str
    timestamp: datetime | None
    phone_number_id: str
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class AsyncErrorItem:
    code: int | None
    title: str
    message: str
    details: str
    phone_number_id: str
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class TemplateStatusChange:
    waba_id: str
    event: str
    template_id: str
    name: str
    language: str
    reason: str
    other_title: str


@dataclass(frozen=True)
class AccountChange:
    """phone_number_quality_update, business_capability_update or account_update."""

    field: str
    waba_id: str
    event: str
    display_phone_number: str = ""
    limit_tier: str = ""  # normalised TIER_* value, "" when absent
    quality_rating: str = ""
    restriction_types: tuple[str, ...] = ()
    ban_state: str = ""


@dataclass
class ParsedBody:
    statuses: list[StatusUpdate] = field(default_factory=list)
    inbound: list[Inbound] = field(default_factory=list)
    errors: list[AsyncErrorItem] = field(default_factory=list)
    templates: list[TemplateStatusChange] = field(default_factory=list)
    accounts: list[AccountChange] = field(default_factory=list)
    # Everything seen, for the event's summary: "statuses.sent", "field.account_alerts", ...
    counts: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


def envelope_check(data: Any) -> str | None:
    """Why ``data`` is not a callback body Meta would send, or ``None`` when it is."""
    if not isinstance(data, dict):
        return f"body is a JSON {type(data).__name__}, not an object"
    if data.get("object") != OBJECT_WHATSAPP:
        return f"object is {str(data.get('object'))[:64]!r}, not {OBJECT_WHATSAPP!r}"
    if not isinstance(data.get("entry"), list):
        return "entry is not a list"
    return None


def body_parse(data: Any) -> ParsedBody:
    """Every status, inbound message, error and account change in one callback body."""
    reason = envelope_check(data)
    if reason is not None:
        raise PayloadRejected(reason)
    parsed = ParsedBody()
    for entry in data["entry"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("changes"), list):
            parsed.counts["malformed.entry"] += 1
            continue
        waba_id = _text(entry.get("id"), 64)
        for change in entry["changes"]:
            if not isinstance(change, dict) or not isinstance(change.get("value"), dict):
                parsed.counts["malformed.change"] += 1
                continue
            _change_parse(parsed, waba_id, _text(change.get("field"), 64), change["value"])
    return parsed


def _change_parse(parsed: ParsedBody, waba_id: str, name: str, value: dict[str, Any]) -> None:
    if name == "messages":
        _messages_value_parse(parsed, value)
    elif name == "message_template_status_update":
        parsed.templates.append(_template_change(waba_id, value))
        parsed.counts["templates"] += 1
    elif name in ("phone_number_quality_update", "business_capability_update", "account_update"):
        parsed.accounts.append(_account_change(name, waba_id, value))
        parsed.counts[f"field.{name}"] += 1
    else:
        # Subscribed fields the sender has no use for (account_alerts, user_preferences, ...)
        # stay in the stored body and are counted.
        parsed.counts[f"ignored.{name or '?'}"] += 1


def _messages_value_parse(parsed: ParsedBody, value: dict[str, Any]) -> None:
    phone_number_id = _text(_dict(value.get("metadata")).get("phone_number_id"), 64)
    profiles = _profiles(value.get("contacts"))
    for item in _items(value, "statuses", parsed):
        status = status_parse(item, phone_number_id=phone_number_id)
        if status is None:
            parsed.counts["malformed.status"] += 1
            continue
        parsed.statuses.append(status)
        parsed.counts[f"statuses.{status.status}"] += 1
    for item in _items(value, "messages", parsed):
        inbound = _inbound_parse(item, phone_number_id, profiles)
        if inbound is None:
            parsed.counts["malformed.message"] += 1
            continue
        parsed.inbound.append(inbound)
        parsed.counts["messages"] += 1
    for item in _items(value, "errors", parsed):
        code, title, message, details = _error_fields(item)
        parsed.errors.append(AsyncErrorItem(code, title, message, details, phone_number_id, item))
        parsed.counts["errors"] += 1


def _items(value: dict[str, Any], key: str, parsed: ParsedBody) -> list[dict[str, Any]]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        parsed.counts[f"malformed.{key}"] += 1
        return []
    good = [item for item in items if isinstance(item, dict)]
    if len(good) != len(items):
        parsed.counts[f"malformed.{key}"] += len(items) - len(good)
    return good


def status_parse(item: dict[str, Any], *, phone_number_id: str) -> StatusUpdate | None:
    """One ``statuses[]`` item; ``None`` when it has no wamid or no status."""
    wamid = item.get("id")
    status = item.get("status")
    if not _is_wamid(wamid) or not isinstance(status, str) or not status:
        return None
    callback = _text(item.get("biz_opaque_callback_data"), CALLBACK_MAX)
    match = CALLBACK_RE.match(callback)
    conversation = _dict(item.get("conversation"))
    pricing = _dict(item.get("pricing"))
    billable = pricing.get("billable")
    code = title = details = None
    if status == "failed":
        errors = item.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            code, title, _, details = _error_fields(errors[0])
    return StatusUpdate(
        wamid=wamid,
        status=_text(status, 32).lower(),
        timestamp=epoch_parse(item.get("timestamp")),
        recipient_id=_text(item.get("recipient_id"), 32),
        callback_data=callback,
        message_id=int(match.group(1)) if match else None,
        phone_number_id=phone_number_id,
        conversation_id=_text(conversation.get("id"), 128) or None,
        pricing_category=_text(pricing.get("category"), 32) or None,
        billable=billable if isinstance(billable, bool) else None,
        error_code=code,
        error_title=title or "",
        error_details=details or "",
        raw=item,
    )


def _inbound_parse(
    item: dict[str, Any], phone_number_id: str, profiles: dict[str, str]
) -> Inbound | None:
    wamid = item.get("id")
    sender = item.get("from")
    if not _is_wamid(wamid):
        return None
    sender_match = SENDER_RE.fullmatch(sender) if isinstance(sender, str) else None
    if sender_match is None:
        return None
    digits = sender_match.group(1)
    kind = _text(item.get("type"), 32) or "unknown"
    text, payload = _inbound_content(kind, item)
    return Inbound(
        wamid=wamid,
        from_phone="+" + digits,
        type=kind,
        text=text,
        button_payload=payload,
        profile_name=profiles.get(digits, ""),
        timestamp=epoch_parse(item.get("timestamp")),
        phone_number_id=phone_number_id,
        raw=item,
    )


def _inbound_content(kind: str, item: dict[str, Any]) -> tuple[str, str]:
    """(text, button payload) of an inbound message, whatever its kind."""
    body = item.get(kind)
    if not isinstance(body, dict):
        return "", ""
    if kind == "text":
        return _text(body.get("body"), 10_000), ""
    if kind == "button":  # a template's quick-reply button
        return _text(body.get("text"), 1_000), _text(body.get("payload"), 512)
    if kind == "interactive":  # a button or list reply to an interactive message
        for key in ("button_reply", "list_reply"):
            reply = body.get(key)
            if isinstance(reply, dict):
                return _text(reply.get("title"), 1_000), _text(reply.get("id"), 512)
        return "", ""
    # Media and others: keep the caption, if any.
    return _text(body.get("caption"), 10_000), ""


def _profiles(contacts: Any) -> dict[str, str]:
    if not isinstance(contacts, list):
        return {}
    names: dict[str, str] = {}
    for contact in contacts:
        if isinstance(contact, dict) and isinstance(contact.get("profile"), dict):
            names[_text(contact.get("wa_id"), 32)] = _text(contact["profile"].get("name"), 200)
    return names


def _error_fields(item: dict[str, Any]) -> tuple[int | None, str, str, str]:
    code = item.get("code")
    details = _dict(item.get("error_data")).get("details")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        _text(item.get("title"), 500),
        _text(item.get("message"), 2_000),
        _text(details, 2_000),
    )


def _template_change(waba_id: str, value: dict[str, Any]) -> TemplateStatusChange:
    other = _dict(value.get("other_info"))
    template_id = value.get("message_template_id")
    return TemplateStatusChange(
        waba_id=waba_id,
        event=_text(value.get("event"), 64).upper(),
        template_id=str(template_id) if isinstance(template_id, int | str) else "",
        name=_text(value.get("message_template_name"), 512),
        language=_text(value.get("message_template_language"), 16),
        reason=_text(value.get("reason"), 200),
        other_title=_text(other.get("title"), 64),
    )


def _account_change(name: str, waba_id: str, value: dict[str, Any]) -> AccountChange:
    # The tier's newest field first: current_limit and the per-phone field go away in 2026.
    tier = ""
    for key in (
        "max_daily_conversations_per_business",
        "current_limit",
        "max_daily_conversation_per_phone",
    ):
        tier = tier_normalise(value.get(key))
        if tier:
            break
    restrictions = value.get("restriction_info")
    if not isinstance(restrictions, list):
        restrictions = []
    return AccountChange(
        field=name,
        waba_id=waba_id,
        event=_text(value.get("event"), 64).upper(),
        display_phone_number=_text(value.get("display_phone_number"), 32),
        limit_tier=tier,
        quality_rating=_text(value.get("quality_rating"), 16).upper(),
        restriction_types=tuple(
            _text(_dict(r).get("restriction_type"), 64).upper() for r in restrictions
        ),
        ban_state=_text(_dict(value.get("ban_info")).get("waba_ban_state"), 32).upper(),
    )


# business_capability_update gives the messaging limit as a number (-1: unlimited).
_TIER_BY_NUMBER = {
    50: "TIER_50",
    250: "TIER_250",
    1000: "TIER_1K",
    2000: "TIER_2K",
    10000: "TIER_10K",
    100000: "TIER_100K",
    -1: "TIER_UNLIMITED",
}


def tier_normalise(value: Any) -> str:
    """A messaging-limit tier as ``TIER_*``; ``""`` when absent, unset or unrecognisable."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, str) and DIGITS_RE.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, int):
        return _TIER_BY_NUMBER.get(value, "")
    if isinstance(value, str):
        tier = value.strip().upper()
        # Tier names are open-ended (TIER_1K went away, TIER_2K came): keep any TIER_ value.
        if re.fullmatch(r"TIER_[A-Z0-9]{1,24}", tier) and tier != "TIER_NOT_SET":
            return tier
    return ""


def epoch_parse(value: Any) -> datetime | None:
    """Meta's epoch seconds (a string in statuses and messages) as an aware UTC datetime."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not (len(value) <= 18 and value.isascii() and value.isdigit()):
            return None
        value = int(value)
    if not isinstance(value, int) or not 0 < value < 32_503_680_000:  # before year 3000
        return None
    return datetime.fromtimestamp(value, tz=UTC)


def _text(value: Any, limit: int) -> str:
    if isinstance(value, str):
        # PostgreSQL text cannot hold NUL.
        return value.replace("\x00", "")[:limit]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)[:limit]
    return ""


def _is_wamid(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= WAMID_MAX and "\x00" not in value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def json_clean(value: Any) -> Any:
    """``value`` without NUL characters, which PostgreSQL's jsonb refuses."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {json_clean(k): json_clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_clean(v) for v in value]
    return value
