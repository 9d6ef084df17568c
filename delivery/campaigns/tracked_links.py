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

from campaigns.catalogue.params import template_button_params
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
    for template, mapping in templates:
        buttons = template_button_params(template)
        for key, source in (mapping.get("buttons") or {}).items():
            url = str(buttons.get(str(key), {}).get("url") or "")
            if "click" in source and base and not url.startswith(f"{base}/"):
                errors.append(
                    f"template {template.name} button {key} was approved as {url or 'no URL'}; "
                    f"a tracked button's URL is {base}/{{{{1}}}}"
                )
    return errors
