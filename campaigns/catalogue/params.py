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

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.core.exceptions import ValidationError

from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import Contact, HeaderFormat, Template
from whatsblast.core.template_values import offer_expiry_ms, sku_list
from whatsblast.core.tracked_links import CLICK_MARKER

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
SECTIONS = ("header", "body", "buttons", "cards", "offer", "catalog", "sections")
CARD_SECTIONS = ("header", "body", "buttons")
MAX_COUPON_CODE = 15  # Meta: a copy-code button's coupon has at most 15 characters
MAX_MPM_SECTIONS = 10  # Meta: a multi-product message lists up to 10 sections
FLOW_TOKEN_UNUSED = "unused"  # noqa: S105 (Meta's default flow_token, not a secret)
OFFER_KIND = "date and time, or Unix ms"
_BUTTON_ROLE_NAMES = {
    "url": "url suffix",
    "quick_reply": "quick reply payload, optional",
    "copy_code": "coupon code",
    "flow": "flow token, optional",
    "catalog": "thumbnail SKU",
    "mpm": "thumbnail SKU",
}
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


class TemplatePart(Protocol):
    """What the mapping rules read of a template, or of one of its carousel cards."""

    @property
    def name(self) -> str: ...
    @property
    def header_format(self) -> str: ...
    @property
    def header_param(self) -> str: ...
    @property
    def header_example(self) -> str: ...
    @property
    def header_takes_param(self) -> bool: ...
    @property
    def body_param_count(self) -> int: ...
    @property
    def body_param_names(self) -> Any: ...
    @property
    def body_examples(self) -> Any: ...
    @property
    def buttons(self) -> Any: ...


@dataclass(frozen=True)
class CardPart:
    """One carousel card, read like a template (``template.cards[n]`` as parsed)."""

    name: str
    number: int  # 1-based, as a person counts cards
    header_format: str
    header_example: str
    body_param_count: int
    body_param_names: list[str]
    body_examples: Any
    buttons: list[dict[str, Any]]
    body_text: str = ""
    header_param: str = ""

    @property
    def header_takes_param(self) -> bool:
        return bool(self.header_format)


def template_cards(template: Template) -> list[CardPart]:
    """The template's carousel cards in order ([] without a carousel)."""
    cards: list[CardPart] = []
    for number, card in enumerate(template.cards or (), start=1):
        cards.append(
            CardPart(
                name=f"{template.name} card {number}",
                number=number,
                header_format=str(card.get("header_format") or ""),
                header_example=str(card.get("header_example") or ""),
                body_param_count=int(card.get("body_param_count") or 0),
                body_param_names=list(card.get("body_param_names") or []),
                body_examples=card.get("body_examples") or [],
                buttons=list(card.get("buttons") or []),
                body_text=str(card.get("body_text") or ""),
            )
        )
    return cards


def template_needs_catalog(template: Template) -> bool:
    """Whether a send names catalogue products (a product header, here or on a card)."""
    return template.header_format == HeaderFormat.PRODUCT or any(
        card.header_format == HeaderFormat.PRODUCT for card in template_cards(template)
    )


def template_mpm_button(template: Template) -> dict[str, Any] | None:
    """The multi-product button, whose products the mapping's ``sections`` list."""
    return next((b for b in template.buttons or () if b.get("sub_type") == "mpm"), None)


def template_offer_expires(template: Template) -> bool:
    """Whether each send of this limited-time offer gives its expiry."""
    return bool((template.offer or {}).get("has_expiration"))


def template_body_keys(template: TemplatePart) -> list[str]:
    if template.body_param_names:
        return [str(name) for name in template.body_param_names]
    return [str(i) for i in range(1, template.body_param_count + 1)]


def template_button_params(template: TemplatePart) -> dict[str, dict[str, Any]]:
    """Buttons that take a parameter, by index as a string ("1"): required or optional."""
    return {
        str(button["index"]): button
        for button in template.buttons or ()
        if button.get("param") in (PARAM_REQUIRED, PARAM_OPTIONAL)
    }


