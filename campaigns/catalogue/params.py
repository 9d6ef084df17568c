"""Template parameters: the one home of their rules.

What a template's text may hold (``{{1}}`` positional or ``{{first_name}}`` named), which
parameters a template takes, how a campaign maps them to contact fields, how they are
rendered (in Python for previews, in SQL for the launch), and how a rendered set sent by
the API is checked against the template. The campaign form, the preview, the launch, the
API and the catalogue sync all use these.

A campaign's ``param_mapping`` says where each parameter's value comes from::

    {"header": {"value": "https://cdn.example/sale.jpg"},
     "body": {"1": {"field": "name"}, "2": {"value": "SALE20"}},
     "buttons": {"1": {"field": "coupon"}}}

``field`` is a contact field (``phone``, ``name``) or a key of the contact's attributes;
``value`` is a constant. Body keys are "1".."n" for positional templates and the parameter
names for named ones. ``header`` is one source: the text of a TEXT header's placeholder, or
for a media header a link (``https://...``) or an uploaded media id (all digits).
``buttons`` maps a button index to its parameter: the suffix of a URL button whose url ends
in ``{{1}}`` (required), or a quick reply's payload (optional).

Rendered params (what ``Message.params`` holds, the format ``delivery.cloud.client`` sends)::

    {"header": {"type": "image", "value": "https://cdn.example/sale.jpg"},
     "body": ["Asha", "SALE20"],                 # or {"first_name": "Asha"} when named
     "buttons": [{"sub_type": "url", "index": 1, "value": "A12"}]}
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError

from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import Contact, HeaderFormat, Template

# A placeholder as Meta writes it: {{1}} (positional) or {{first_name}} (named).
PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")
# Anything between double braces, so a hand-typed "{{First Name}}" is named as wrong
# rather than silently ignored.
_BRACES_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
# Meta's rule for named params: lower-case letters, digits and underscores.
NAMED_PARAM_RE = re.compile(r"^[a-z_][a-z0-9_]*$")

# What a button accepts when sending.
PARAM_NONE = "none"  # static: nothing to send
PARAM_OPTIONAL = "optional"  # a quick reply's payload
PARAM_REQUIRED = "required"  # a dynamic URL's suffix
PARAM_UNSUPPORTED = "unsupported"  # Meta requires a parameter this project cannot render

CONTACT_COLUMNS = ("phone", "name")
SECTIONS = ("header", "body", "buttons")
_MEDIA_HEADERS = (HeaderFormat.IMAGE, HeaderFormat.VIDEO, HeaderFormat.DOCUMENT)


class ParamMappingError(ValueError):
    """The mapping does not fit the template (missing, unknown or malformed params).

    ``section``, ``missing``, ``unknown`` and ``expected`` say what is wrong, for callers
    that word the message their own way.
    """

    def __init__(
        self,
        message: str,
        *,
        section: str = "",
        missing: Sequence[str] = (),
        unknown: Sequence[str] = (),
        expected: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.section = section
        self.missing = list(missing)
        self.unknown = list(unknown)
        self.expected = list(expected)


def placeholders(text: str) -> list[str]:
    """Placeholder names in order of first appearance: ``["1", "2"]`` or ``["first_name"]``."""
    return list(dict.fromkeys(PLACEHOLDER_RE.findall(text or "")))


def placeholders_fill(text: str, value_of: Any) -> str:
    """``text`` with each placeholder replaced by ``value_of(name)`` (a str), or kept."""

    def one(match: re.Match[str]) -> str:
        value = value_of(match.group(1))
        return match.group(0) if value is None else str(value)

    return PLACEHOLDER_RE.sub(one, text)


def template_params_parse(body_text: str) -> tuple[int, list[str]]:
    """(positional count, named params) of a template body typed by hand.

    ``"Hi {{1}}, use {{2}}"`` → ``(2, [])``; ``"Hi {{first_name}}"`` → ``(0, ["first_name"])``.
    Meta requires positional params numbered 1..n without gaps and forbids mixing the kinds.
    """
    found = _BRACES_RE.findall(body_text)
    positional = {int(p) for p in found if p.isdigit()}
    named = list(dict.fromkeys(p for p in found if not p.isdigit()))
    if positional and named:
        raise ValidationError("a template body mixes positional ({{1}}) and named params")
    bad = [p for p in named if not NAMED_PARAM_RE.match(p)]
    if bad:
        raise ValidationError(
            f"invalid template param name(s) {', '.join(repr(b) for b in bad)}: "
            "use lower-case letters, digits and underscores"
        )
    if positional and positional != set(range(1, max(positional) + 1)):
        raise ValidationError(
            f"positional params must be numbered 1..n without gaps, got {sorted(positional)}"
        )
    return len(positional), named


def template_body_keys(template: Template) -> list[str]:
    if template.body_param_names:
        return [str(name) for name in template.body_param_names]
    return [str(i) for i in range(1, template.body_param_count + 1)]


def template_button_params(template: Template) -> dict[str, dict[str, Any]]:
    """Buttons that take a parameter, by index as a string ("1"): required or optional."""
    return {
        str(button["index"]): button
        for button in template.buttons or ()
        if button.get("param") in (PARAM_REQUIRED, PARAM_OPTIONAL)
    }


def template_param_slots(template: Template) -> list[dict[str, Any]]:
    """Every parameter a campaign can map for ``template``, in send order, for forms.

    ``{"section": "header" | "body" | "buttons", "key": ..., "required": bool,
    "kind": ..., "example": ...}``; ``key`` is what the mapping uses (None for the header).
    """
    slots: list[dict[str, Any]] = []
    if template.header_takes_param:
        kind = template.header_format.lower()
        slots.append(
            {
                "section": "header",
                "key": None,
                "required": True,
                "kind": "text" if kind == "text" else f"{kind} link or media id",
                "example": template.header_example,
            }
        )
    examples = template.body_examples
    for index, key in enumerate(template_body_keys(template)):
        if isinstance(examples, dict):
            example = examples.get(key, "")
        else:
            example = examples[index] if index < len(examples) else ""
        slots.append(
            {"section": "body", "key": key, "required": True, "kind": "text", "example": example}
        )
    for key, button in template_button_params(template).items():
        slots.append(
            {
                "section": "buttons",
                "key": key,
                "required": button["param"] == PARAM_REQUIRED,
                "kind": _button_role(button),
                "example": button.get("example", ""),
            }
        )
    return slots


def mapping_validate(template: Template, mapping: dict[str, Any]) -> None:
    """Raise ``ParamMappingError`` unless the mapping supplies exactly the template's params.

    Every body param, the header's parameter when the template has one, and every dynamic
    URL button suffix must be mapped; quick reply payloads may be; nothing else may be.
    """
    if not isinstance(mapping, dict):
        raise ParamMappingError("the param mapping must be an object")
    unknown_sections = set(mapping) - set(SECTIONS)
    if unknown_sections:
        raise ParamMappingError(
            f"unknown mapping sections: {', '.join(sorted(unknown_sections))}",
            section="",
            unknown=sorted(unknown_sections),
        )
    _unsupported_check(template)
    _body_validate(template, mapping.get("body", {}))
    _header_validate(template, mapping.get("header"))
    _buttons_validate(template, mapping.get("buttons", {}))


def _unsupported_check(template: Template) -> None:
    reasons = template_unusable_reasons(template)
    if reasons:
        raise ParamMappingError(
            f"template {template} cannot be sent by this version: {'; '.join(reasons)}",
            section="template",
        )


def _body_validate(template: Template, body: Any) -> None:
    if not isinstance(body, dict):
        raise ParamMappingError(
            "mapping 'body' must be an object of param -> source", section="body"
        )
    expected = template_body_keys(template)
    missing = [key for key in expected if key not in body]
    unknown = [key for key in body if key not in expected]
    if unknown:
        raise ParamMappingError(
            f"template {template.name} has no body param(s) {', '.join(unknown)}; "
            f"it takes {', '.join(expected) or 'none'}",
            section="body",
            unknown=unknown,
            expected=expected,
        )
    if missing:
        raise ParamMappingError(
            f"template {template.name} body param(s) {', '.join(missing)} are not mapped",
            section="body",
            missing=missing,
            expected=expected,
        )
    for key, source in body.items():
        _source_check(source, f"body param {key}")


def _header_validate(template: Template, header: Any) -> None:
    if not template.header_takes_param:
        if header is not None:
            raise ParamMappingError(
                f"template {template.name} has no header parameter; remove 'header'",
                section="header",
                unknown=["header"],
            )
        return
    kind = template.header_format.lower()
    if header is None:
        what = "its text" if template.header_format == HeaderFormat.TEXT else "a link or media id"
        raise ParamMappingError(
            f"template {template.name} has a {kind} header: map 'header' to {what}",
            section="header",
            missing=["header"],
        )
    _source_check(header, "header")
    value = header.get("value")
    if template.header_format in _MEDIA_HEADERS and value is not None:
        if not (value.isdigit() or value.startswith(("https://", "http://"))):
            raise ParamMappingError(
                f"header {kind}: {value!r} is neither a link (https://...) nor a media id",
                section="header",
            )


def _buttons_validate(template: Template, buttons: Any) -> None:
    if not isinstance(buttons, dict):
        raise ParamMappingError(
            "mapping 'buttons' must be an object of button index -> source", section="buttons"
        )
    params = template_button_params(template)
    unknown = [key for key in buttons if key not in params]
    if unknown:
        takes = ", ".join(f"{i} ({_button_role(b)})" for i, b in params.items()) or "none"
        raise ParamMappingError(
            f"template {template.name} has no button {', '.join(unknown)} taking a parameter; "
            f"it takes {takes}",
            section="buttons",
            unknown=unknown,
            expected=list(params),
        )
    missing = [i for i, b in params.items() if b["param"] == PARAM_REQUIRED and i not in buttons]
    if missing:
        raise ParamMappingError(
            f"template {template.name} button(s) {', '.join(missing)} need their url suffix mapped",
            section="buttons",
            missing=missing,
            expected=list(params),
        )
    for key, source in buttons.items():
        _source_check(source, f"button {key}")


def _button_role(button: dict[str, Any]) -> str:
    if button["param"] == PARAM_REQUIRED:
        return "url suffix"
    return "quick reply payload, optional"


def _source_check(source: Any, what: str) -> None:
    """``{"field": NAME}``, ``{"field": NAME, "fallback": TEXT}`` (the text for a contact
    without that field) or ``{"value": TEXT}``."""
    ok = isinstance(source, dict) and (
        (
            isinstance(source.get("field"), str)
            and bool(source["field"])
            and set(source) <= {"field", "fallback"}
            and isinstance(source.get("fallback", ""), str)
        )
        or (set(source) == {"value"} and isinstance(source.get("value"), str))
    )
    if not ok:
        raise ParamMappingError(
            f"{what}: expected {{'field': NAME}}, {{'field': NAME, 'fallback': TEXT}} "
            "or {'value': TEXT}"
        )


def _sources(mapping: dict[str, Any]) -> list[dict[str, str]]:
    sources = list(mapping.get("body", {}).values()) + list(mapping.get("buttons", {}).values())
    if mapping.get("header") is not None:
        sources.append(mapping["header"])
    return sources


def mapped_fields(mapping: dict[str, Any]) -> list[str]:
    """Contact fields the mapping reads (attribute keys and columns), in any section."""
    return sorted({src["field"] for src in _sources(mapping) if "field" in src})


def required_fields(mapping: dict[str, Any]) -> list[str]:
    """Mapped fields every contact must have: those read somewhere without a fallback."""
    return sorted(
        {
            src["field"]
            for src in _sources(mapping)
            if "field" in src and not str(src.get("fallback", "")).strip()
        }
    )


def params_render(template: Template, mapping: dict[str, Any], contact: Contact) -> dict[str, Any]:
    """The rendered params for one contact (previews and tests; launch renders in SQL)."""
    values = {
        key: _source_value(source, contact) for key, source in mapping.get("body", {}).items()
    }
    keys = template_body_keys(template)
    rendered: dict[str, Any] = {}
    if template.header_takes_param:
        rendered["header"] = {
            "type": template.header_format.lower(),
            "value": _source_value(mapping["header"], contact),
        }
        if name := header_param_name(template):
            rendered["header"]["name"] = name
    if template.body_param_names:
        rendered["body"] = {key: values[key] for key in keys}
    else:
        rendered["body"] = [values[key] for key in keys]
    buttons = _mapped_buttons(template, mapping)
    if buttons:
        rendered["buttons"] = [
            {"sub_type": b["sub_type"], "index": b["index"], "value": _source_value(src, contact)}
            for b, src in buttons
        ]
    return rendered


def _mapped_buttons(
    template: Template, mapping: dict[str, Any]
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """(button, source) for every mapped button, in index order."""
    params = template_button_params(template)
    chosen = mapping.get("buttons", {})
    return [(params[key], chosen[key]) for key in sorted(chosen, key=int) if key in params]


def _source_value(source: dict[str, str], contact: Contact) -> str:
    if "value" in source:
        return source["value"]
    value = contact.field_value(source["field"])
    text = "" if value is None else str(value)
    return text if text.strip() else source.get("fallback", text)


def params_sql(
    template: Template, mapping: dict[str, Any], alias: str = "c"
) -> tuple[str, list[Any]]:
    """A SQL expression (over contact alias ``alias``) that renders the params as jsonb.

    Used by the launch's set-based INSERT so a million recipients render in the database
    rather than in a Python loop; it builds the same JSON as ``params_render``. Constants
    and attribute names travel as query parameters, never spliced into the SQL.
    """
    parts: list[str] = []
    args: list[Any] = []
    if template.header_takes_param:
        source_sql, source_args = _source_sql(mapping["header"], alias)
        name = header_param_name(template)
        named_sql = ", 'name', %s::text" if name else ""
        parts.append(
            f"'header', jsonb_build_object('type', %s::text, 'value', {source_sql}{named_sql})"
        )
        args += [template.header_format.lower(), *source_args, *([name] if name else [])]
    body_parts: list[str] = []
    named = bool(template.body_param_names)
    for key in template_body_keys(template):
        if named:
            body_parts.append("%s::text")
            args.append(key)
        source_sql, source_args = _source_sql(mapping["body"][key], alias)
        body_parts.append(source_sql)
        args += source_args
    builder = "jsonb_build_object" if named else "jsonb_build_array"
    parts.append(f"'body', {builder}({', '.join(body_parts)})")
    buttons = _mapped_buttons(template, mapping)
    if buttons:
        items = []
        for button, source in buttons:
            source_sql, source_args = _source_sql(source, alias)
            items.append(
                f"jsonb_build_object('sub_type', %s::text, 'index', %s::int, 'value', {source_sql})"
            )
            args += [button["sub_type"], int(button["index"]), *source_args]
        parts.append(f"'buttons', jsonb_build_array({', '.join(items)})")
    return f"jsonb_build_object({', '.join(parts)})", args


def _source_sql(source: dict[str, str], alias: str) -> tuple[str, list[Any]]:
    if "value" in source:
        return "%s::text", [source["value"]]
    if source["field"] in CONTACT_COLUMNS:
        sql, args = f"{alias}.{source['field']}", []
    else:
        sql, args = f"coalesce({alias}.attributes ->> %s, '')", [source["field"]]
    if source.get("fallback"):
        # As params_render: a blank value (spaces only included) takes the fallback.
        return f"coalesce(nullif(btrim({sql}), ''), %s::text)", [*args, source["fallback"]]
    return sql, args


# --- rendered params sent as they are (the transactional API) ----------------------------

# Button type -> (sub_type the send uses, whether its parameter is required).
_OTP_BUTTON = ("url", True)


def rendered_params_check(template: Template, params: dict[str, Any]) -> dict[str, Any]:
    """Rendered params sent as they are (the API) checked against the template: exactly
    what it takes, in the shape Meta accepts, or ``TemplateParamsError``.

    The result is rendered from the template: the header's type and each button's sub_type
    come from it, so a caller cannot send a shape Meta would refuse with 132000. A
    one-time-password button (authentication templates) takes the code as a URL-style text
    parameter, which the client builds, so it is accepted here although campaigns cannot
    map it.
    """
    rendered: dict[str, Any] = {}
    header = _rendered_header(template, params.get("header"))
    if header is not None:
        rendered["header"] = header
    rendered["body"] = _rendered_body(template, params.get("body"))
    buttons = _rendered_buttons(template, params.get("buttons") or [])
    if buttons:
        rendered["buttons"] = buttons
    return rendered


class TemplateParamsError(ValueError):
    """Rendered params that do not fit the template; ``section`` says where."""

    def __init__(self, section: str, message: str) -> None:
        super().__init__(message)
        self.section = section


def _problem(section: str, message: str) -> TemplateParamsError:
    return TemplateParamsError(section, message)


def _rendered_body(template: Template, body: Any) -> list[str] | dict[str, str]:
    expected = template_body_keys(template)
    if template.body_param_names:
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise _problem("body", f"Template takes named params: {', '.join(expected)}.")
        missing = [name for name in expected if name not in body]
        unknown = sorted(name for name in body if name not in expected)[:10]
        if missing or unknown:
            parts = [f"missing {', '.join(missing)}"] if missing else []
            parts += [f"unknown {', '.join(unknown)}"] if unknown else []
            wanted = ", ".join(expected)
            raise _problem("body", f"Template takes {wanted}: {'; '.join(parts)}.")
        return {name: body[name] for name in expected}
    body = [] if body is None else body
    if isinstance(body, dict):
        raise _problem("body", f"Template takes {len(expected)} positional params (a list).")
    if len(body) != len(expected):
        raise _problem("body", f"Template takes {len(expected)} params, got {len(body)}.")
    return list(body)


def _rendered_header(template: Template, header: Any) -> dict[str, str] | None:
    if isinstance(header, list):
        header = header[0] if header else None
    if template.header_format == HeaderFormat.LOCATION:
        raise _problem("header", "Template has a location header, which this API cannot send.")
    if not template.header_takes_param:
        if header is not None:
            raise _problem("header", "Template has no header parameter; remove header.")
        return None
    kind = template.header_format.lower()
    if header is None:
        what = "its text" if kind == "text" else "a link (https://...) or a media id"
        raise _problem("header", f"Template has a {kind} header: give {what}.")
    if header.get("type") not in (None, kind):
        raise _problem("header", f"Template has a {kind} header, not {header['type']}.")
    value = header["value"]
    if kind != "text" and not (value.isdigit() or value.startswith(("https://", "http://"))):
        raise _problem("header", f"A {kind} header takes a link (https://...) or a media id.")
    rendered = {"type": kind, "value": value}
    if name := header_param_name(template):
        rendered["name"] = name
    return rendered


def header_param_name(template: Template) -> str:
    """A named text header's placeholder ("{{order_id}}" -> "order_id"); "" otherwise.

    Meta refuses a named header parameter sent without its ``parameter_name``.
    """
    if template.header_format != HeaderFormat.TEXT or not template.header_param:
        return ""
    return "" if template.header_param.isdigit() else template.header_param


def _rendered_button_roles(template: Template) -> dict[int, tuple[str, bool]]:
    """Buttons that take a parameter: index -> (sub_type, required)."""
    roles: dict[int, tuple[str, bool]] = {}
    for button in template.buttons or ():
        kind = str(button.get("type", "")).upper()
        param = button.get("param")
        if kind == "OTP":
            roles[int(button["index"])] = _OTP_BUTTON
        elif param in (PARAM_REQUIRED, PARAM_OPTIONAL):
            roles[int(button["index"])] = (str(button["sub_type"]), param == PARAM_REQUIRED)
        elif param not in (None, "", "none"):
            raise _problem(
                "buttons",
                f"Template button {button.get('index')} ({kind}) needs a parameter this API "
                "cannot send.",
            )
    return roles


def _rendered_buttons(template: Template, buttons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = _rendered_button_roles(template)
    given: dict[int, dict[str, Any]] = {}
    for button in buttons:
        index = int(button["index"])
        role = roles.get(index)
        if role is None:
            takes = ", ".join(str(i) for i in sorted(roles)) or "none"
            raise _problem(
                "buttons", f"Template has no button {index} taking a parameter (takes: {takes})."
            )
        if button["sub_type"] != role[0]:
            raise _problem("buttons", f"Button {index} is a {role[0]} button.")
        if index in given:
            raise _problem("buttons", f"Button {index} is given twice.")
        given[index] = button
    missing = [str(i) for i, (_, required) in sorted(roles.items()) if required and i not in given]
    if missing:
        raise _problem("buttons", f"Button(s) {', '.join(missing)} need their parameter.")
    return [
        {"sub_type": roles[i][0], "index": i, "value": given[i]["value"]} for i in sorted(given)
    ]
