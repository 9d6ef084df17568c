"""Request bodies and headers as typed values; every refusal names the field it concerns.

Pure functions, no database: what can be decided from the request alone is decided here
(400), what needs the database (scope, template, service window) is the service's (403,
422). Every string that may reach PostgreSQL is checked for what it cannot store (NUL,
unpaired surrogates), so no input turns into a database error.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import phonenumbers

from delivery.api.errors import ApiProblem, invalid_fields
from delivery.cloud.client import is_user_id
from whatsblast.core.storable import UNSTORABLE, text_storable

MAX_NAME = 512  # Template.name
MAX_LANGUAGE = 16  # Template.language
MAX_PHONE_NUMBER_ID = 64  # PhoneNumber.phone_number_id
MAX_TO = 140  # Message.to: a phone, or a business-scoped user id
MAX_TEXT = 4096  # Meta's limit for a text message body
MAX_PARAM = 1024
MAX_BODY_PARAMS = 100
MAX_BUTTONS = 10
MAX_IDEMPOTENCY_KEY = 255
HEADER_TYPES = ("text", "image", "video", "document")
BUTTON_SUB_TYPES = ("quick_reply", "url")
TOP_LEVEL_FIELDS = frozenset({"phone_number_id", "to", "template", "text"})
TEMPLATE_FIELDS = frozenset({"name", "language", "params"})
PARAM_SECTIONS = frozenset({"body", "header", "buttons"})


@dataclass(frozen=True)
class TemplateRequest:
    name: str
    language: str
    # As Message.params holds them: {"body": [...] or {...}, "header": {...}, "buttons": [...]}
    params: dict[str, Any]


@dataclass(frozen=True)
class MessageRequest:
    phone_number_id: str
    to: str  # E.164, or a business-scoped user id
    template: TemplateRequest | None
    text: str | None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_object_parse(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 that says why it is not one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiProblem(400, "invalid_json", "The body is not valid UTF-8.") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ApiProblem(400, "invalid_json", "The body nests too deeply.") from None
    except ValueError as exc:
        # JSONDecodeError, NaN/Infinity, and integers past Python's digit limit.
        raise ApiProblem(400, "invalid_json", f"The body is not valid JSON: {exc}"[:300]) from None
    if not isinstance(data, dict):
        raise ApiProblem(400, "invalid_json", "The body must be a JSON object.")
    return data


def request_sha256(data: dict[str, Any]) -> str:
    """Hash of the body's canonical form: key order and whitespace do not make it differ."""
    try:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (ValueError, RecursionError):  # pragma: no cover - parsed JSON always dumps
        canonical = repr(data)
    return hashlib.sha256(canonical.encode("ascii", "backslashreplace")).hexdigest()


def idempotency_key_parse(value: str | None) -> str | None:
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY or not all(32 < ord(c) < 127 for c in value):
        raise invalid_fields(
            {
                "Idempotency-Key": (
                    f"Use 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces."
                )
            }
        )
    return value


class _Errors:
    def __init__(self) -> None:
        self.fields: dict[str, str] = {}

    def add(self, path: str, message: str) -> None:
        self.fields.setdefault(path, message)

    def string(
        self, value: Any, path: str, *, max_length: int, required: bool = True
    ) -> str | None:
        """``value`` when it is a storable string of 1..max_length characters."""
        if value is None:
            if required:
                self.add(path, "This field is required.")
            return None
        if not isinstance(value, str):
            self.add(path, "Must be a string.")
            return None
        if not value.strip():
            self.add(path, "May not be empty.")
            return None
        if len(value) > max_length:
            self.add(path, f"At most {max_length} characters.")
            return None
        if not text_storable(value):
            self.add(path, UNSTORABLE)
            return None
        return value


def message_request_parse(data: dict[str, Any]) -> MessageRequest:
    """The body as a ``MessageRequest``; a 400 listing every field at fault otherwise."""
    errors = _Errors()
    for key in sorted(set(data) - TOP_LEVEL_FIELDS, key=repr)[:20]:
        errors.add(_safe_path(key), "Unknown field.")
    phone_number_id = errors.string(
        data.get("phone_number_id"), "phone_number_id", max_length=MAX_PHONE_NUMBER_ID
    )
    to = _recipient(data.get("to"), errors)
    template: TemplateRequest | None = None
    text: str | None = None
    if "template" in data and "text" in data:
        errors.add("template", "Give either template or text, not both.")
    elif "template" in data:
        template = _template(data["template"], errors)
    elif "text" in data:
        text = errors.string(data["text"], "text", max_length=MAX_TEXT)
    else:
        errors.add("template", "Give a template (or a text inside the service window).")
    if errors.fields:
        raise invalid_fields(errors.fields)
    assert phone_number_id is not None and to is not None
    return MessageRequest(phone_number_id=phone_number_id, to=to, template=template, text=text)


def _safe_path(key: str) -> str:
    return key if len(key) <= 64 and text_storable(key) else "(unnamed)"


