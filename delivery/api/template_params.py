"""An API send's template params against the template: exactly what it takes, or a 422.

The rules are the catalogue's (``campaigns.catalogue.params.rendered_params_check``); this
turns their refusal into the API's problem document.
"""

from __future__ import annotations

from typing import Any

from campaigns.catalogue.params import TemplateParamsError, rendered_params_check
from campaigns.models import Template
from delivery.api.errors import ApiProblem


def params_for_template(template: Template, params: dict[str, Any]) -> dict[str, Any]:
    """The params to store and send; raises a 422 ``ApiProblem`` when they do not fit."""
    try:
        return rendered_params_check(template, params)
    except TemplateParamsError as exc:
        raise ApiProblem(
            422,
            "template_params_mismatch",
            str(exc),
            fields={f"template.params.{exc.section}": str(exc)},
        ) from exc
