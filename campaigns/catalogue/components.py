"""Meta's template ``components`` → the parameters a send must supply (pure, no I/O).

A template as ``GET /{waba_id}/message_templates`` lists it carries up to one HEADER
(TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION or PRODUCT), one BODY, an optional FOOTER, one
BUTTONS component, and for Meta's marketing formats a CAROUSEL (2 to 10 cards, each a
header, an optional body and buttons) or a LIMITED_TIME_OFFER. What a campaign needs:

* the header: its format and, for a TEXT header, its placeholder (``{{1}}`` or
  ``{{name}}``); a media header takes a link or an uploaded media id, a PRODUCT header
  a product's SKU (and the catalogue id, ``mapping["catalog"]``);
* the body: positional ``{{1}}..{{n}}`` (a count) or named ``{{first_name}}`` (the names),
  with Meta's examples (``example.body_text`` / ``example.body_text_named_params``);
* the buttons, by index, and what each takes at send time (``BUTTON_ROLES``): a quick
  reply's payload, a dynamic URL's suffix, a coupon code, a Flow's token, a catalogue's or
  multi-product message's thumbnail SKU; the others (phone number, voice call, request
  contact info, a card's View button) nothing;
* each card of a carousel, parsed like the template itself;
* a limited-time offer's text and whether it expires (then each send gives its expiry).

Whether this version can send the template at all (a header format or button kind Meta
adds later) is ``campaigns.catalogue.sendable.components_unsupported``; its reasons lead
``problems``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from campaigns.catalogue.params import (
    NAMED_PARAM_RE,
    PARAM_NONE,
    PARAM_OPTIONAL,
    PARAM_REQUIRED,
    PARAM_UNSUPPORTED,
    PLACEHOLDER_RE,
    placeholders,
)
from campaigns.catalogue.sendable import components_unsupported
from campaigns.models import HeaderFormat

CARD_HEADER_FORMATS = frozenset({HeaderFormat.IMAGE, HeaderFormat.VIDEO, HeaderFormat.PRODUCT})

# Button type -> (the send's sub_type, what its parameter is). Kinds not here take nothing
# at send time (PHONE_NUMBER, VOICE_CALL, REQUEST_CONTACT_INFO, SPM, a static URL).
BUTTON_ROLES: dict[str, tuple[str, str]] = {
    "QUICK_REPLY": ("quick_reply", PARAM_OPTIONAL),  # its payload
    "COPY_CODE": ("copy_code", PARAM_REQUIRED),  # the coupon code, at most 15 characters
    "FLOW": ("flow", PARAM_OPTIONAL),  # the flow_token ("unused" when not mapped)
    "CATALOG": ("catalog", PARAM_OPTIONAL),  # the thumbnail's SKU
    "MPM": ("mpm", PARAM_REQUIRED),  # the thumbnail's SKU; the products in mapping["sections"]
}
# One-time-password buttons belong to authentication templates, sent by the API only.
_UNSUPPORTED_BUTTONS = frozenset({"OTP"})


@dataclass(frozen=True)
class ParsedTemplate:
    header_format: str = HeaderFormat.NONE
    header_text: str = ""
    header_param: str = ""
    header_example: str = ""
    body_text: str = ""
    body_param_count: int = 0
    body_param_names: list[str] = field(default_factory=list)
    body_examples: list[str] | dict[str, str] = field(default_factory=list)
    buttons: list[dict[str, Any]] = field(default_factory=list)
    cards: list[dict[str, Any]] = field(default_factory=list)
    offer: dict[str, Any] = field(default_factory=dict)
    # Reasons a campaign cannot use the template as Meta returned it (kept, not raised:
    # the catalogue records every template, usable or not).
    problems: list[str] = field(default_factory=list)


def components_parse(components: Any) -> ParsedTemplate:
    """Parse Meta's ``components`` list; unknown or malformed parts are ignored, not fatal."""
    problems = components_unsupported(components)
    part = _part_parse(components, problems)
    cards: list[dict[str, Any]] = []
    offer: dict[str, Any] = {}
    for component in components if isinstance(components, list) else ():
        if not isinstance(component, dict):
            continue
        kind = str(component.get("type", "")).upper()
        if kind == "CAROUSEL":
            cards = [
                _card_parse(card, problems)
                for card in component.get("cards") or ()
                if isinstance(card, dict)
            ]
            if not 1 <= len(cards) <= 10:
                problems.append(f"a carousel has 1 to 10 cards, this one has {len(cards)}")
        elif kind == "LIMITED_TIME_OFFER":
            lto = _dict(component.get("limited_time_offer"))
            offer = {
                "text": str(lto.get("text") or "")[:200],
                "has_expiration": lto.get("has_expiration") is True,
            }
    return ParsedTemplate(**part, cards=cards, offer=offer, problems=problems)


