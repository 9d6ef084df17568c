"""The checks Meta makes on a send body, answering with Meta's error code and details."""

from __future__ import annotations

from typing import Any

from delivery.simulator.config import ButtonSpec, PartSpec, TemplateSpec, is_user_id

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
    if kind == "interactive":
        _check_reply_buttons(body.get("interactive"))
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


# An interactive reply-buttons message (Meta, "Interactive reply buttons messages"): a body
# of 1-1024 characters and 1-3 buttons, each a reply with a unique id (up to 256 characters)
# and a unique title (up to 20).
MAX_INTERACTIVE_BODY = 1024
MAX_REPLY_BUTTONS = 3
MAX_REPLY_TITLE = 20
MAX_REPLY_ID = 256


def _check_reply_buttons(interactive: Any) -> None:
    if not isinstance(interactive, dict) or interactive.get("type") != "button":
        raise Invalid(100, "interactive['type'] must be button.")
    body = interactive.get("body")
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not 1 <= len(text) <= MAX_INTERACTIVE_BODY:
        raise Invalid(100, "interactive['body']['text'] must be 1 to 1024 characters.")
    action = interactive.get("action")
    buttons = action.get("buttons") if isinstance(action, dict) else None
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= MAX_REPLY_BUTTONS:
        raise Invalid(100, "interactive['action']['buttons'] must hold 1 to 3 buttons.")
    ids, titles = set(), set()
    for button in buttons:
        reply = button.get("reply") if isinstance(button, dict) else None
        if not isinstance(reply, dict) or button.get("type") != "reply":
            raise Invalid(100, "Each button must be {type: reply, reply: {id, title}}.")
        button_id, title = reply.get("id"), reply.get("title")
        if not isinstance(button_id, str) or not 1 <= len(button_id) <= MAX_REPLY_ID:
            raise Invalid(100, "A reply button's id must be 1 to 256 characters.")
        if not isinstance(title, str) or not 1 <= len(title) <= MAX_REPLY_TITLE:
            raise Invalid(100, "A reply button's title must be 1 to 20 characters.")
        if button_id in ids or title in titles:
            raise Invalid(100, "Reply buttons need unique ids and titles.")
        ids.add(button_id)
        titles.add(title)


_COMPONENT_TYPES = ("header", "body", "button", "carousel", "limited_time_offer")
BUTTON_SUB_TYPES = ("quick_reply", "url", "catalog", "copy_code", "flow", "mpm", "spm")
MAX_COUPON_CODE = 15
MAX_MPM_SECTIONS = 10
MAX_MPM_ITEMS = 30


def _check_component(component: Any) -> None:
    if not isinstance(component, dict) or component.get("type") not in _COMPONENT_TYPES:
        raise Invalid(100, f"Each component needs a type: {', '.join(_COMPONENT_TYPES)}.")
    if component["type"] == "carousel":
        cards = component.get("cards")
        if not isinstance(cards, list) or not all(isinstance(card, dict) for card in cards):
            raise Invalid(100, "carousel['cards'] must be an array of objects.")
        for card in cards:
            inner = card.get("components")
            if not isinstance(inner, list):
                raise Invalid(100, "Each card needs its components.")
            for part in inner:
                if isinstance(part, dict) and part.get("type") in (
                    "carousel",
                    "limited_time_offer",
                ):
                    raise Invalid(100, f"A card cannot hold a {part['type']} component.")
                _check_component(part)
        return
    parameters = component.get("parameters", [])
    if not isinstance(parameters, list) or not all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in parameters
    ):
        raise Invalid(100, "Component parameters must be objects with a type.")
    if component["type"] == "button":
        if str(component.get("sub_type", "")).lower() not in BUTTON_SUB_TYPES:
            raise Invalid(100, "A button component needs a sub_type.")
        index = component.get("index")
        if not str(index).isdigit() or not 0 <= int(str(index)) <= 9:
            raise Invalid(100, "A button component needs an index from 0 to 9.")


