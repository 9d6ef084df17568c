"""Recording a template of a number's account by hand (the sync records Meta's own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from campaigns.catalogue.components import components_parse
from campaigns.catalogue.numbers import phone_number_get
from campaigns.catalogue.params import PLACEHOLDER_RE, template_params_parse
from campaigns.models import HeaderFormat, Template, TemplateCategory, TemplateStatus

MEDIA_HEADERS = (HeaderFormat.IMAGE, HeaderFormat.VIDEO, HeaderFormat.DOCUMENT)
# Meta's limits on a template's buttons (WhatsApp Business Management API, "Buttons").
MAX_BUTTONS = 10
MAX_URL_BUTTONS = 2
MAX_PHONE_BUTTONS = 1
MAX_BUTTON_TEXT = 25


@dataclass(frozen=True)
class UrlButton:
    text: str
    url: str  # may end in {{1}}: the part each send supplies
    example: str = ""  # the whole URL with a sample value, required when url has {{1}}


@dataclass(frozen=True)
class TemplateExtras:
    """What a template typed by hand carries besides its body: a media header (its
    format and an example link) and its buttons."""

    header_format: str = HeaderFormat.NONE
    header_example: str = ""
    quick_replies: list[str] = field(default_factory=list)
    url_buttons: list[UrlButton] = field(default_factory=list)
    phone_buttons: list[tuple[str, str]] = field(default_factory=list)  # (text, +phone)


def template_add(
    *,
    phone_number_id: str,
    name: str,
    language: str,
    body_text: str = "",
    category: str = TemplateCategory.MARKETING,
    status: str = TemplateStatus.APPROVED,
    extras: TemplateExtras | None = None,
) -> Template:
    """Record a template of the number's WABA, with its body params parsed from the body
    and, given ``extras``, its header and buttons as Meta's components (read back the way
    the sync reads Meta's own, so a campaign sees it as it would see Meta's copy)."""
    number = phone_number_get(phone_number_id)
    count, names = template_params_parse(body_text)
    components = template_components(body_text, extras or TemplateExtras())
    parsed = components_parse(components)
    if parsed.problems:
        raise ValidationError("; ".join(parsed.problems))
    template = Template(
        account=number.account,
        name=name.strip(),
        language=language.strip(),
        category=category.upper(),
        status=status.upper(),
        body_text=body_text,
        body_param_count=count,
        body_param_names=names,
        header_format=parsed.header_format,
        header_example=parsed.header_example,
        buttons=parsed.buttons,
        cards=parsed.cards,
        offer=parsed.offer,
        components=components,
    )
    template.full_clean()
    template.save()
    return template


def template_components(body_text: str, extras: TemplateExtras) -> list[dict[str, Any]]:
    """Meta's ``components`` for a body and ``extras``: a HEADER with its example link, the
    BODY, and one BUTTONS component (quick replies first, then URL and phone buttons: Meta
    wants quick replies grouped apart from the others)."""
    components: list[dict[str, Any]] = []
    if extras.header_format:
        if extras.header_format not in MEDIA_HEADERS:
            raise ValidationError(
                f"a header here is an image, a video or a document, not {extras.header_format!r}"
            )
        _check_url(extras.header_example, "the header's example")
        components.append(
            {
                "type": "HEADER",
                "format": extras.header_format,
                "example": {"header_handle": [extras.header_example]},
            }
        )
    components.append({"type": "BODY", "text": body_text})
    buttons = _buttons(extras)
    if buttons:
        components.append({"type": "BUTTONS", "buttons": buttons})
    return components


def _buttons(extras: TemplateExtras) -> list[dict[str, Any]]:
    count = len(extras.quick_replies) + len(extras.url_buttons) + len(extras.phone_buttons)
    if count > MAX_BUTTONS:
        raise ValidationError(f"a template has at most {MAX_BUTTONS} buttons, not {count}")
    if len(extras.url_buttons) > MAX_URL_BUTTONS:
        raise ValidationError(f"a template has at most {MAX_URL_BUTTONS} URL buttons")
    if len(extras.phone_buttons) > MAX_PHONE_BUTTONS:
        raise ValidationError(f"a template has at most {MAX_PHONE_BUTTONS} phone button")
    buttons: list[dict[str, Any]] = [
        {"type": "QUICK_REPLY", "text": _button_text(text)} for text in extras.quick_replies
    ]
    for button in extras.url_buttons:
        buttons.append(_url_button(button))
    for text, phone in extras.phone_buttons:
        digits = phone.removeprefix("+")
        if not phone.startswith("+") or not digits.isdigit() or not 7 <= len(digits) <= 15:
            raise ValidationError(
                f"a phone button's number is +country code and digits, not {phone!r}"
            )
        buttons.append({"type": "PHONE_NUMBER", "text": _button_text(text), "phone_number": phone})
    return buttons


def _url_button(button: UrlButton) -> dict[str, Any]:
    _check_url(button.url, f"the URL of button {button.text!r}")
    variables = PLACEHOLDER_RE.findall(button.url)
    shaped: dict[str, Any] = {"type": "URL", "text": _button_text(button.text), "url": button.url}
    if not variables:
        return shaped
    if variables != ["1"] or not button.url.endswith("{{1}}"):
        raise ValidationError(
            f"a URL button's variable is one {{{{1}}}} at the end of its URL: {button.url!r}"
        )
    if not button.example:
        raise ValidationError(
            f"the URL of button {button.text!r} has a variable: "
            "give an example URL with a value in its place"
        )
    _check_url(button.example, f"the example URL of button {button.text!r}")
    shaped["example"] = [button.example]
    return shaped


def _button_text(text: str) -> str:
    text = text.strip()
    if not text or len(text) > MAX_BUTTON_TEXT:
        raise ValidationError(f"a button's text is 1 to {MAX_BUTTON_TEXT} characters: {text!r}")
    return text


def _check_url(url: str, what: str) -> None:
    if not url.startswith(("https://", "http://")):
        raise ValidationError(f"{what} must be an http(s) URL, not {url!r}")