def template_param_slots(template: Template) -> list[dict[str, Any]]:
    """Every parameter a campaign can map for ``template``, in send order, for forms.

    ``{"path": [...], "label": ..., "section": ..., "key": ..., "required": bool,
    "kind": ..., "example": ...}``. ``path`` is where the source sits in the mapping
    (``["body", "1"]``, ``["cards", 0, "header"]``, ``["sections", 0, "items"]``);
    ``section`` and ``key`` are its first and last steps for the top-level header, body
    and buttons (``key`` None for the header).
    """
    slots = _part_slots(template, [], "")
    if template_offer_expires(template):
        slots.append(_slot(["offer"], "Offer expires", True, OFFER_KIND, "2026-12-31T23:59:00Z"))
    if template_needs_catalog(template):
        slots.append(_slot(["catalog"], "Catalogue id", True, "catalogue id", ""))
    if template_mpm_button(template) is not None:
        slots.append(_slot(["sections", 0, "title"], "Products title", True, "text", ""))
        slots.append(_slot(["sections", 0, "items"], "Products", True, "SKUs, comma-separated", ""))
    for card in template_cards(template):
        slots.extend(_part_slots(card, ["cards", card.number - 1], f"Card {card.number} "))
    return slots


def _slot(path: list[Any], label: str, required: bool, kind: str, example: Any) -> dict[str, Any]:
    return {
        "path": path,
        "label": label,
        "section": str(path[0]),
        "key": None if len(path) == 1 else path[-1],
        "required": required,
        "kind": kind,
        "example": example,
    }


def _part_slots(part: TemplatePart, prefix: list[Any], label: str) -> list[dict[str, Any]]:
    slots: list[dict[str, Any]] = []
    if part.header_takes_param:
        kind = _header_kind(part)
        slots.append(
            _slot([*prefix, "header"], f"{label}Header ({kind})", True, kind, part.header_example)
        )
    examples = part.body_examples
    for index, key in enumerate(template_body_keys(part)):
        if isinstance(examples, dict):
            example = examples.get(key, "")
        else:
            example = examples[index] if index < len(examples) else ""
        slots.append(
            _slot([*prefix, "body", key], f"{label}Body {{{{{key}}}}}", True, "text", example)
        )
    for key, button in template_button_params(part).items():
        role = _button_role(button)
        slots.append(
            _slot(
                [*prefix, "buttons", key],
                f"{label}Button {key} ({role})",
                button["param"] == PARAM_REQUIRED,
                role,
                button.get("example", ""),
            )
        )
    if prefix:  # a card's slots: section "cards", key the card's index
        for slot in slots:
            slot["section"], slot["key"] = "cards", prefix[1]
    return slots


def _header_kind(part: TemplatePart) -> str:
    kind = part.header_format.lower()
    if kind == "text":
        return "text"
    if kind == "product":
        return "product SKU"
    return f"{kind} link or media id"