def check_template(body: dict[str, Any], template: TemplateSpec, now_ms: int = 0) -> None:
    """Parameters against the template (132000 count mismatch, 132012 format mismatch).

    ``now_ms`` (Unix milliseconds) is when the send arrives: a limited-time offer must
    expire after it.
    """
    components = body["template"].get("components", [])
    by_type: dict[str, list[dict[str, Any]]] = {kind: [] for kind in _COMPONENT_TYPES}
    for component in components:
        by_type[component["type"]].append(component)
    _check_part(by_type, template.part(), "")
    _check_carousel(by_type["carousel"], template.cards())
    _check_offer(by_type["limited_time_offer"], template.offer_expires(), now_ms)


def _check_part(by_type: dict[str, list[dict[str, Any]]], part: PartSpec, where: str) -> None:
    _check_header(by_type["header"], part.header_format, part.header_placeholder, where)
    _check_body(by_type["body"], part.body_placeholders, where)
    _check_buttons(by_type["button"], part.buttons, where)


def _check_carousel(components: list[dict[str, Any]], cards: list[PartSpec]) -> None:
    if not cards:
        if components:
            raise Invalid(132000, "carousel: the template has no carousel")
        return
    if len(components) != 1:
        raise Invalid(132000, f"carousel: number of carousel components ({len(components)}) != 1")
    sent = components[0]["cards"]
    if len(sent) != len(cards):
        # Meta answers a card count other than the approved one with this misleading text.
        raise Invalid(
            132012,
            f"carousel: number of cards ({len(sent)}) != expected ({len(cards)}); "
            "header component parameter should not be empty",
        )
    for position, (card, spec) in enumerate(zip(sent, cards, strict=True)):
        if card.get("card_index") != position:
            raise Invalid(100, f"card {position}: card_index must be {position}")
        by_type: dict[str, list[dict[str, Any]]] = {kind: [] for kind in _COMPONENT_TYPES}
        for component in card["components"]:
            by_type[component["type"]].append(component)
        _check_part(by_type, spec, f"card {position} ")


def _check_offer(components: list[dict[str, Any]], expires: bool, now_ms: int) -> None:
    if not expires:
        if components:
            raise Invalid(132000, "limited_time_offer: the template has no expiring offer")
        return
    params = _params(components)
    if len(components) != 1 or len(params) != 1:
        raise Invalid(132000, "limited_time_offer: expiration_time_ms is required")
    offer = params[0].get("limited_time_offer")
    expiry = offer.get("expiration_time_ms") if isinstance(offer, dict) else None
    if params[0]["type"] != "limited_time_offer" or not isinstance(expiry, int):
        raise Invalid(132012, "limited_time_offer: expiration_time_ms must be an integer")
    if expiry <= now_ms:
        raise Invalid(132012, "limited_time_offer: expiration_time_ms must be in the future")


def _params(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for c in components for p in c.get("parameters", [])]


def _check_header(
    components: list[dict[str, Any]], expected: str | None, placeholder: str = "", where: str = ""
) -> None:
    params = _params(components)
    if expected is None:
        if params:
            raise Invalid(
                132000, f"{where}header: number of params ({len(params)}) != expected (0)"
            )
        return
    if len(params) != 1:
        raise Invalid(132000, f"{where}header: number of params ({len(params)}) != expected (1)")
    param = params[0]
    if param["type"] != expected:
        raise Invalid(132012, f"{where}header: parameter type {param['type']} != {expected}")
    if expected in MEDIA_TYPES:
        media = param.get(expected)
        if not isinstance(media, dict) or not (media.get("id") or media.get("link")):
            raise Invalid(100, f"{where}header {expected} needs an id or a link.")
    elif expected == "product":
        product = param.get("product")
        if not isinstance(product, dict) or not all(
            isinstance(product.get(key), str) and product[key]
            for key in ("product_retailer_id", "catalog_id")
        ):
            raise Invalid(100, f"{where}header product needs product_retailer_id and catalog_id.")
    elif not isinstance(param.get("text"), str):
        raise Invalid(100, f"{where}header text parameter needs text.")
    elif placeholder and not placeholder.isdigit() and param.get("parameter_name") != placeholder:
        # Meta: a named parameter must say which it is.
        raise Invalid(100, f"{where}header: parameter_name {placeholder!r} is required.")


