"""Tracked links in a message's parameters: a marker at launch, the recipient's token at send.

A campaign maps a slot to the click source (``{"click": true}``: a URL button's suffix, or
a body parameter). The launch renders every row's parameters in one statement, before the
row has the id its token is made from, so the slot holds ``CLICK_MARKER``; the sender,
which has the id, puts the token in as it builds the request: a URL button's suffix
becomes the token itself (its approved URL is ``CLICK_BASE_URL/{{1}}``), any other text
the whole link ``CLICK_BASE_URL/<token>``. Only parameters holding the marker change.
"""

from __future__ import annotations

from typing import Any

# What a click slot holds until the send: no contact field renders to it by accident
# (and if one did, the recipient would get their own tracked link, nobody else's).
CLICK_MARKER = "{{wb:click}}"


def params_tracked(params: dict[str, Any], *, token: str, base_url: str) -> dict[str, Any]:
    """``params`` with each click slot filled for ``token`` (the same dict when it has none)."""
    link = f"{base_url.rstrip('/')}/{token}"
    changed, result = _fill(params, token=token, link=link)
    return result if changed else params


def params_have_click(params: dict[str, Any]) -> bool:
    """Whether ``params`` holds a click slot."""
    return _fill(params, token="", link="")[0]


def _fill(value: Any, *, token: str, link: str) -> tuple[bool, Any]:
    if isinstance(value, str):
        if CLICK_MARKER not in value:
            return False, value
        return True, value.replace(CLICK_MARKER, link)
    if isinstance(value, dict):
        if value.get("sub_type") == "url" and value.get("value") == CLICK_MARKER:
            return True, {**value, "value": token}
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            item_changed, out[key] = _fill(item, token=token, link=link)
            changed |= item_changed
        return changed, out if changed else value
    if isinstance(value, list):
        changed = False
        items = []
        for item in value:
            item_changed, filled = _fill(item, token=token, link=link)
            changed |= item_changed
            items.append(filled)
        return changed, items if changed else value
    return False, value