def mapping_validate(template: Template, mapping: dict[str, Any]) -> None:
    """Raise ``ParamMappingError`` unless the mapping supplies exactly the template's params.

    Every body param, the header's parameter when the template has one, and every
    required button parameter must be mapped; quick reply payloads and Flow tokens may
    be; a carousel maps each of its cards the same way (exactly as many cards as Meta
    approved); a limited-time offer that expires maps ``offer``; product headers need the
    ``catalog``; a multi-product button its ``sections``; nothing else may be mapped.
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
    _part_validate(template, mapping, "")
    _cards_validate(template, mapping.get("cards"))
    _offer_validate(template, mapping.get("offer"))
    _catalog_validate(template, mapping.get("catalog"))
    _sections_validate(template, mapping.get("sections"))


def _unsupported_check(template: Template) -> None:
    reasons = template_unusable_reasons(template)
    if reasons:
        raise ParamMappingError(
            f"template {template} cannot be sent by this version: {'; '.join(reasons)}",
            section="template",
        )


def _part_validate(part: TemplatePart, mapping: dict[str, Any], where: str) -> None:
    _body_validate(part, mapping.get("body", {}), where)
    _header_validate(part, mapping.get("header"), where)
    _buttons_validate(part, mapping.get("buttons", {}), where)


def _cards_validate(template: Template, cards: Any) -> None:
    parts = template_cards(template)
    if not parts:
        if cards is not None:
            raise ParamMappingError(
                f"template {template.name} has no carousel; remove 'cards'",
                section="cards",
                unknown=["cards"],
            )
        return
    if not isinstance(cards, list) or len(cards) != len(parts):
        given = len(cards) if isinstance(cards, list) else 0
        raise ParamMappingError(
            f"template {template.name} is a carousel of {len(parts)} cards: map 'cards' "
            f"as a list of {len(parts)} (one per card, as approved), not {given}",
            section="cards",
        )
    for part, card in zip(parts, cards, strict=True):
        where = f"card {part.number}: "
        if not isinstance(card, dict):
            raise ParamMappingError(f"{where}expected an object with header, body, buttons")
        unknown = set(card) - set(CARD_SECTIONS)
        if unknown:
            raise ParamMappingError(
                f"{where}unknown mapping sections: {', '.join(sorted(unknown))}",
                section="cards",
                unknown=sorted(unknown),
            )
        _part_validate(part, card, where)


def _offer_validate(template: Template, offer: Any) -> None:
    if not template_offer_expires(template):
        if offer is not None:
            raise ParamMappingError(
                f"template {template.name} has no expiring offer; remove 'offer'",
                section="offer",
                unknown=["offer"],
            )
        return
    if offer is None:
        raise ParamMappingError(
            f"template {template.name} is a limited-time offer: map 'offer' to its expiry "
            "(a date and time such as 2026-12-31T23:59:00Z, or Unix milliseconds)",
            section="offer",
            missing=["offer"],
        )
    _source_check(offer, "offer")
    if "value" in offer and offer_expiry_ms(offer["value"]) is None:
        raise ParamMappingError(
            f"offer: {offer['value']!r} is not a date and time (2026-12-31T23:59:00Z) "
            "nor Unix milliseconds",
            section="offer",
        )


def _catalog_validate(template: Template, catalog: Any) -> None:
    if not template_needs_catalog(template):
        if catalog is not None:
            raise ParamMappingError(
                f"template {template.name} shows no catalogue product; remove 'catalog'",
                section="catalog",
                unknown=["catalog"],
            )
        return
    if catalog is None:
        raise ParamMappingError(
            f"template {template.name} shows catalogue products: map 'catalog' to the "
            "catalogue's id",
            section="catalog",
            missing=["catalog"],
        )
    _source_check(catalog, "catalog")


def _sections_validate(template: Template, sections: Any) -> None:
    if template_mpm_button(template) is None:
        if sections is not None:
            raise ParamMappingError(
                f"template {template.name} has no multi-product button; remove 'sections'",
                section="sections",
                unknown=["sections"],
            )
        return
    if not isinstance(sections, list) or not 1 <= len(sections) <= MAX_MPM_SECTIONS:
        raise ParamMappingError(
            f"template {template.name} has a multi-product button: map 'sections' as a list "
            f"of 1 to {MAX_MPM_SECTIONS} {{'title': SOURCE, 'items': SOURCE}} "
            "(items: SKUs separated by commas)",
            section="sections",
            missing=["sections"],
        )
    for number, section in enumerate(sections, start=1):
        if not isinstance(section, dict) or set(section) != {"title", "items"}:
            raise ParamMappingError(
                f"sections[{number}]: expected {{'title': SOURCE, 'items': SOURCE}}",
                section="sections",
            )
        _source_check(section["title"], f"sections[{number}] title")
        _source_check(section["items"], f"sections[{number}] items")
        items = section["items"].get("value")
        if items is not None and not sku_list(items):
            raise ParamMappingError(
                f"sections[{number}] items: list at least one SKU", section="sections"
            )


def _body_validate(template: TemplatePart, body: Any, where: str = "") -> None:
    if not isinstance(body, dict):
        raise ParamMappingError(
            f"{where}mapping 'body' must be an object of param -> source", section="body"
        )
    expected = template_body_keys(template)
    missing = [key for key in expected if key not in body]
    unknown = [key for key in body if key not in expected]
    if unknown:
        raise ParamMappingError(
            f"{where}template {template.name} has no body param(s) {', '.join(unknown)}; "
            f"it takes {', '.join(expected) or 'none'}",
            section="body",
            unknown=unknown,
            expected=expected,
        )
    if missing:
        raise ParamMappingError(
            f"{where}template {template.name} body param(s) {', '.join(missing)} are not mapped",
            section="body",
            missing=missing,
            expected=expected,
        )
    for key, source in body.items():
        _source_check(source, f"{where}body param {key}", click=True)


def _header_validate(template: TemplatePart, header: Any, where: str = "") -> None:
    if not template.header_takes_param:
        if header is not None:
            raise ParamMappingError(
                f"{where}template {template.name} has no header parameter; remove 'header'",
                section="header",
                unknown=["header"],
            )
        return
    kind = template.header_format.lower()
    if header is None:
        what = {"text": "its text", "product": "a product's SKU"}.get(kind, "a link or media id")
        raise ParamMappingError(
            f"{where}template {template.name} has a {kind} header: map 'header' to {what}",
            section="header",
            missing=["header"],
        )
    _source_check(header, f"{where}header")
    value = header.get("value")
    if template.header_format in _MEDIA_HEADERS and value is not None:
        if not (value.isdigit() or value.startswith(("https://", "http://"))):
            raise ParamMappingError(
                f"{where}header {kind}: {value!r} is neither a link (https://...) nor a media id",
                section="header",
            )


def _buttons_validate(template: TemplatePart, buttons: Any, where: str = "") -> None:
    if not isinstance(buttons, dict):
        raise ParamMappingError(
            f"{where}mapping 'buttons' must be an object of button index -> source",
            section="buttons",
        )
    params = template_button_params(template)
    unknown = [key for key in buttons if key not in params]
    if unknown:
        takes = ", ".join(f"{i} ({_button_role(b)})" for i, b in params.items()) or "none"
        raise ParamMappingError(
            f"{where}template {template.name} has no button {', '.join(unknown)} taking a "
            f"parameter; it takes {takes}",
            section="buttons",
            unknown=unknown,
            expected=list(params),
        )
    missing = [i for i, b in params.items() if b["param"] == PARAM_REQUIRED and i not in buttons]
    if missing:
        roles = " and ".join(dict.fromkeys(_button_role(params[i]) for i in missing))
        raise ParamMappingError(
            f"{where}template {template.name} button(s) {', '.join(missing)} need their "
            f"{roles} mapped",
            section="buttons",
            missing=missing,
            expected=list(params),
        )
    for key, source in buttons.items():
        url_button = params[key].get("sub_type") == "url"
        _source_check(source, f"{where}button {key}", click=url_button)
        value = source.get("value")
        if params[key].get("sub_type") == "copy_code" and value is not None:
            if not 1 <= len(value) <= MAX_COUPON_CODE:
                raise ParamMappingError(
                    f"{where}button {key}: a coupon code has 1 to {MAX_COUPON_CODE} "
                    f"characters, {value!r} has {len(value)}",
                    section="buttons",
                )


def _button_role(button: dict[str, Any]) -> str:
    return _BUTTON_ROLE_NAMES.get(str(button.get("sub_type")), "quick reply payload, optional")


def _source_check(source: Any, what: str, *, click: bool = False) -> None:
    """``{"field": NAME}``, ``{"field": NAME, "fallback": TEXT}`` (the text for a contact
    without that field) or ``{"value": TEXT}``; where ``click`` (a body parameter, a URL
    button's suffix) also ``{"click": true}``: the recipient's tracked link
    (whatsblast.core.tracked_links)."""
    if isinstance(source, dict) and "click" in source:
        if not click:
            raise ParamMappingError(
                f"{what}: a tracked link goes in a body parameter or a URL button, not here"
            )
        if source != {"click": True}:
            raise ParamMappingError(f"{what}: a tracked link is {{'click': true}}, nothing more")
        return
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
    """Every source in a (valid) mapping, cards and products included."""
    sources = _part_sources(mapping)
    for card in mapping.get("cards") or ():
        sources += _part_sources(card)
    for key in ("offer", "catalog"):
        if mapping.get(key) is not None:
            sources.append(mapping[key])
    for section in mapping.get("sections") or ():
        sources += [section["title"], section["items"]]
    return sources


def _part_sources(mapping: dict[str, Any]) -> list[dict[str, str]]:
    sources = list(mapping.get("body", {}).values()) + list(mapping.get("buttons", {}).values())
    if mapping.get("header") is not None:
        sources.append(mapping["header"])
    return sources


def mapping_has_click(mapping: dict[str, Any]) -> bool:
    """Whether a (valid) mapping puts a tracked link anywhere, cards included."""
    return any("click" in src for src in _sources(mapping))


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


def coupon_sources(template: Template, mapping: dict[str, Any]) -> list[dict[str, str]]:
    """The sources of the template's coupon codes (copy-code buttons), cards included."""
    parts: list[tuple[TemplatePart, dict[str, Any]]] = [(template, mapping)]
    parts += list(zip(template_cards(template), mapping.get("cards") or (), strict=False))
    return [
        source
        for part, part_mapping in parts
        for button, source in _mapped_buttons(part, part_mapping)
        if button.get("sub_type") == "copy_code"
    ]


def params_render(template: Template, mapping: dict[str, Any], contact: Contact) -> dict[str, Any]:
    """The rendered params for one contact (previews and tests; launch renders in SQL)."""

    def value(source: dict[str, str]) -> str:
        return _source_value(source, contact)

    catalog = value(mapping["catalog"]) if mapping.get("catalog") is not None else ""
    rendered = _part_render(template, mapping, value, catalog)
    mpm = template_mpm_button(template)
    if mpm is not None:
        for button in rendered.get("buttons", []):
            if button["sub_type"] == "mpm":
                button["sections"] = [
                    {"title": value(s["title"]), "items": value(s["items"])}
                    for s in mapping.get("sections") or ()
                ]
    if template_offer_expires(template):
        rendered["offer"] = {"expires": value(mapping["offer"])}
    cards = template_cards(template)
    if cards:
        rendered["cards"] = [
            _part_render(card, card_mapping, value, catalog)
            for card, card_mapping in zip(cards, mapping.get("cards") or (), strict=False)
        ]
    return rendered


def _part_render(
    part: TemplatePart, mapping: dict[str, Any], value: Any, catalog: str
) -> dict[str, Any]:
    values = {key: value(source) for key, source in mapping.get("body", {}).items()}
    keys = template_body_keys(part)
    rendered: dict[str, Any] = {}
    if part.header_takes_param:
        rendered["header"] = {"type": part.header_format.lower(), "value": value(mapping["header"])}
        if part.header_format == HeaderFormat.PRODUCT:
            rendered["header"]["catalog_id"] = catalog
        if name := header_param_name(part):
            rendered["header"]["name"] = name
    if part.body_param_names:
        rendered["body"] = {key: values[key] for key in keys}
    else:
        rendered["body"] = [values[key] for key in keys]
    buttons = _mapped_buttons(part, mapping)
    if buttons:
        rendered["buttons"] = [
            {"sub_type": b["sub_type"], "index": b["index"], "value": value(src)}
            for b, src in buttons
        ]
    return rendered


def _mapped_buttons(
    template: TemplatePart, mapping: dict[str, Any]
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """(button, source) for every mapped button, in index order.

    A Flow button is always sent: an unmapped one with Meta's default token, "unused".
    """
    params = template_button_params(template)
    chosen = dict(mapping.get("buttons", {}))
    for key, button in params.items():
        if button.get("sub_type") == "flow" and key not in chosen:
            chosen[key] = {"value": FLOW_TOKEN_UNUSED}
    return [(params[key], chosen[key]) for key in sorted(chosen, key=int) if key in params]


def _source_value(source: dict[str, str], contact: Contact) -> str:
    if "value" in source:
        return source["value"]
    if "click" in source:
        return CLICK_MARKER
    value = contact.field_value(source["field"])
    text = "" if value is None else str(value)
    return text if text.strip() else source.get("fallback", text)


# --- a journey's event properties -------------------------------------------------------
#
# A journey's send step may also map ``{"property": NAME}`` (``"fallback": TEXT`` for an
# instance without it): a property of the event that started the instance (a cart's URL
# suffix, an order id). The template rules above know only fields and values, so a journey
# checks its mapping with every property source read as a value, and renders it with each
# property source replaced by the instance's value first: the rules stay in this one home.

PROPERTY_SOURCE = "property"


def _is_property(source: Any) -> bool:
    return isinstance(source, dict) and PROPERTY_SOURCE in source


def property_source_errors(mapping: Any) -> list[str]:
    """Why a mapping's property sources are malformed ([] when they are fine)."""
    errors = []
    for source in _all_sources(mapping):
        if not _is_property(source):
            continue
        ok = (
            isinstance(source.get(PROPERTY_SOURCE), str)
            and bool(source[PROPERTY_SOURCE])
            and set(source) <= {PROPERTY_SOURCE, "fallback"}
            and isinstance(source.get("fallback", ""), str)
        )
        if not ok:
            errors.append(
                f"{source!r}: expected {{'property': NAME}} or {{'property': NAME, "
                "'fallback': TEXT}}"
            )
    return errors


def mapping_with_properties(mapping: Any, properties: dict[str, Any] | None) -> Any:
    """``mapping`` with each property source replaced by ``{"value": …}``: the instance's
    property (its fallback when blank or absent), or, with ``properties`` None (checking
    a definition), the property's name as a stand-in value."""
    if isinstance(mapping, list):
        return [mapping_with_properties(item, properties) for item in mapping]
    if not isinstance(mapping, dict):
        return mapping
    if _is_property(mapping):
        name = str(mapping.get(PROPERTY_SOURCE))
        if properties is None:
            return {"value": name}
        value = properties.get(name)
        text = "" if value is None else (value if isinstance(value, str) else json.dumps(value))
        return {"value": text if text.strip() else str(mapping.get("fallback", text))}
    return {key: mapping_with_properties(value, properties) for key, value in mapping.items()}


def mapped_properties(mapping: Any) -> list[str]:
    """The event properties a mapping reads."""
    return sorted({str(s[PROPERTY_SOURCE]) for s in _all_sources(mapping) if _is_property(s)})


def required_properties(mapping: Any) -> list[str]:
    """The properties read somewhere without a fallback: an instance must carry them."""
    return sorted(
        {
            str(s[PROPERTY_SOURCE])
            for s in _all_sources(mapping)
            if _is_property(s) and not str(s.get("fallback", "")).strip()
        }
    )


def _all_sources(mapping: Any) -> list[Any]:
    """Every dict with a source key anywhere in ``mapping`` (any section, cards)."""
    found: list[Any] = []
    if isinstance(mapping, dict):
        if {"field", "value", "click", PROPERTY_SOURCE} & set(mapping):
            return [mapping]
        for value in mapping.values():
            found += _all_sources(value)
    elif isinstance(mapping, list):
        for value in mapping:
            found += _all_sources(value)
    return found


def params_sql(
    template: Template, mapping: dict[str, Any], alias: str = "c"
) -> tuple[str, list[Any]]:
    """A SQL expression (over contact alias ``alias``) that renders the params as jsonb.

    Used by the launch's set-based INSERT so a million recipients render in the database
    rather than in a Python loop; it builds the same JSON as ``params_render``. Constants
    and attribute names travel as query parameters, never spliced into the SQL.
    """
    catalog = mapping.get("catalog")
    parts, args = _part_sql(template, mapping, alias, catalog)
    if template_offer_expires(template):
        source_sql, source_args = _source_sql(mapping["offer"], alias)
        parts.append(f"'offer', jsonb_build_object('expires', {source_sql})")
        args += source_args
    cards = template_cards(template)
    if cards:
        items = []
        for card, card_mapping in zip(cards, mapping.get("cards") or (), strict=False):
            card_parts, card_args = _part_sql(card, card_mapping, alias, catalog)
            items.append(f"jsonb_build_object({', '.join(card_parts)})")
            args += card_args
        parts.append(f"'cards', jsonb_build_array({', '.join(items)})")
    return f"jsonb_build_object({', '.join(parts)})", args


def _part_sql(
    part: TemplatePart, mapping: dict[str, Any], alias: str, catalog: Any
) -> tuple[list[str], list[Any]]:
    parts: list[str] = []
    args: list[Any] = []
    if part.header_takes_param:
        source_sql, source_args = _source_sql(mapping["header"], alias)
        extra_sql, extra_args = "", []
        if name := header_param_name(part):
            extra_sql, extra_args = ", 'name', %s::text", [name]
        if part.header_format == HeaderFormat.PRODUCT:
            catalog_sql, extra_args = _source_sql(catalog, alias)
            extra_sql = f", 'catalog_id', {catalog_sql}"
        parts.append(
            f"'header', jsonb_build_object('type', %s::text, 'value', {source_sql}{extra_sql})"
        )
        args += [part.header_format.lower(), *source_args, *extra_args]
    body_parts: list[str] = []
    named = bool(part.body_param_names)
    for key in template_body_keys(part):
        if named:
            body_parts.append("%s::text")
            args.append(key)
        source_sql, source_args = _source_sql(mapping["body"][key], alias)
        body_parts.append(source_sql)
        args += source_args
    builder = "jsonb_build_object" if named else "jsonb_build_array"
    parts.append(f"'body', {builder}({', '.join(body_parts)})")
    buttons = _mapped_buttons(part, mapping)
    if buttons:
        items = []
        for button, source in buttons:
            source_sql, source_args = _source_sql(source, alias)
            extra_sql, extra_args = "", []
            if button["sub_type"] == "mpm":
                extra_sql, extra_args = _sections_sql(mapping.get("sections") or [], alias)
            items.append(
                "jsonb_build_object('sub_type', %s::text, 'index', %s::int, "
                f"'value', {source_sql}{extra_sql})"
            )
            args += [button["sub_type"], int(button["index"]), *source_args, *extra_args]
        parts.append(f"'buttons', jsonb_build_array({', '.join(items)})")
    return parts, args


def _sections_sql(sections: list[dict[str, Any]], alias: str) -> tuple[str, list[Any]]:
    items: list[str] = []
    args: list[Any] = []
    for section in sections:
        title_sql, title_args = _source_sql(section["title"], alias)
        items_sql, items_args = _source_sql(section["items"], alias)
        items.append(f"jsonb_build_object('title', {title_sql}, 'items', {items_sql})")
        args += [*title_args, *items_args]
    return f", 'sections', jsonb_build_array({', '.join(items)})", args


def _source_sql(source: dict[str, str], alias: str) -> tuple[str, list[Any]]:
    if "value" in source:
        return "%s::text", [source["value"]]
    if "click" in source:
        return "%s::text", [CLICK_MARKER]
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
    formats = _campaign_only_formats(template)
    if formats:
        raise _problem(
            "template", f"Template is {formats}, which this API does not send: use a campaign."
        )
    rendered: dict[str, Any] = {}
    header = _rendered_header(template, params.get("header"))
    if header is not None:
        rendered["header"] = header
    rendered["body"] = _rendered_body(template, params.get("body"))
    buttons = _rendered_buttons(template, params.get("buttons") or [])
    if buttons:
        rendered["buttons"] = buttons
    return rendered


def _campaign_only_formats(template: Template) -> str:
    """Formats whose parameters only a campaign's mapping renders ("" when none)."""
    if template.cards:
        return "a carousel"
    if template_offer_expires(template):
        return "a limited-time offer"
    if template_needs_catalog(template) or template_mpm_button(template) is not None:
        return "a catalogue product message"
    return ""


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


def header_param_name(template: TemplatePart) -> str:
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
