"""Meta's template ``components`` → the parameters a send must supply (pure, no I/O).

A template as ``GET /{waba_id}/message_templates`` lists it carries up to one HEADER
(TEXT, IMAGE, VIDEO, DOCUMENT or LOCATION), one BODY, an optional FOOTER and one BUTTONS
component. What a campaign needs from them:

* the header: its format and, for a TEXT header, its placeholder (``{{1}}`` or
  ``{{name}}``); a media header always takes one parameter (a link or an uploaded media id);
* the body: positional ``{{1}}..{{n}}`` (a count) or named ``{{first_name}}`` (the names),
  with Meta's examples (``example.body_text`` / ``example.body_text_named_params``);
* the buttons, by index: a quick reply may carry a payload, a URL button whose url ends in
  ``{{1}}`` needs its suffix; other kinds need nothing, or a parameter campaigns cannot
  fill (copy code, one-time password, catalogue).

Whether this version can send the template at all (carousels, limited-time offers, button
kinds and header formats the send path does not build) is
``campaigns.catalogue.sendable.components_unsupported``; its reasons lead ``problems``.
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

# Button kinds whose send-time parameter the client does not build (see
# delivery.cloud.client.build_components): Meta refuses a send without it.
_UNSUPPORTED_BUTTONS = frozenset({"COPY_CODE", "OTP", "CATALOG", "MPM", "SPM"})


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
    # Reasons a campaign cannot use the template as Meta returned it (kept, not raised:
    # the catalogue records every template, usable or not).
    problems: list[str] = field(default_factory=list)


def components_parse(components: Any) -> ParsedTemplate:
    """Parse Meta's ``components`` list; unknown or malformed parts are ignored, not fatal."""
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
    problems = components_unsupported(components)
    header_fields = _header_parse(header, problems)
    body_fields = _body_parse(body, problems)
    parsed_buttons = [_button_parse(index, button) for index, button in enumerate(buttons)]
    return ParsedTemplate(**header_fields, **body_fields, buttons=parsed_buttons, problems=problems)


def _header_parse(header: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    if not header:
        return {}
    fmt = str(header.get("format") or "TEXT").upper()
    if fmt not in HeaderFormat.values or fmt == HeaderFormat.NONE:
        # A PRODUCT or GIF header: components_unsupported gave the reason.
        return {"header_format": HeaderFormat.NONE}
    example = _dict(header.get("example"))
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
    if kind == "QUICK_REPLY":
        parsed.update(sub_type="quick_reply", param=PARAM_OPTIONAL)
    elif kind == "URL":
        url = str(button.get("url") or "")
        parsed["url"] = url
        if PLACEHOLDER_RE.search(url):
            example = button.get("example")
            parsed.update(
                sub_type="url",
                param=PARAM_REQUIRED,
                example=_first_str(example) if isinstance(example, list) else str(example or ""),
            )
    elif kind in _UNSUPPORTED_BUTTONS:
        parsed["param"] = PARAM_UNSUPPORTED
    return parsed


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first_str(values: Any) -> str:
    if isinstance(values, list) and values:
        return "" if values[0] is None else str(values[0])
    return ""
