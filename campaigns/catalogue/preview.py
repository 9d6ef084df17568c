"""The message a campaign would send, rendered for a few sample contacts while it is mapped.

The create page asks after every change to the mapping. The params come from
``campaigns.catalogue.params.params_render`` (what the launch renders in SQL), then go into the
template's text the way WhatsApp shows it: ``{{1}}`` in the body replaced by the first
body param, the header's placeholder by the header param, a URL button's ``{{1}}`` by its
suffix. A mapping still being filled in renders too: a param not mapped yet shows as its
placeholder, so the person sees what is left to map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import connection

from campaigns.catalogue.params import (
    ParamMappingError,
    mapping_validate,
    params_render,
    placeholders_fill,
    template_cards,
    template_param_slots,
)
from campaigns.models import Contact, HeaderFormat, ListMembership, Template
from whatsblast.core.template_values import offer_expiry_ms, sku_list
from whatsblast.core.tracked_links import CLICK_MARKER

SAMPLE_CONTACTS = 3
# Contacts whose attribute keys are offered as mappable fields: enough to see every
# column of an import (they all share the same keys) without reading a whole list.
FIELD_SAMPLE = 200


def sample_contacts(*, list_ids: Sequence[int], limit: int = SAMPLE_CONTACTS) -> list[Contact]:
    """The first contacts (by id) of the lists that a launch would send to."""
    members = ListMembership.objects.filter(contact_list_id__in=list_ids).values("contact_id")
    return list(
        Contact.objects.filter(pk__in=members, opted_out_at__isnull=True).order_by("pk")[:limit]
    )


# The attribute keys of the first contacts of the lists (an import gives every contact
# the same keys, so a small sample finds them all).
_FIELDS_SQL = """
SELECT DISTINCT jsonb_object_keys(c.attributes)
  FROM (SELECT attributes FROM campaigns_contact
         WHERE id IN (SELECT contact_id FROM campaigns_listmembership
                       WHERE contact_list_id = ANY(%s))
         ORDER BY id LIMIT %s) AS c
 WHERE jsonb_typeof(c.attributes) = 'object'
"""


def contact_fields(*, list_ids: Sequence[int]) -> list[str]:
    """Fields a param can be mapped to: the contact's columns and its attribute keys."""
    keys: list[str] = []
    if list_ids:
        with connection.cursor() as cursor:
            cursor.execute(_FIELDS_SQL, [list(list_ids), FIELD_SAMPLE])
            keys = sorted(row[0] for row in cursor.fetchall())
    return ["name", "phone", *keys]


def _clean_source(source: Any) -> dict[str, str] | None:
    """A well-formed source, or None (a half-typed mapping sends blanks and junk)."""
    if not isinstance(source, dict) or not 1 <= len(source) <= 2:
        return None
    if source.get("click") is True:
        return {"click": True}  # type: ignore[dict-item]
    if isinstance(source.get("field"), str) and source["field"].strip():
        fallback = source.get("fallback")
        if isinstance(fallback, str) and fallback.strip():
            return {"field": source["field"].strip(), "fallback": fallback}
        return {"field": source["field"].strip()}
    if isinstance(source.get("value"), str):
        return {"value": source["value"]}
    return None


