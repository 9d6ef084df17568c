"""Whether a campaign's tracked links can work: checked by the launch and the pre-flight.

A mapping slot ``{"click": true}`` becomes each recipient's link (whatsblast.core
.tracked_links); the link is only worth sending when a click can be answered and sent on:

* ``CLICK_BASE_URL`` is set (the address this deployment answers clicks at);
* the campaign has a valid destination (whatsblast.core.link_destinations);
* a URL button carrying the token was approved as ``CLICK_BASE_URL/{{1}}``: its suffix is
  the token, so any other approved address would send people somewhere that knows nothing
  of the token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings

from campaigns.catalogue.params import TemplatePart, template_button_params, template_cards
from campaigns.models import Campaign, Template
from whatsblast.core.link_destinations import link_destination_errors


def tracked_link_errors(
    campaign: Campaign, templates: Sequence[tuple[Template, dict[str, Any]]]
) -> list[str]:
    """Why the tracked links of ``templates`` (each with its mapping) cannot work; []."""
    errors: list[str] = []
    base = str(settings.CLICK_BASE_URL or "").rstrip("/")
    if not base:
        errors.append(
            "a tracked link needs CLICK_BASE_URL: the address this deployment answers "
            "clicks at, e.g. https://go.example.com/c"
        )
    destination = campaign.link_destination.strip()
    if not destination:
        errors.append("a tracked link needs a destination: where a click sends people")
    else:
        errors += [f"tracked link destination: {e}" for e in link_destination_errors(destination)]
    if not base:
        return errors
    expected = f"{base}/{{{{1}}}}"
    for template, mapping in templates:
        parts: list[tuple[str, TemplatePart, dict[str, Any]]] = [("", template, mapping)]
        cards = zip(template_cards(template), mapping.get("cards") or (), strict=False)
        parts += [(f"card {i} ", card, m) for i, (card, m) in enumerate(cards)]
        for where, part, part_mapping in parts:
            buttons = template_button_params(part)
            for key, source in (part_mapping.get("buttons") or {}).items():
                url = str(buttons.get(str(key), {}).get("url") or "")
                if isinstance(source, dict) and "click" in source and url != expected:
                    errors.append(
                        f"template {template.name} {where}button {key} was approved as "
                        f"{url or 'no URL'}; a tracked button's URL is {expected}"
                    )
    return errors