def _check_body(components: list[dict[str, Any]], placeholders: list[str], where: str = "") -> None:
    params = _params(components)
    if len(params) != len(placeholders):
        raise Invalid(
            132000,
            f"{where}body: number of localizable_params ({len(params)}) does not match the "
            f"expected number of params ({len(placeholders)})",
        )
    named = bool(placeholders) and not all(name.isdigit() for name in placeholders)
    for param in params:
        if param["type"] not in ("text", "currency", "date_time"):
            raise Invalid(132012, f"{where}body: parameter type {param['type']} is not allowed")
        if param["type"] == "text" and not isinstance(param.get("text"), str):
            raise Invalid(100, f"{where}body text parameter needs text.")
    if named:
        given = sorted(str(p.get("parameter_name")) for p in params)
        if given != sorted(placeholders):
            raise Invalid(132000, f"{where}body: parameter names {given} != {sorted(placeholders)}")


def _check_buttons(
    components: list[dict[str, Any]], specs: list[ButtonSpec], where: str = ""
) -> None:
    buttons = {b.index: b for b in specs}
    seen = set()
    for component in components:
        index = int(str(component["index"]))
        sub_type = str(component["sub_type"]).lower()
        button = buttons.get(index)
        if button is None or button.sub_type != sub_type:
            raise Invalid(132000, f"{where}button {index}: no {sub_type} button there")
        params = component.get("parameters", [])
        if button.sub_type == "url" and (not button.dynamic or len(params) != 1):
            raise Invalid(132000, f"{where}button {index}: url parameter count mismatch")
        if button.sub_type == "quick_reply" and len(params) > 1:
            raise Invalid(132000, f"{where}button {index}: quick_reply takes one payload")
        _check_button_parameter(button.sub_type, params, f"{where}button {index}")
        seen.add(index)
    for button in buttons.values():
        if button.required and button.index not in seen:
            raise Invalid(
                132000, f"{where}button {button.index}: {button.sub_type} parameter missing"
            )


def _check_button_parameter(sub_type: str, params: list[dict[str, Any]], where: str) -> None:
    """The parameter of a coupon, Flow, catalogue or multi-product button, as Meta takes it."""
    if sub_type == "copy_code":
        code = params[0].get("coupon_code") if len(params) == 1 else None
        if len(params) != 1 or params[0]["type"] != "coupon_code":
            raise Invalid(132000, f"{where}: copy_code takes one coupon_code parameter")
        if not isinstance(code, str) or not 1 <= len(code) <= MAX_COUPON_CODE:
            raise Invalid(132012, f"{where}: coupon_code must be 1 to 15 characters")
    elif sub_type in ("flow", "catalog", "mpm"):
        if len(params) > 1 or (sub_type == "mpm" and len(params) != 1):
            raise Invalid(132000, f"{where}: {sub_type} takes one action parameter")
        action = params[0].get("action") if params else {}
        if not isinstance(action, dict) or (params and params[0]["type"] != "action"):
            raise Invalid(132012, f"{where}: {sub_type} parameter must be an action")
        if sub_type == "flow" and not isinstance(action.get("flow_token", ""), str):
            raise Invalid(100, f"{where}: flow_token must be a string")
        if sub_type == "mpm":
            _check_sections(action, where)
    elif sub_type == "spm" and params:
        raise Invalid(132000, f"{where}: spm takes no parameters")


def _check_sections(action: dict[str, Any], where: str) -> None:
    if not isinstance(action.get("thumbnail_product_retailer_id"), str):
        raise Invalid(100, f"{where}: mpm needs thumbnail_product_retailer_id")
    sections = action.get("sections")
    if not isinstance(sections, list) or not 1 <= len(sections) <= MAX_MPM_SECTIONS:
        raise Invalid(100, f"{where}: mpm needs 1 to {MAX_MPM_SECTIONS} sections")
    total = 0
    for section in sections:
        if not isinstance(section, dict):
            raise Invalid(100, f"{where}: each section must be an object")
        items = section.get("product_items")
        if not isinstance(section.get("title"), str) or not isinstance(items, list) or not items:
            raise Invalid(100, f"{where}: each section needs a title and product_items")
        if not all(isinstance(i, dict) and i.get("product_retailer_id") for i in items):
            raise Invalid(100, f"{where}: each product item needs a product_retailer_id")
        total += len(items)
    if total > MAX_MPM_ITEMS:
        raise Invalid(131009, f"{where}: at most {MAX_MPM_ITEMS} products, got {total}")
