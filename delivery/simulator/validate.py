"""The checks Meta makes on a send body, answering with Meta's error code and details."""

from __future__ import annotations

from typing import Any

from delivery.simulator.config import TemplateSpec, is_user_id

MAX_CALLBACK_DATA = 512
MAX_TEXT_BODY = 4096
MEDIA_TYPES = ("image", "video", "document")


class Invalid(Exception):
    """A rejected body: Meta's error ``code`` and ``details``."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def check_shape(body: Any) -> None:
    """Structure every send shares (Meta: code 100, Invalid parameter)."""
    if not isinstance(body, dict):
        raise Invalid(100, "The request body must be a JSON object.")
    if body.get("messaging_product") != "whatsapp":
        raise Invalid(100, "The parameter messaging_product is required.")
    if body.get("recipient_type", "individual") not in ("individual", "group"):
        raise Invalid(100, "Invalid recipient_type.")
    to = body.get("to")
    recipient = body.get("recipient")
    if to is None and recipient is not None:
        # A business-scoped user id instead of a phone (2026); ``to`` wins when both are set.
        if not isinstance(recipient, str) or not is_user_id(recipient):
            raise Invalid(100, "The parameter recipient must be a business-scoped user ID.")
    elif not isinstance(to, str) or not any(ch.isdigit() for ch in to):
        raise Invalid(100, "The parameter to is required.")
    callback = body.get("biz_opaque_callback_data")
    if callback is not None and (not isinstance(callback, str) or len(callback) > 512):
        raise Invalid(100, "biz_opaque_callback_data must be a string of at most 512 chars.")
    kind = body.get("type", "text")
    if kind == "text":
        text = body.get("text")
        if not isinstance(text, dict) or not isinstance(text.get("body"), str):
            raise Invalid(100, "The parameter text['body'] is required.")
        if not text["body"] or len(text["body"]) > MAX_TEXT_BODY:
            raise Invalid(100, "text['body'] must be 1 to 4096 characters.")
        return
    if kind != "template":
        raise Invalid(100, f"Unsupported message type {kind!r}.")
    template = body.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("name"), str):
        raise Invalid(100, "The parameter template['name'] is required.")
    language = template.get("language")
    if not isinstance(language, dict) or not isinstance(language.get("code"), str):
        raise Invalid(100, "The parameter template['language']['code'] is required.")
    components = template.get("components", [])
    if not isinstance(components, list):
        raise Invalid(100, "template['components'] must be an array.")
    for component in components:
        _check_component(component)


def _check_component(component: Any) -> None:
    if not isinstance(component, dict) or component.get("type") not in (
        "header",
        "body",
        "button",
    ):
        raise Invalid(100, "Each component needs a type: header, body or button.")
    parameters = component.get("parameters", [])
    if not isinstance(parameters, list) or not all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in parameters
    ):
        raise Invalid(100, "Component parameters must be objects with a type.")
    if component["type"] == "button":
        if component.get("sub_type") not in ("quick_reply", "url", "catalog", "copy_code"):
            raise Invalid(100, "A button component needs a sub_type.")
        index = component.get("index")
        if not str(index).isdigit() or not 0 <= int(str(index)) <= 9:
            raise Invalid(100, "A button component needs an index from 0 to 9.")


def check_template(body: dict[str, Any], template: TemplateSpec) -> None:
    """Parameters against the template (132000 count mismatch, 132012 format mismatch)."""
    components = body["template"].get("components", [])
    by_type: dict[str, list[dict[str, Any]]] = {"header": [], "body": [], "button": []}
    for component in components:
        by_type[component["type"]].append(component)
    _check_header(by_type["header"], template.header_format(), template.header_placeholder())
    _check_body(by_type["body"], template.body_placeholders())
    _check_buttons(by_type["button"], template)


def _params(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for c in components for p in c.get("parameters", [])]


def _check_header(
    components: list[dict[str, Any]], expected: str | None, placeholder: str = ""
) -> None:
    params = _params(components)
    if expected is None:
        if params:
            raise Invalid(132000, f"header: number of params ({len(params)}) != expected (0)")
        return
    if len(params) != 1:
        raise Invalid(132000, f"header: number of params ({len(params)}) != expected (1)")
    param = params[0]
    if param["type"] != expected:
        raise Invalid(132012, f"header: parameter type {param['type']} != {expected}")
    if expected in MEDIA_TYPES:
        media = param.get(expected)
        if not isinstance(media, dict) or not (media.get("id") or media.get("link")):
            raise Invalid(100, f"header {expected} needs an id or a link.")
    elif not isinstance(param.get("text"), str):
        raise Invalid(100, "header text parameter needs text.")
    elif placeholder and not placeholder.isdigit() and param.get("parameter_name") != placeholder:
        # Meta: a named parameter must say which it is.
        raise Invalid(100, f"header: parameter_name {placeholder!r} is required.")


def _check_body(components: list[dict[str, Any]], placeholders: list[str]) -> None:
    params = _params(components)
    if len(params) != len(placeholders):
        raise Invalid(
            132000,
            f"body: number of localizable_params ({len(params)}) does not match the expected "
            f"number of params ({len(placeholders)})",
        )
    named = bool(placeholders) and not all(name.isdigit() for name in placeholders)
    for param in params:
        if param["type"] not in ("text", "currency", "date_time"):
            raise Invalid(132012, f"body: parameter type {param['type']} is not allowed")
        if param["type"] == "text" and not isinstance(param.get("text"), str):
            raise Invalid(100, "body text parameter needs text.")
    if named:
        given = sorted(str(p.get("parameter_name")) for p in params)
        if given != sorted(placeholders):
            raise Invalid(132000, f"body: parameter names {given} != {sorted(placeholders)}")


def _check_buttons(components: list[dict[str, Any]], template: TemplateSpec) -> None:
    buttons = {b.index: b for b in template.buttons()}
    seen = set()
    for component in components:
        index = int(str(component["index"]))
        button = buttons.get(index)
        if button is None or button.sub_type != component["sub_type"]:
            raise Invalid(132000, f"button {index}: no {component['sub_type']} button there")
        params = component.get("parameters", [])
        if button.sub_type == "url" and (not button.dynamic or len(params) != 1):
            raise Invalid(132000, f"button {index}: url parameter count mismatch")
        if button.sub_type == "quick_reply" and len(params) > 1:
            raise Invalid(132000, f"button {index}: quick_reply takes one payload")
        seen.add(index)
    for button in buttons.values():
        if button.dynamic and button.index not in seen:
            raise Invalid(132000, f"button {button.index}: url parameter missing")