def _completed(
    slots: list[dict[str, Any]], mapping: Any, *, examples: bool
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """A mapping with every required slot filled, and the sources actually mapped.

    A slot not mapped yet shows its placeholder (``{{2}}``). For the example preview
    (no contacts) a contact field shows Meta's example for the slot, or ``[field]``.
    """
    mapping = mapping if isinstance(mapping, dict) else {}
    complete: dict[str, Any] = {"body": {}}
    mapped: list[dict[str, str]] = []
    for slot in slots:
        path = slot["path"]
        source = _clean_source(_path_get(mapping, path))
        if source is not None:
            mapped.append(source)
            if examples and "field" in source:
                source = {"value": str(slot["example"] or f"[{source['field']}]")}
        elif slot["required"]:
            source = {"value": "{{%s}}" % (path[-1] if len(path) > 1 else path[0])}
        else:
            continue
        _path_set(complete, path, source)
    return complete, mapped


def _path_get(node: Any, path: list[Any]) -> Any:
    for step in path:
        if isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            node = node[step]
        elif isinstance(step, str) and isinstance(node, dict):
            node = node.get(step)
        else:
            return None
    return node


def _path_set(root: dict[str, Any], path: list[Any], value: Any) -> None:
    node: Any = root
    for step, following in zip(path, [*path[1:], None], strict=True):
        if following is None:
            node[step] = value
            return
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(node, list):
            while len(node) <= step:
                node.append([] if isinstance(following, int) else {})
            node = node[step]
        else:
            node = node.setdefault(step, empty)


def _part_render(part: Any, params: dict[str, Any]) -> dict[str, Any]:
    """One template or card's header, body and buttons as the recipient reads them."""
    body = params.get("body", [])

    def body_value(name: str) -> Any:
        if isinstance(body, dict):
            return body.get(name)
        index = int(name) - 1 if name.isdigit() else -1
        return body[index] if 0 <= index < len(body) else None

    header = ""
    header_param = params.get("header", {}).get("value", "")
    header_format = part.header_format
    media = ""
    if header_format == HeaderFormat.TEXT:
        header = placeholders_fill(getattr(part, "header_text", ""), lambda _: str(header_param))
    elif header_format in (HeaderFormat.IMAGE, HeaderFormat.VIDEO):
        media = str(header_param)
        header = f"[{header_format.lower()}] {header_param}".strip()
    elif header_format:
        header = f"[{header_format.lower()}] {header_param}".strip()
    values = {b["index"]: b for b in params.get("buttons", [])}
    buttons = []
    for button in part.buttons or ():
        url = str(button.get("url", ""))
        given = values.get(button.get("index"), {})
        if url and "value" in given:
            suffix = str(given["value"])
            url = placeholders_fill(url, lambda _, suffix=suffix: suffix)
        kind = str(button.get("type", "")).upper()
        text = button.get("text", "") or _BUTTON_TEXTS.get(kind, kind.replace("_", " ").title())
        shown: dict[str, Any] = {"text": text, "url": url, "kind": kind.lower()}
        if kind == "COPY_CODE":
            shown["code"] = str(given.get("value", ""))
        if kind == "MPM":
            shown["products"] = [
                {"title": s.get("title", ""), "items": sku_list(str(s.get("items", "")))}
                for s in given.get("sections", [])
            ]
        buttons.append(shown)
    return {
        "header": header,
        "media": media,
        "header_format": header_format.lower(),
        "body": placeholders_fill(getattr(part, "body_text", ""), body_value),
        "buttons": buttons,
    }


def _tracked_shown(rendered: dict[str, Any]) -> dict[str, Any]:
    """A tracked link as the preview shows it: the link's start and "…" for the token each
    recipient gets at the send (the marker itself means nothing to a person)."""
    base = str(settings.CLICK_BASE_URL or "").rstrip("/")
    link = f"{base}/…" if base else "[tracked link]"

    def shown(value: Any, *, suffix: bool = False) -> Any:
        if isinstance(value, str):
            return value.replace(CLICK_MARKER, "…" if suffix else link)
        if isinstance(value, list):
            return [shown(item) for item in value]
        if isinstance(value, dict):
            return {k: shown(v, suffix=k == "url") for k, v in value.items()}
        return value

    result: dict[str, Any] = shown(rendered)
    return result


# Buttons Meta approves without a text of the template's own.
_BUTTON_TEXTS = {"COPY_CODE": "Copy offer code", "SPM": "View", "CATALOG": "View catalog"}


def message_render(template: Template, params: dict[str, Any]) -> dict[str, Any]:
    """Header, body, buttons, a carousel's cards and an offer as the recipient reads them."""
    rendered = _part_render(template, params)
    cards = template_cards(template)
    rendered["cards"] = [
        _part_render(card, card_params)
        for card, card_params in zip(cards, params.get("cards", []), strict=False)
    ]
    if template.offer:
        expires = str(params.get("offer", {}).get("expires", ""))
        expiry_ms = offer_expiry_ms(expires) if expires else None
        rendered["offer"] = {
            "text": template.offer.get("text", ""),
            "expires": expires,
            "expires_ms": expiry_ms,
        }
    return rendered


def message_preview(
    *, template: Template, mapping: Any, contacts: Sequence[Contact]
) -> dict[str, Any]:
    """The template's slots, the mapping's problem if any, and the message per contact.

    Without contacts the preview uses Meta's example values, so a template can be seen
    before a list is chosen.
    """
    slots = template_param_slots(template)
    error = None
    try:
        mapping_validate(template, mapping)
    except ParamMappingError as exc:
        error = str(exc)
    samples = []
    if contacts:
        complete, mapped = _completed(slots, mapping, examples=False)
        # A field with a fallback is never missing: the fallback stands in.
        fields = [s["field"] for s in mapped if "field" in s and not s.get("fallback")]
        for contact in contacts:
            missing = [f for f in fields if contact.field_value(f) in (None, "")]
            rendered = message_render(template, params_render(template, complete, contact))
            rendered = _tracked_shown(rendered)
            samples.append(
                {"to": contact.recipient, "name": contact.name, "missing": missing, **rendered}
            )
    else:
        complete, _ = _completed(slots, mapping, examples=True)
        example = Contact(phone="", name="")
        rendered = _tracked_shown(
            message_render(template, params_render(template, complete, example))
        )
        samples.append({"to": "", "name": "Meta's example values", "missing": [], **rendered})
    return {"slots": slots, "error": error, "samples": samples}