def _recipient(value: Any, errors: _Errors) -> str | None:
    """An E.164 phone, or the business-scoped user id of a user who shares no phone (sent
    as Meta's ``recipient``): ``US.13491208655302741918``, as their inbound messages name it."""
    raw = errors.string(value, "to", max_length=MAX_TO)
    if raw is None:
        return None
    if is_user_id(raw):
        return raw
    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        errors.add(
            "to",
            "Not a phone number in international form (E.164, e.g. +5511999990000) "
            "nor a WhatsApp user id (e.g. US.13491208655302741918).",
        )
        return None
    if not phonenumbers.is_valid_number(number):
        errors.add("to", "Not a valid phone number.")
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _template(value: Any, errors: _Errors) -> TemplateRequest | None:
    if not isinstance(value, dict):
        errors.add("template", "Must be an object with name, language and params.")
        return None
    for key in sorted(set(value) - TEMPLATE_FIELDS, key=repr)[:20]:
        errors.add(f"template.{_safe_path(key)}", "Unknown field.")
    name = errors.string(value.get("name"), "template.name", max_length=MAX_NAME)
    language = errors.string(value.get("language"), "template.language", max_length=MAX_LANGUAGE)
    params = _params(value.get("params", {}), errors)
    if name is None or language is None or params is None:
        return None
    return TemplateRequest(name=name, language=language, params=params)


def _params(value: Any, errors: _Errors) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        errors.add("template.params", "Must be an object: {body, header, buttons}.")
        return None
    for key in sorted(set(value) - PARAM_SECTIONS, key=repr)[:20]:
        errors.add(f"template.params.{_safe_path(key)}", "Unknown section.")
    params: dict[str, Any] = {}
    ok = True
    if "body" in value:
        body = _body(value["body"], errors)
        ok = ok and body is not None
        params["body"] = body
    if "header" in value:
        header = _header(value["header"], "template.params.header", errors)
        ok = ok and header is not None
        params["header"] = header
    if "buttons" in value:
        buttons = _buttons(value["buttons"], errors)
        ok = ok and buttons is not None
        params["buttons"] = buttons
    return params if ok and not errors.fields else None


def _body(value: Any, errors: _Errors) -> list[str] | dict[str, str] | None:
    path = "template.params.body"
    if isinstance(value, list):
        if len(value) > MAX_BODY_PARAMS:
            errors.add(path, f"At most {MAX_BODY_PARAMS} parameters.")
            return None
        items = [
            errors.string(item, f"{path}.{i}", max_length=MAX_PARAM) for i, item in enumerate(value)
        ]
        return None if any(item is None for item in items) else [str(item) for item in items]
    if isinstance(value, dict):
        if len(value) > MAX_BODY_PARAMS:
            errors.add(path, f"At most {MAX_BODY_PARAMS} parameters.")
            return None
        named: dict[str, str] = {}
        for key, item in value.items():
            key_ok = errors.string(key, f"{path}.{_safe_path(key)}", max_length=MAX_NAME)
            text = errors.string(item, f"{path}.{_safe_path(key)}", max_length=MAX_PARAM)
            if key_ok is None or text is None:
                return None
            named[key] = text
        return named
    errors.add(path, "Must be a list (positional {{1}}..) or an object (named params).")
    return None


def _header(value: Any, path: str, errors: _Errors) -> dict[str, str] | list[dict[str, str]] | None:
    if isinstance(value, list):
        if len(value) != 1:
            errors.add(path, "A template has one header parameter at most.")
            return None
        one = _header(value[0], f"{path}.0", errors)
        return [one] if isinstance(one, dict) else None
    if not isinstance(value, dict):
        errors.add(path, 'Must be an object: {"type": "text", "value": "..."}.')
        return None
    for key in sorted(set(value) - {"type", "value"}, key=repr)[:20]:
        errors.add(f"{path}.{_safe_path(key)}", "Unknown field.")
    kind = value.get("type")
    if kind is not None and kind not in HEADER_TYPES:
        errors.add(f"{path}.type", f"One of {', '.join(HEADER_TYPES)}.")
        return None
    text = errors.string(value.get("value"), f"{path}.value", max_length=MAX_PARAM)
    if text is None or errors.fields:
        return None
    # The type is optional: the template's header format decides what is sent.
    return {"value": text} if kind is None else {"type": str(kind), "value": text}


