"""An API send's template params against the template: exactly what it takes, or a 422.

The request carries params in the rendered format ``Message.params`` holds (see
campaigns.params); the template's catalogue fields (``body_param_count`` /
``body_param_names``, ``header_format`` / ``header_param``, ``buttons``) say what it takes.
The result is rendered from the template: the header's type and each button's sub_type
come from the template, so a request cannot send a shape Meta would refuse with 132000.

One difference from campaigns: a one-time-password button (authentication templates, the
main use of this API) takes the code as a URL-style text parameter, which the Cloud API
client builds, so it is accepted here although campaigns cannot fill it.
"""

from __future__ import annotations

from typing import Any

from campaigns.models import HeaderFormat, Template
from campaigns.params import template_body_keys
from campaigns.template_components import PARAM_OPTIONAL, PARAM_REQUIRED
from delivery.api.errors import ApiProblem

# Button type -> (sub_type the send uses, whether its parameter is required).
_OTP_BUTTON = ("url", True)


def params_for_template(template: Template, params: dict[str, Any]) -> dict[str, Any]:
    """The params to store and send; raises a 422 ``ApiProblem`` when they do not fit."""
    rendered: dict[str, Any] = {}
    header = _header(template, params.get("header"))
    if header is not None:
        rendered["header"] = header
    rendered["body"] = _body(template, params.get("body"))
    buttons = _buttons(template, params.get("buttons") or [])
    if buttons:
        rendered["buttons"] = buttons
    return rendered


def _problem(section: str, message: str) -> ApiProblem:
    return ApiProblem(
        422,
        "template_params_mismatch",
        message,
        fields={f"template.params.{section}": message},
    )


def _body(template: Template, body: Any) -> list[str] | dict[str, str]:
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


def _header(template: Template, header: Any) -> dict[str, str] | None:
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
    return {"type": kind, "value": value}


def _button_roles(template: Template) -> dict[int, tuple[str, bool]]:
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


def _buttons(template: Template, buttons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = _button_roles(template)
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
