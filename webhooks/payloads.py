"""Typed parsing of Meta's callback bodies: pure functions, no database.

One body is ``entry[] × changes[] × value``; a ``messages`` value carries ``statuses[]``,
``messages[]`` and ``errors[]``, each of which may hold many items. Every item is read.
Items that are not the shape Meta documents are counted as malformed and skipped, so one
bad item never costs the rest of the body; fields not listed here are ignored.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeGuard

OBJECT_WHATSAPP = "whatsapp_business_account"
# Our message id rides in ``biz_opaque_callback_data`` (Message.callback_data).
CALLBACK_RE = re.compile(r"^wb:([1-9][0-9]{0,17})$")
DIGITS_RE = re.compile(r"-?[0-9]{1,18}")
# Any number of digits: some senders (short codes, test fixtures) have fewer than E.164's
# seven; such a number matches no contact but its message is kept.
SENDER_RE = re.compile(r"\+?([1-9][0-9]{0,17})")
# A business-scoped user id: "US.13491208655302741918", "US.ENT.5678", "user.<64 hex>".
USER_ID_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}\.[A-Za-z0-9._]{1,120}")
USER_ID_MAX = 140
USERNAME_MAX = 100

# Column sizes the parsed values are stored into.
WAMID_MAX = 128
CALLBACK_MAX = 512


class PayloadRejected(ValueError):
    """The body is not a WhatsApp Business Account callback at all."""


# Not frozen: the applier builds one per status (tens of thousands a second), and a frozen
# dataclass sets each of its 18 fields through object.__setattr__, 2.5x the cost of the
# plain assignments here (4 µs of a status's ~20 µs parse). Nothing changes one once built
# (``dataclasses.replace`` makes a new one).
@dataclass(slots=True)
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
    # Per-message pricing (PMP, July 2025): "regular", "free_customer_service", ...
    pricing_model: str | None = None
    pricing_type: str | None = None
    # The recipient's business-scoped user id, when Meta gives it (2026).
    recipient_user_id: str = ""
    error_code: int | None = None
    error_title: str = ""
    error_details: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Inbound:
    """An inbound message; the sender is a phone (E.164), a business-scoped user id, or both."""

    wamid: str
    from_phone: str  # E.164, "" when the user shares no phone number
    type: str
    text: str
    button_payload: str
    profile_name: str
    timestamp: datetime | None
    phone_number_id: str
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    from_user_id: str = ""
    # system messages: "user_changed_number" / "user_changed_user_id", the user's new number
    # or user id, and the user id it replaces
    system_type: str = ""
    new_phone: str = ""
    new_user_id: str = ""
    previous_user_id: str = ""
    # The sender's parent user id and username (``from_parent_user_id``, contacts[]), 2026.
    from_parent_user_id: str = ""
    username: str = ""
    new_parent_user_id: str = ""  # user_changed_user_id: system.parent_user_id
    # ``context.id``: the wamid of the message this one answers (a quick-reply tap names
    # the template message tapped; a reply quoting a message names that one).
    context_wamid: str = ""


@dataclass(frozen=True)
class UserIdentity:
    """Who Meta says a user is: their phone, user id, parent user id and username.

    Read from a value-level ``contacts[]`` entry (status, message and user_preferences
    callbacks, 2026), completed by the item it stands beside. A status callback names the
    user by their phone (``wa_id``); one that shows no phone is tied to its status instead
    (``wamid``), so the message it answers says who the contact is.
    """

    phone: str  # E.164, "" when the phone is not shown
    user_id: str
    parent_user_id: str = ""
    username: str = ""
    wamid: str = ""  # statuses: the status this entry stands beside, when it shows no phone


@dataclass(frozen=True)
class UserPreference:
    """``user_preferences``: the user tapped stop (or resume) marketing messages."""

    phone: str  # E.164 or ""
    user_id: str
    category: str
    value: str  # stop | resume | signup | ...
    timestamp: datetime | None
    phone_number_id: str
    parent_user_id: str = ""
    username: str = ""  # from the value's contacts[] entry for the same user


@dataclass(frozen=True)
class UserAction:
    """``value.user_actions[]``: a click on a Marketing Messages API send (or another
    action Meta adds; ``action_type`` is an open list)."""

    action_type: str
    click_component: str
    product_id: str
    click_id: str
    tracking_token: str
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
    """One template callback: its status, category, quality or components changed."""

    waba_id: str
    event: str
    template_id: str
    name: str
    language: str
    reason: str
    other_title: str
    kind: str = "status"  # status | category | quality | components
    new_category: str = ""
    previous_category: str = ""
    correct_category: str = ""  # a recategorisation announced, not yet done
    new_quality: str = ""
    previous_quality: str = ""
    body_text: str = ""  # components: message_template_element
    rejection_detail: str = ""


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
    user_actions: list[UserAction] = field(default_factory=list)
    inbound: list[Inbound] = field(default_factory=list)
    errors: list[AsyncErrorItem] = field(default_factory=list)
    preferences: list[UserPreference] = field(default_factory=list)
    templates: list[TemplateStatusChange] = field(default_factory=list)
    accounts: list[AccountChange] = field(default_factory=list)
    # Value-level contacts[] entries naming a phone and a user id, and those of status
    # values tied to their status: the user id of a phone-addressed send is only there.
    identities: list[UserIdentity] = field(default_factory=list)
    # Everything seen, for the event's summary: "statuses.sent", "field.account_alerts", ...
    counts: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


def envelope_check(data: Any) -> str | None:
    """Why ``data`` is not a callback body Meta would send, or ``None`` when it is."""
    if not isinstance(data, dict):
        return f"body is a JSON {type(data).__name__}, not an object"
    # Some of Meta's own account_update examples leave ``object`` out; another object is
    # another product's callback.
    if data.get("object", OBJECT_WHATSAPP) != OBJECT_WHATSAPP:
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


TEMPLATE_FIELDS = {
    "message_template_status_update": "status",
    "template_category_update": "category",
    "message_template_quality_update": "quality",
    "message_template_components_update": "components",
}


def _change_parse(parsed: ParsedBody, waba_id: str, name: str, value: dict[str, Any]) -> None:
    if name == "messages":
        _messages_value_parse(parsed, value)
        # Meta's own examples batch user_preferences into a messages change, too.
        _preferences_parse(parsed, value)
    elif name == "user_preferences":
        _preferences_parse(parsed, value)
    elif name in TEMPLATE_FIELDS:
        kind = TEMPLATE_FIELDS[name]
        # Meta's quality example is labelled message_template_status_update: the value's
        # keys say what it is.
        if "new_quality_score" in value:
            kind = "quality"
        elif "new_category" in value and "event" not in value:
            kind = "category"
        parsed.templates.append(_template_change(waba_id, value, kind))
        parsed.counts[f"templates.{kind}"] += 1
    elif name in ("phone_number_quality_update", "business_capability_update", "account_update"):
        parsed.accounts.append(_account_change(name, waba_id, value))
        parsed.counts[f"field.{name}"] += 1
    else:
        # Subscribed fields the sender has no use for (account_alerts, user_preferences, ...)
        # stay in the stored body and are counted.
        parsed.counts[f"ignored.{name or '?'}"] += 1


def _messages_value_parse(parsed: ParsedBody, value: dict[str, Any]) -> None:
    phone_number_id = _text(_dict(value.get("metadata")).get("phone_number_id"), 64)
    _user_actions_parse(parsed, value, phone_number_id)
    entries = _contact_entries(value.get("contacts"))
    statuses: list[StatusUpdate] = []
    for item in _items(value, "statuses", parsed):
        status = status_parse(item, phone_number_id=phone_number_id)
        if status is None:
            parsed.counts["malformed.status"] += 1
            continue
        statuses.append(status)
        parsed.counts[f"statuses.{status.status}"] += 1
    parsed.statuses.extend(statuses)
    if entries:
        parsed.identities.extend(_value_identities(entries, statuses))
    items = _items(value, "messages", parsed)
    for item in items:
        inbound = _inbound_parse(item, phone_number_id, entries, alone=len(items) == 1)
        if inbound is None:
            parsed.counts["malformed.message"] += 1
            continue
        parsed.inbound.append(inbound)
        parsed.counts["messages"] += 1
    for item in _items(value, "errors", parsed):
        code, title, message, details = _error_fields(item)
        parsed.errors.append(AsyncErrorItem(code, title, message, details, phone_number_id, item))
        parsed.counts["errors"] += 1


def _preferences_parse(parsed: ParsedBody, value: dict[str, Any]) -> None:
    phone_number_id = _text(_dict(value.get("metadata")).get("phone_number_id"), 64)
    items = _items(value, "user_preferences", parsed)
    entries = _contact_entries(value.get("contacts")) if items else []
    if entries:
        parsed.identities.extend(_value_identities(entries, []))
    for item in items:
        phone = _phone(item.get("wa_id"))
        user_id = _user_id(item.get("user_id"))
        choice = _text(item.get("value"), 32).lower()
        if not (phone or user_id) or not choice:
            parsed.counts["malformed.user_preferences"] += 1
            continue
        entry, _ = _entry_for(entries, phone=phone, user_id=user_id, alone=len(items) == 1)
        parsed.preferences.append(
            UserPreference(
                phone=phone,
                user_id=user_id or entry.user_id,
                category=_text(item.get("category"), 64).lower(),
                value=choice,
                timestamp=epoch_parse(item.get("timestamp")),
                phone_number_id=phone_number_id,
                parent_user_id=_user_id(item.get("parent_user_id")) or entry.parent_user_id,
                username=entry.username,
            )
        )
        parsed.counts[f"user_preferences.{choice}"] += 1


def _phone(value: Any) -> str:
    """``"16505551234"`` / ``"+1650…"`` as E.164; ``""`` for anything else (BSUIDs, blanks)."""
    match = SENDER_RE.fullmatch(value.strip()) if isinstance(value, str) else None
    return "+" + match.group(1) if match else ""


def _user_id(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    value = value.strip()
    return value if len(value) <= USER_ID_MAX and USER_ID_RE.fullmatch(value) else ""


def _username(value: Any) -> str:
    """A username without its leading ``@``: Meta's page prints ``@pablomorales``, courier's
    fixtures ``kfisher``; stored one way, a search finds it either way."""
    if not isinstance(value, str):
        return ""
    name = value.strip().lstrip("@").strip()
    return name if len(name) <= USERNAME_MAX and "\x00" not in name else ""


_NO_ENTRY = UserIdentity(phone="", user_id="")


def _contact_entries(contacts: Any) -> list[tuple[UserIdentity, str]]:
    """A value's ``contacts[]``: each entry's identity and profile name.

    ``{profile{name, username?}, wa_id?, user_id?, parent_user_id?}``; a ``wa_id`` that is no
    phone (blank, a user id) counts as none.
    """
    if not isinstance(contacts, list):
        return []
    entries = []
    for contact in contacts:
        if not isinstance(contact, dict):
            continue
        profile = _dict(contact.get("profile"))
        identity = UserIdentity(
            phone=_phone(contact.get("wa_id")),
            user_id=_user_id(contact.get("user_id")),
            parent_user_id=_user_id(contact.get("parent_user_id")),
            username=_username(profile.get("username")),
        )
        entries.append((identity, _text(profile.get("name"), 200)))
    return entries


def _entry_for(
    entries: list[tuple[UserIdentity, str]], *, phone: str, user_id: str, alone: bool
) -> tuple[UserIdentity, str]:
    """The ``contacts[]`` entry (and profile name) naming this sender: by phone, by user id,
    or the value's only entry when the value carries only this item and the entry shows no
    other phone.

    Meta's own example prints the entry's ``user_id`` with a stray leading ``u``
    (``uUS.1349…`` beside ``from_user_id: US.1349…``), so the only entry is taken without
    its user id having to agree; the item's own fields win over the entry's.
    """
    for entry, name in entries:
        if phone and entry.phone == phone:
            return entry, name
    for entry, name in entries:
        if user_id and entry.user_id == user_id:
            return entry, name
    if alone and len(entries) == 1 and entries[0][0].phone in ("", phone):
        return entries[0]
    return _NO_ENTRY, ""


def _value_identities(
    entries: list[tuple[UserIdentity, str]], statuses: list[StatusUpdate]
) -> list[UserIdentity]:
    """The identities a value's ``contacts[]`` gives. For statuses (Meta, 2026: on sent,
    delivered and read) it is the only place the user id of a phone-addressed send is named.

    An entry with a phone names its contact by that phone, whatever the value carries. One
    without is tied to the status whose ``recipient_user_id`` it repeats, or to the value's
    only message; group statuses are never tied (their entry is a participant, not the
    message's recipient). A message's or preference's own entry is read with its item.
    """
    found: list[UserIdentity] = []
    direct = [s for s in statuses if s.raw.get("recipient_type") != "group"]
    only_wamid = direct[0].wamid if len({s.wamid for s in direct}) == 1 else ""
    for entry, _ in entries:
        if not entry.user_id:
            continue
        if entry.phone:
            found.append(entry)
            continue
        if not direct:
            continue
        wamid = next(
            (s.wamid for s in direct if s.recipient_user_id == entry.user_id),
            only_wamid if len(entries) == 1 else "",
        )
        if wamid:
            found.append(replace(entry, wamid=wamid))
    return found


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
    recipient_user_id = _user_id(item.get("recipient_user_id")) or _user_id(
        item.get("recipient_id")
    )
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
        pricing_model=_text(pricing.get("pricing_model"), 16).upper() or None,
        pricing_type=_text(pricing.get("type"), 32).lower() or None,
        recipient_user_id=recipient_user_id,
        error_code=code,
        error_title=title or "",
        error_details=details or "",
        raw=item,
    )


def _inbound_parse(
    item: dict[str, Any],
    phone_number_id: str,
    entries: list[tuple[UserIdentity, str]],
    *,
    alone: bool = True,
) -> Inbound | None:
    """One ``messages[]`` item; ``None`` without a wamid or any sender at all.

    The sender is ``from`` (a phone number, or in some payloads a user id), ``from_user_id``
    (a business-scoped user id, 2026), or both; a blank or missing ``from`` means no phone
    was shared. A message naming neither is still someone's when the value's ``contacts[]``
    entry for it gives the user id; the entry also gives the parent user id and username.
    """
    wamid = item.get("id")
    if not _is_wamid(wamid):
        return None
    sender = item.get("from")
    phone = _phone(sender)
    user_id = _user_id(item.get("from_user_id")) or ("" if phone else _user_id(sender))
    entry, profile_name = _entry_for(entries, phone=phone, user_id=user_id, alone=alone)
    user_id = user_id or entry.user_id
    kind = _text(item.get("type"), 32) or _kind_guess(item)
    system = _dict(item.get("system")) if kind == "system" else {}
    previous = _previous_user_id(system, user_id)
    # A changed user id may name its user only by the id it replaces.
    user_id = user_id or previous
    if not phone and not user_id:
        return None
    text, payload = _inbound_content(kind, item)
    return Inbound(
        wamid=wamid,
        from_phone=phone,
        from_user_id=user_id,
        type=kind,
        text=text,
        button_payload=payload,
        profile_name=profile_name,
        timestamp=epoch_parse(item.get("timestamp")),
        phone_number_id=phone_number_id,
        raw=item,
        system_type=_text(system.get("type"), 64).lower(),
        new_phone=_phone(system.get("wa_id")),
        new_user_id=_user_id(system.get("user_id")),
        previous_user_id=previous,
        from_parent_user_id=_user_id(item.get("from_parent_user_id")) or entry.parent_user_id,
        username=entry.username,
        new_parent_user_id=_user_id(system.get("parent_user_id")),
        context_wamid=_context_wamid(item),
    )


def _context_wamid(item: dict[str, Any]) -> str:
    """The wamid ``context.id`` names, or "" (no context, or not a wamid)."""
    answered = _dict(item.get("context")).get("id")
    return answered if _is_wamid(answered) else ""


# Meta's body of a user_changed_user_id: "User <name> changed from <old id> to <new id>".
_CHANGED_FROM_RE = re.compile(r"changed from (\S+) to (\S+)")


def _previous_user_id(system: dict[str, Any], sender_user_id: str) -> str:
    """The user id a ``user_changed_user_id`` replaces: ``previous_user_id`` when given,
    else the sender's, else the one the body names."""
    if system.get("type") != "user_changed_user_id":
        return ""
    named = _CHANGED_FROM_RE.search(_text(system.get("body"), 1000))
    return (
        _user_id(system.get("previous_user_id"))
        or sender_user_id
        or (_user_id(named.group(1)) if named else "")
    )


_KNOWN_KINDS = ("text", "image", "video", "audio", "document", "sticker", "location", "reaction")


def _kind_guess(item: dict[str, Any]) -> str:
    """A message without ``type`` (seen in the wild) is named by the object it carries."""
    return next((kind for kind in _KNOWN_KINDS if isinstance(item.get(kind), dict)), "unknown")


def _inbound_content(kind: str, item: dict[str, Any]) -> tuple[str, str]:
    """(text, button payload) of an inbound message, whatever its kind."""
    body = item.get(kind)
    if not isinstance(body, dict):
        return "", ""
    if kind in ("text", "system"):
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


def _error_fields(item: dict[str, Any]) -> tuple[int | None, str, str, str]:
    code = item.get("code")
    details = _dict(item.get("error_data")).get("details")
    return (
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        _text(item.get("title"), 500),
        _text(item.get("message"), 2_000),
        _text(details, 2_000),
    )


def _template_change(waba_id: str, value: dict[str, Any], kind: str) -> TemplateStatusChange:
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
        kind=kind,
        new_category=_text(value.get("new_category"), 32).upper(),
        previous_category=_text(value.get("previous_category"), 32).upper(),
        correct_category=_text(value.get("correct_category"), 32).upper(),
        new_quality=_text(value.get("new_quality_score"), 16).upper(),
        previous_quality=_text(value.get("previous_quality_score"), 16).upper(),
        body_text=_text(value.get("message_template_element"), 2_000),
        rejection_detail=_text(_dict(value.get("rejection_info")).get("reason"), 500),
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
    return _utc_second(value)


# Meta stamps statuses in whole seconds, so at hundreds of statuses a second most of a
# batch's timestamps are the same few seconds: a conversion remembered costs ~0.1 µs
# against ~0.6 µs for building the aware datetime (a seventh of parsing a status). The
# datetimes are immutable, so sharing one between statuses is safe.
@lru_cache(maxsize=4096)
def _utc_second(value: int) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


def _text(value: Any, limit: int) -> str:
    if type(value) is str and len(value) <= limit and "\x00" not in value:
        return value  # the common case, and the cheapest test first
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


def _user_actions_parse(parsed: ParsedBody, value: dict[str, Any], phone_number_id: str) -> None:
    """Clicks on Marketing Messages API sends (Meta, "Track click events", 2026-06-30)."""
    for item in _items(value, "user_actions", parsed):
        action_type = _text(item.get("action_type"), 64)
        if not action_type:
            parsed.counts["malformed.user_action"] += 1
            continue
        data = _dict(
            item.get(f"{action_type}_data") or item.get("marketing_messages_link_click_data")
        )
        parsed.user_actions.append(
            UserAction(
                action_type=action_type,
                click_component=_text(data.get("click_component"), 32),
                product_id=_text(data.get("product_id"), 200),
                click_id=_text(data.get("click_id"), 200),
                tracking_token=_text(data.get("tracking_token"), 500),
                timestamp=epoch_parse(item.get("timestamp")),
                phone_number_id=phone_number_id,
                raw=item,
            )
        )
        parsed.counts[f"user_actions.{action_type}"] += 1