def _buttons(value: Any, errors: _Errors) -> list[dict[str, Any]] | None:
    path = "template.params.buttons"
    if not isinstance(value, list) or len(value) > MAX_BUTTONS:
        errors.add(path, f"Must be a list of at most {MAX_BUTTONS} buttons.")
        return None
    buttons: list[dict[str, Any]] = []
    for i, button in enumerate(value):
        item_path = f"{path}.{i}"
        if not isinstance(button, dict):
            errors.add(item_path, 'Must be an object: {"sub_type", "index", "value"}.')
            return None
        for key in sorted(set(button) - {"sub_type", "index", "value"}, key=repr)[:20]:
            errors.add(f"{item_path}.{_safe_path(key)}", "Unknown field.")
        sub_type = button.get("sub_type")
        if sub_type not in BUTTON_SUB_TYPES:
            errors.add(f"{item_path}.sub_type", f"One of {', '.join(BUTTON_SUB_TYPES)}.")
        index = button.get("index", i)
        # bool is an int in Python; true is not a button index.
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < MAX_BUTTONS:
            errors.add(f"{item_path}.index", f"A whole number from 0 to {MAX_BUTTONS - 1}.")
        text = errors.string(button.get("value"), f"{item_path}.value", max_length=MAX_PARAM)
        if errors.fields or text is None:
            return None
        buttons.append({"sub_type": str(sub_type), "index": int(index), "value": text})
    return buttons


# --- POST /conversions -------------------------------------------------------------------
# The request's shape, exactly as the OpenAPI document's ConversionsRequest says it (types,
# required fields, lengths): a body that breaks it is refused whole (400, every field named
# ``conversions[3].currency``). What a schema cannot say (a number libphonenumber accepts,
# a decimal, a date with its offset, an ISO 4217 code) is decided item by item by
# delivery.engagement.conversions, and a bad item does not stop the others.

CONVERSION_PHONE_MAX = 32
CONVERSION_USER_ID_MAX = 140
CONVERSION_EVENT_MAX = 100
CONVERSION_VALUE_TEXT_MAX = 40
CONVERSION_OCCURRED_AT_MAX = 64
CONVERSION_ID_MAX = 200
CONVERSION_FIELDS = frozenset(
    {"phone", "user_id", "event", "value", "currency", "occurred_at", "id"}
)
# Errors listed in one 400 at most: a thousand bad items need not make a megabyte answer.
MAX_FIELD_ERRORS = 100


def conversions_request_parse(data: dict[str, Any], *, max_items: int) -> list[dict[str, Any]]:
    """The items of ``{"conversions": [...]}``, each an object whose fields have the
    documented JSON types and lengths; a 400 naming every field at fault otherwise."""
    errors = _Errors()
    for key in sorted(set(data) - {"conversions"}, key=repr)[:20]:
        errors.add(_safe_path(key), "Unknown field.")
    items = data.get("conversions")
    if not isinstance(items, list):
        errors.add("conversions", "Required: a list of conversions.")
    elif not 1 <= len(items) <= max_items:
        errors.add("conversions", f"Give 1 to {max_items} conversions.")
    else:
        for index, item in enumerate(items):
            _conversion_shape(item, f"conversions[{index}]", errors)
            if len(errors.fields) >= MAX_FIELD_ERRORS:
                break
    if errors.fields:
        raise invalid_fields(errors.fields)
    assert isinstance(items, list)
    return items


def _conversion_shape(item: Any, path: str, errors: _Errors) -> None:
    if not isinstance(item, dict):
        errors.add(path, "Must be an object.")
        return
    for key in sorted(set(item) - CONVERSION_FIELDS, key=repr)[:20]:
        errors.add(f"{path}.{_safe_path(key)}", "Unknown field.")
    if "phone" not in item and "user_id" not in item:
        errors.add(f"{path}.phone", "Give the phone or the user_id of the person who converted.")
    if "event" not in item:
        errors.add(f"{path}.event", "This field is required.")
    for name, max_length in (
        ("phone", CONVERSION_PHONE_MAX),
        ("user_id", CONVERSION_USER_ID_MAX),
        ("event", CONVERSION_EVENT_MAX),
        ("occurred_at", CONVERSION_OCCURRED_AT_MAX),
    ):
        if name in item:
            _shape_string(item[name], f"{path}.{name}", 1, max_length, errors)
    if "currency" in item:
        _shape_string(item["currency"], f"{path}.currency", 3, 3, errors)
    if "value" in item:
        value = item["value"]
        if isinstance(value, str):
            _shape_string(value, f"{path}.value", 0, CONVERSION_VALUE_TEXT_MAX, errors)
        elif value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            errors.add(f"{path}.value", "Must be a number, a decimal string or null.")
    if "id" in item:
        item_id = item["id"]
        if isinstance(item_id, str):
            _shape_string(item_id, f"{path}.id", 1, CONVERSION_ID_MAX, errors)
        elif isinstance(item_id, float) and item_id.is_integer():
            item["id"] = int(item_id)  # 7.0 is the integer 7 to JSON Schema
        elif isinstance(item_id, bool) or not isinstance(item_id, int):
            errors.add(f"{path}.id", "Must be a string or an integer.")


def _shape_string(value: Any, path: str, min_length: int, max_length: int, errors: _Errors) -> None:
    if not isinstance(value, str):
        errors.add(path, "Must be a string.")
    elif not min_length <= len(value) <= max_length:
        errors.add(path, f"{min_length} to {max_length} characters.")
