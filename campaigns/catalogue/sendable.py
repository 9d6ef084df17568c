"""Which of Meta's template kinds this version can send (pure, no I/O): it fails closed.

``GET message_templates`` tells the kinds apart by top-level component (``HEADER``,
``BODY``, ``FOOTER``, ``BUTTONS``, ``CAROUSEL``, ``LIMITED_TIME_OFFER``,
``CALL_PERMISSION_REQUEST``), by header format and by button type (QUICK_REPLY, URL,
PHONE_NUMBER, COPY_CODE, OTP, FLOW, CATALOG, MPM, SPM, VOICE_CALL, REQUEST_CONTACT_INFO).
The send path (``delivery.cloud.client.build_components``) builds every one of them a
campaign can send: text, media and product headers, the body, carousel cards, a
limited-time offer's expiry and each button's parameter. A one-time-password button
belongs to authentication templates, which only the transactional API sends. Anything
else (a GIF header, a kind Meta adds later) would go out without its component and be
refused by Meta on the campaign's first send, so a template holding it is unusable here,
with the reason, until someone teaches the send path to build it.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import Template

# Top-level components a send can satisfy (FOOTER never takes a parameter).
SENDABLE_COMPONENTS = frozenset(
    {"HEADER", "BODY", "FOOTER", "BUTTONS", "CAROUSEL", "LIMITED_TIME_OFFER",
     "CALL_PERMISSION_REQUEST"}
)  # fmt: skip
SENDABLE_HEADER_FORMATS = frozenset({"TEXT", "IMAGE", "VIDEO", "DOCUMENT", "PRODUCT"})
SENDABLE_BUTTONS = frozenset(
    {"QUICK_REPLY", "URL", "PHONE_NUMBER", "COPY_CODE", "FLOW", "CATALOG", "MPM", "SPM",
     "VOICE_CALL", "REQUEST_CONTACT_INFO"}
)  # fmt: skip

LOCATION_HEADER = "a location header needs a parameter campaigns cannot send"


def components_unsupported(components: Any) -> list[str]:
    """Why a template with Meta's ``components`` cannot be sent by this version ([] if it can).

    ``components`` is the list as ``GET message_templates`` gave it (types in either case);
    anything that is not a list of objects reads as no components.
    """
    reasons: list[str] = []
    for component in components if isinstance(components, list) else ():
        if not isinstance(component, dict):
            continue
        kind = str(component.get("type") or "").upper()
        if kind == "HEADER":
            reasons.extend(_header_unsupported(str(component.get("format") or "TEXT")))
        elif kind == "BUTTONS":
            for button in component.get("buttons") or ():
                if isinstance(button, dict):
                    reasons.extend(_button_unsupported(str(button.get("type") or "")))
        elif kind == "CAROUSEL":
            for card in component.get("cards") or ():
                if isinstance(card, dict):
                    reasons.extend(components_unsupported(card.get("components")))
        elif kind not in SENDABLE_COMPONENTS:
            reasons.append(_component_reason(kind))
    return list(dict.fromkeys(reasons))


def template_unusable_reasons(template: Template) -> list[str]:
    """Why campaigns cannot send ``template`` ([] if they can): its stored components, and
    for rows typed by hand (no components) the header and buttons recorded on the row."""
    reasons = components_unsupported(template.components)
    reasons.extend(_unparsed(template))
    reasons.extend(_header_unsupported(template.header_format or "TEXT"))
    for button in template.buttons or ():
        if isinstance(button, dict):
            reasons.extend(_button_unsupported(str(button.get("type") or "")))
    return list(dict.fromkeys(reasons))


def _unparsed(template: Template) -> list[str]:
    """A carousel or an expiring offer in the components that the row does not carry
    parsed (a row written before this version read them): sent as it is, it would go out
    without its cards or expiry, so it waits for the next template sync."""
    kinds = {
        str(c.get("type") or "").upper() for c in template.components or () if isinstance(c, dict)
    }
    if "CAROUSEL" in kinds and not template.cards:
        return ["its carousel cards are not read yet: sync the templates"]
    if "LIMITED_TIME_OFFER" in kinds and not template.offer:
        return ["its limited-time offer is not read yet: sync the templates"]
    return []


def _component_reason(kind: str) -> str:
    return f"templates with a {kind or 'nameless'} component are not supported yet"


def _header_unsupported(fmt: str) -> list[str]:
    fmt = fmt.upper()
    if fmt in SENDABLE_HEADER_FORMATS or fmt in ("", "NONE"):
        return []
    if fmt == "LOCATION":
        return [LOCATION_HEADER]
    return [f"{fmt} headers are not supported yet"]


def _button_unsupported(kind: str) -> list[str]:
    kind = kind.upper()
    if kind in SENDABLE_BUTTONS:
        return []
    return [f"{kind or 'nameless'} buttons are not supported yet"]
