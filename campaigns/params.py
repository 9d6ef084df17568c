"""Template parameters: which a template needs, how a campaign maps them, and rendering.

A campaign's ``param_mapping`` says where each body parameter's value comes from::

    {"body": {"1": {"field": "name"}, "2": {"value": "SALE20"}}}

``field`` is a contact field (``phone``, ``name``) or a key of the contact's attributes;
``value`` is a constant. Positional templates use keys "1".."n"; named templates use the
parameter names. Rendered params (what ``Message.params`` holds) are
``{"body": ["Asha", "SALE20"]}`` for positional templates and
``{"body": {"first_name": "Asha"}}`` for named ones.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Contact, Template

CONTACT_COLUMNS = ("phone", "name")


class ParamMappingError(ValueError):
    """The mapping does not fit the template (missing, unknown or malformed params)."""


def template_body_keys(template: Template) -> list[str]:
    if template.body_param_names:
        return [str(name) for name in template.body_param_names]
    return [str(i) for i in range(1, template.body_param_count + 1)]


def mapping_validate(template: Template, mapping: dict[str, Any]) -> None:
    """Raise ``ParamMappingError`` unless every body param is mapped, and nothing else."""
    unknown_sections = set(mapping) - {"body"}
    if unknown_sections:
        raise ParamMappingError(f"unknown mapping sections: {', '.join(sorted(unknown_sections))}")
    body = mapping.get("body", {})
    if not isinstance(body, dict):
        raise ParamMappingError("mapping 'body' must be an object of param -> source")
    expected = template_body_keys(template)
    missing = [key for key in expected if key not in body]
    unknown = [key for key in body if key not in expected]
    if unknown:
        raise ParamMappingError(
            f"template {template.name} has no body param(s) {', '.join(unknown)}; "
            f"it takes {', '.join(expected) or 'none'}"
        )
    if missing:
        raise ParamMappingError(
            f"template {template.name} body param(s) {', '.join(missing)} are not mapped"
        )
    for key, source in body.items():
        if (
            not isinstance(source, dict)
            or len(source) != 1
            or not (isinstance(source.get("field"), str) or isinstance(source.get("value"), str))
        ):
            raise ParamMappingError(
                f"body param {key}: expected {{'field': NAME}} or {{'value': TEXT}}"
            )


def mapped_fields(mapping: dict[str, Any]) -> list[str]:
    """Contact fields the mapping reads (attribute keys and columns)."""
    return sorted({src["field"] for src in mapping.get("body", {}).values() if "field" in src})


def params_render(template: Template, mapping: dict[str, Any], contact: Contact) -> dict[str, Any]:
    """The rendered params for one contact (previews and tests; launch renders in SQL)."""
    values = {
        key: _source_value(source, contact) for key, source in mapping.get("body", {}).items()
    }
    keys = template_body_keys(template)
    if template.body_param_names:
        return {"body": {key: values[key] for key in keys}}
    return {"body": [values[key] for key in keys]}


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
    rather than in a Python loop. Constants and attribute names travel as query
    parameters, never spliced into the SQL.
    """
    parts: list[str] = []
    args: list[Any] = []
    named = bool(template.body_param_names)
    for key in template_body_keys(template):
        source = mapping["body"][key]
        if named:
            parts.append("%s::text")
            args.append(key)
        if "value" in source:
            parts.append("%s::text")
            args.append(source["value"])
        elif source["field"] in CONTACT_COLUMNS:
            parts.append(f"{alias}.{source['field']}")
        else:
            parts.append(f"coalesce({alias}.attributes ->> %s, '')")
            args.append(source["field"])
    builder = "jsonb_build_object" if named else "jsonb_build_array"
    return f"jsonb_build_object('body', {builder}({', '.join(parts)}))", args
