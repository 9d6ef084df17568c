"""Stored JSON shown as tables people can read, not as raw JSON.

``json_table`` renders a dict as two columns (name, value), a list of dicts as rows with
one column per key, and anything nested the same way inside its cell. Every value is
escaped; nothing from the data reaches the page as markup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

MAX_ROWS = 200  # a webhook body or a history longer than this is cut, with a note


def _label(key: Any) -> str:
    return str(key).replace("_", " ")


def json_table(value: Any, *, empty: str = "—") -> SafeString:
    if value is None or value == "" or value == {} or value == []:
        return format_html('<span class="wb-muted">{}</span>', empty)
    if isinstance(value, dict):
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td></tr>",
            ((_label(k), json_table(v)) for k, v in list(value.items())[:MAX_ROWS]),
        )
        return format_html('<table class="wb-kv">{}</table>', rows)
    if isinstance(value, list):
        if all(isinstance(item, dict) for item in value):
            keys: list[str] = []
            for item in value[:MAX_ROWS]:
                keys += [k for k in item if k not in keys]
            head = format_html_join("", "<th>{}</th>", ((_label(k),) for k in keys))
            body = format_html_join(
                "",
                "<tr>{}</tr>",
                (
                    (
                        format_html_join(
                            "", "<td>{}</td>", ((json_table(item.get(k), empty=""),) for k in keys)
                        ),
                    )
                    for item in value[:MAX_ROWS]
                ),
            )
            more = (
                format_html('<p class="wb-muted">{} more not shown.</p>', len(value) - MAX_ROWS)
                if len(value) > MAX_ROWS
                else mark_safe("")  # noqa: S308 - a constant
            )
            return format_html(
                '<table class="wb-rows"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>{}',
                head,
                body,
                more,
            )
        return format_html_join(", ", "{}", ((json_table(item),) for item in value[:MAX_ROWS]))
    if isinstance(value, bool):
        return format_html("{}", "yes" if value else "no")
    if isinstance(value, str) and _ISO_TIME_RE.match(value):
        return format_html("{}", time_text(value))
    return format_html("{}", value)


# A time stored as text in JSON (an attempt's "at": 2026-12-01T08:07:03.123456+00:00).
_ISO_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def time_text(value: str) -> str:
    """A stored ISO time as every page writes one: 2026-12-01 08:07:03 UTC in the viewer's
    zone (whatsblast.auth.time_zone), seconds kept (attempts are seconds apart), never the
    microseconds; text that is not a time is returned as it is."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return date_format(timezone.localtime(moment), "Y-m-d H:i:s T")


def mapping_table(mapping: dict[str, Any]) -> SafeString:
    """A campaign's parameter mapping: each parameter and where its text comes from."""
    rows: list[tuple[str, str]] = []

    def source_text(source: dict[str, Any]) -> str:
        if "value" in source:
            return f"the text “{source['value']}” for everyone"
        if "click" in source:
            return "the recipient's tracked link"
        text = f"contact field “{source.get('field', '')}”"
        if source.get("fallback"):
            text += f", or “{source['fallback']}” when a contact has none"
        return text

    if mapping.get("header"):
        rows.append(("Header", source_text(mapping["header"])))
    for key, source in (mapping.get("body") or {}).items():
        rows.append((f"Body {{{{{key}}}}}", source_text(source)))
    for key, source in (mapping.get("buttons") or {}).items():
        # Meta numbers buttons from 0; people count them from 1, as the template shows them.
        number = int(key) + 1 if str(key).isdigit() else key
        rows.append((f"Button {number}", source_text(source)))
    if not rows:
        return format_html('<span class="wb-muted">{}</span>', "No parameters.")
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
    return format_html('<table class="wb-kv" id="wb-mapping-table">{}</table>', body)


def replies_table(replies: Sequence[Any]) -> SafeString:
    """What a recipient wrote back (``webhooks.selectors.Reply``), newest first."""
    if not replies:
        return format_html('<span class="wb-muted">{}</span>', "No reply.")
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                date_format(timezone.localtime(r.sent_at), "Y-m-d H:i T"),
                r.text or f"({r.type}, no text)",
                f"button payload “{r.button_payload}”" if r.button_payload else "",
                "opted out" if r.is_opt_out else "",
            )
            for r in replies
        ),
    )
    return format_html('<table class="wb-rows" id="wb-message-replies">{}</table>', rows)