def _part_parse(components: Any, problems: list[str]) -> dict[str, Any]:
    """The header, body and buttons of a template, or of one carousel card."""
    header: dict[str, Any] = {}
    body: dict[str, Any] = {}
    buttons: list[dict[str, Any]] = []
    for component in components if isinstance(components, list) else ():
        if not isinstance(component, dict):
            continue
        kind = str(component.get("type", "")).upper()
        if kind == "HEADER":
            header = component
        elif kind == "BODY":
            body = component
        elif kind == "BUTTONS":
            buttons = [b for b in component.get("buttons") or () if isinstance(b, dict)]
    return {
        **_header_parse(header, problems),
        **_body_parse(body, problems),
        "buttons": [_button_parse(index, button) for index, button in enumerate(buttons)],
    }


def _card_parse(card: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """One carousel card: the fields of ``ParsedTemplate`` that a card has."""
    part = _part_parse(card.get("components"), problems)
    if part.get("header_format", HeaderFormat.NONE) not in CARD_HEADER_FORMATS:
        problems.append("each carousel card has an image, video or product header")
    return {
        "header_format": part.get("header_format", HeaderFormat.NONE),
        "header_example": part.get("header_example", ""),
        "body_text": part.get("body_text", ""),
        "body_param_count": part.get("body_param_count", 0),
        "body_param_names": part.get("body_param_names", []),
        "body_examples": part.get("body_examples", []),
        "buttons": part["buttons"],
    }


def _header_parse(header: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    if not header:
        return {}
    fmt = str(header.get("format") or "TEXT").upper()
    if fmt not in HeaderFormat.values or fmt == HeaderFormat.NONE:
        # A GIF header, or a format Meta adds later: components_unsupported says so.
        return {"header_format": HeaderFormat.NONE}
    example = _dict(header.get("example"))
    if fmt == HeaderFormat.PRODUCT:
        return {"header_format": fmt}
    if fmt != HeaderFormat.TEXT:
        handles = example.get("header_handle") or example.get("header_url") or []
        return {"header_format": fmt, "header_example": _first_str(handles)}
    text = str(header.get("text") or "")
    names = placeholders(text)
    if len(names) > 1:
        problems.append(f"a text header takes one parameter, this one has {len(names)}")
    named = example.get("header_text_named_params")
    if isinstance(named, list) and named:
        header_example = _first_str([p.get("example") for p in named if isinstance(p, dict)])
    else:
        header_example = _first_str(example.get("header_text") or [])
    return {
        "header_format": HeaderFormat.TEXT,
        "header_text": text[:200],
        "header_param": names[0] if names else "",
        "header_example": header_example if names else "",
    }


def _body_parse(body: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    text = str(body.get("text") or "")
    names = placeholders(text)
    positional = [n for n in names if n.isdigit()]
    named = [n for n in names if not n.isdigit()]
    example = _dict(body.get("example"))
    if positional and named:
        problems.append("the body mixes positional ({{1}}) and named params")
    if named:
        bad = [n for n in named if not NAMED_PARAM_RE.match(n)]
        if bad:
            problems.append(f"invalid param name(s): {', '.join(bad)}")
        examples: dict[str, str] = {}
        for item in example.get("body_text_named_params") or ():
            if isinstance(item, dict) and item.get("param_name") in named:
                examples[str(item["param_name"])] = str(item.get("example", ""))
        return {"body_text": text, "body_param_names": named, "body_examples": examples}
    count = max((int(n) for n in positional), default=0)
    if positional and sorted(int(n) for n in positional) != list(range(1, count + 1)):
        problems.append(f"positional params must be numbered 1..n without gaps: {positional}")
    rows = example.get("body_text") or []
    first_row = rows[0] if rows and isinstance(rows[0], list) else rows
    values = [str(v) for v in first_row][:count] if isinstance(first_row, list) else []
    return {"body_text": text, "body_param_count": count, "body_examples": values}


def _button_parse(index: int, button: dict[str, Any]) -> dict[str, Any]:
    kind = str(button.get("type", "")).upper()
    parsed: dict[str, Any] = {
        "index": index,
        "type": kind,
        "text": str(button.get("text") or ""),
        "sub_type": "",
        "param": PARAM_NONE,
        "example": "",
    }
    if kind == "URL":
        url = str(button.get("url") or "")
        parsed["url"] = url
        if PLACEHOLDER_RE.search(url):
            example = button.get("example")
            parsed.update(
                sub_type="url",
                param=PARAM_REQUIRED,
                example=_first_str(example) if isinstance(example, list) else str(example or ""),
            )
    elif kind in BUTTON_ROLES:
        sub_type, param = BUTTON_ROLES[kind]
        example = button.get("example")
        parsed.update(
            sub_type=sub_type,
            param=param,
            example=_first_str(example) if isinstance(example, list) else str(example or ""),
        )
        if kind == "FLOW":
            parsed["flow_id"] = str(button.get("flow_id") or "")
    elif kind in _UNSUPPORTED_BUTTONS:
        parsed["param"] = PARAM_UNSUPPORTED
    return parsed


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first_str(values: Any) -> str:
    if isinstance(values, list) and values:
        return "" if values[0] is None else str(values[0])
    return ""
