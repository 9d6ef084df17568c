"""Template parameters: which a template needs, how a campaign maps them, and rendering.

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

Rendered params (what ``Message.params`` holds, the format ``delivery.cloud_api`` sends)::

    {"header": {"type": "image", "value": "https://cdn.example/sale.jpg"},
     "body": ["Asha", "SALE20"],                 # or {"first_name": "Asha"} when named
     "buttons": [{"sub_type": "url", "index": 1, "value": "A12"}]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from campaigns.models import Contact, HeaderFormat, Template
from campaigns.template_components import PARAM_OPTIONAL, PARAM_REQUIRED, PARAM_UNSUPPORTED

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
    if template.header_format == HeaderFormat.LOCATION:
        raise ParamMappingError(
            f"template {template.name} has a location header, which campaigns cannot fill",
            section="header",
        )
    unsupported = [
        f"{b['index']} ({b.get('type', '?')})"
        for b in template.buttons or ()
        if b.get("param") == PARAM_UNSUPPORTED
    ]
    if unsupported:
        raise ParamMappingError(
            f"template {template.name} has button(s) {', '.join(unsupported)} whose parameter "
            "campaigns cannot fill",
            section="buttons",
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
    ok = (
        isinstance(source, dict)
        and len(source) == 1
        and (
            (isinstance(source.get("field"), str) and bool(source["field"]))
            or isinstance(source.get("value"), str)
        )
    )
    if not ok:
        raise ParamMappingError(f"{what}: expected {{'field': NAME}} or {{'value': TEXT}}")


def _sources(mapping: dict[str, Any]) -> list[dict[str, str]]:
    sources = list(mapping.get("body", {}).values()) + list(mapping.get("buttons", {}).values())
    if mapping.get("header") is not None:
        sources.append(mapping["header"])
    return sources


def mapped_fields(mapping: dict[str, Any]) -> list[str]:
    """Contact fields the mapping reads (attribute keys and columns), in any section."""
    return sorted({src["field"] for src in _sources(mapping) if "field" in src})


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
    return "" if value is None else str(value)


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
        parts.append(f"'header', jsonb_build_object('type', %s::text, 'value', {source_sql})")
        args += [template.header_format.lower(), *source_args]
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
        return f"{alias}.{source['field']}", []
    return f"coalesce({alias}.attributes ->> %s, '')", [source["field"]]
