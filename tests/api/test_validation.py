"""Every refusal: a JSON error naming the problem, the documented status, nothing stored."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from delivery.models import Message
from delivery.service_windows import service_windows_record
from tests.api.support import Api, template_body
from tests.factories import make_template
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def refused(api: Api, status: int, code: str, body=None, **kwargs) -> dict:
    response, payload = api.send(body, **kwargs)
    assert response.status_code == status, payload
    assert payload["error"]["code"] == code, payload
    assert not Message.objects.exists()
    return payload["error"]


# --- 400: the body ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b" ",
        b"{",
        b"[1, 2]",
        b'"just a string"',
        b"null",
        b'{"to": NaN}',
        b'{"to": Infinity}',
        b"\xff\xfe{}",  # not UTF-8
        b'{"a": "\xed\xa0\x80"}',  # an encoded surrogate is not valid UTF-8
        b"[" * 30_000 + b"]" * 30_000,  # nests past the parser's recursion limit
        b'{"n": ' + b"9" * 5000 + b"}",  # past Python's int digit limit
    ],
)
def test_bodies_that_are_not_a_json_object_are_400(api, template, raw) -> None:
    error = refused(api, 400, "invalid_json", raw=raw)
    assert error["message"]


def test_missing_fields_are_listed_together(api, template) -> None:
    error = refused(api, 400, "invalid_request", {})
    assert set(error["fields"]) == {"phone_number_id", "to", "template"}


def test_unknown_fields_are_refused(api, number, template) -> None:
    error = refused(api, 400, "invalid_request", {**template_body(number), "priority": "high"})
    assert error["fields"] == {"priority": "Unknown field."}


@pytest.mark.parametrize(
    "to",
    ["5511987650001", "+55", "+999999999999", "not a number", "", 5511987650001, None, ["+55"]],
)
def test_recipients_must_be_valid_international_numbers(api, number, template, to) -> None:
    error = refused(api, 400, "invalid_request", template_body(number, to=to))
    assert "to" in error["fields"]


@pytest.mark.parametrize("to", ["US.13491208655302741918", "US.ENT.11815799212886844830"])
def test_a_whatsapp_user_id_is_a_recipient_as_given(api, number, template, to) -> None:
    response, body = api.send(template_body(number, to=to))
    assert response.status_code == 202
    assert Message.objects.get(pk=body["id"]).to == to


@pytest.mark.parametrize("to", ["US.", "us.1349120865", "USA.1349", "US.13 49", "US.1349-12"])
def test_what_is_neither_a_phone_nor_a_user_id_is_refused_naming_both(
    api, number, template, to
) -> None:
    error = refused(api, 400, "invalid_request", template_body(number, to=to))
    assert "E.164" in error["fields"]["to"] and "user id" in error["fields"]["to"]


def test_a_recipient_is_stored_in_e164_form(api, number, template) -> None:
    response, body = api.send(template_body(number, to="+55 (11) 98765-0001"))
    assert response.status_code == 202
    assert Message.objects.get(pk=body["id"]).to == "+5511987650001"


def test_template_and_text_together_are_refused(api, number, template) -> None:
    error = refused(api, 400, "invalid_request", {**template_body(number), "text": "hi"})
    assert "template" in error["fields"]


@pytest.mark.parametrize(
    ("template_value", "field"),
    [
        ("otp", "template"),
        ({"language": "en_US"}, "template.name"),
        ({"name": "otp"}, "template.language"),
        ({"name": 7, "language": "en_US"}, "template.name"),
        ({"name": "otp", "language": "en_US", "params": []}, "template.params"),
        ({"name": "otp", "language": "en_US", "params": {"footer": []}}, "template.params.footer"),
        ({"name": "otp", "language": "en_US", "params": {"body": "123"}}, "template.params.body"),
        ({"name": "otp", "language": "en_US", "params": {"body": [1]}}, "template.params.body.0"),
        ({"name": "otp", "language": "en_US", "params": {"body": [""]}}, "template.params.body.0"),
        (
            {"name": "otp", "language": "en_US", "params": {"body": ["x" * 1025]}},
            "template.params.body.0",
        ),
        (
            {"name": "otp", "language": "en_US", "params": {"body": ["a\x00b"]}},
            "template.params.body.0",
        ),
        (
            {"name": "otp", "language": "en_US", "params": {"body": ["\ud800"]}},
            "template.params.body.0",
        ),
        (
            {
                "name": "otp",
                "language": "en_US",
                "params": {"header": {"type": "gif", "value": "x"}},
            },
            "template.params.header.type",
        ),
        (
            {"name": "otp", "language": "en_US", "params": {"header": [{"value": "a"}] * 2}},
            "template.params.header",
        ),
        (
            {"name": "otp", "language": "en_US", "params": {"buttons": [{"sub_type": "call"}]}},
            "template.params.buttons.0.sub_type",
        ),
        (
            {
                "name": "otp",
                "language": "en_US",
                "params": {"buttons": [{"sub_type": "url", "index": True, "value": "x"}]},
            },
            "template.params.buttons.0.index",
        ),
        (
            {
                "name": "otp",
                "language": "en_US",
                "params": {"buttons": [{"sub_type": "url", "index": 10**40, "value": "x"}]},
            },
            "template.params.buttons.0.index",
        ),
    ],
)
def test_template_field_errors_name_the_field(api, number, template, template_value, field) -> None:
    body = {"phone_number_id": number.phone_number_id, "to": "+5511987650001"}
    error = refused(api, 400, "invalid_request", {**body, "template": template_value})
    assert field in error["fields"], error


@pytest.mark.parametrize("text", ["", "   ", 42, "x" * 4097, "nul\x00"])
def test_text_must_be_a_storable_string_of_up_to_4096_characters(api, number, text) -> None:
    body = {"phone_number_id": number.phone_number_id, "to": "+5511987650001", "text": text}
    error = refused(api, 400, "invalid_request", body)
    assert "text" in error["fields"]


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "ключ"])
def test_malformed_idempotency_keys_are_400(api, number, template, key) -> None:
    error = refused(api, 400, "invalid_request", template_body(number), idempotency_key=key)
    assert "Idempotency-Key" in error["fields"]


# --- 413, 415, 405 ----------------------------------------------------------------------------


@override_settings(API_MAX_BODY_BYTES=2048)
def test_a_body_over_the_cap_is_413(api, number, template) -> None:
    body = template_body(number)
    body["template"]["params"]["body"] = ["x" * 1000] * 3
    refused(api, 413, "payload_too_large", body)


def test_a_declared_length_over_the_cap_is_413_before_reading(owner_key) -> None:
    import io

    from django.test import RequestFactory

    from tests.api.support import response_check
    from whatsblast.views.api import messages

    request = RequestFactory().post(
        "/api/v1/messages",
        data=b"{}",
        content_type="application/json",
        headers={"Authorization": f"Bearer {owner_key.raw}"},
    )
    request.META["CONTENT_LENGTH"] = str(10**12)
    request.META["wsgi.input"] = io.BytesIO(b"{}")
    response = messages(request)
    assert response.status_code == 413
    assert response_check("/messages", "post", response)["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", ""],
)
def test_other_content_types_are_415(api, number, template, content_type) -> None:
    refused(api, 415, "unsupported_media_type", template_body(number), content_type=content_type)


def test_json_with_an_explicit_utf8_charset_is_accepted(api, number, template) -> None:
    response, _ = api.send(template_body(number), content_type="application/json; charset=UTF-8")
    assert response.status_code == 202


def test_other_methods_are_405(api) -> None:
    response = api.client.put("/api/v1/messages", data=b"{}", content_type="application/json")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert json.loads(response.content)["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nothing/here",
        # Found by schemathesis: a newline in the path slipped past the JSON catch-all.
        "/api/v1/messages/1%0A",
        "/api/v1/messages/%C2%B4%0A%ED%90%82",
        "/api/v1/%0A",
    ],
)
def test_unknown_paths_under_the_api_answer_json_404(api, path) -> None:
    response = api.client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert json.loads(response.content)["error"]["code"] == "not_found"


# --- 422: what the database knows ---------------------------------------------------------


def test_an_unknown_template_is_422(api, number, template) -> None:
    error = refused(api, 422, "unknown_template", template_body(number, name="nope"))
    assert "template.name" in error["fields"]


def test_a_template_in_another_language_is_unknown(api, number, template) -> None:
    refused(api, 422, "unknown_template", template_body(number, language="pt_BR"))


def test_a_template_of_another_account_is_unknown(api, number, other_number) -> None:
    make_template(account=other_number.account, name="foreign")
    refused(api, 422, "unknown_template", template_body(number, name="foreign"))


@pytest.mark.parametrize("status", ["PENDING", "REJECTED", "PAUSED", "DISABLED"])
def test_a_template_that_is_not_approved_is_422(api, number, status) -> None:
    make_template(account=number.account, name="otp", status=status)
    error = refused(api, 422, "template_not_approved", template_body(number))
    assert status in error["message"]


@pytest.mark.parametrize("body", [[], ["1", "2"], {"1": "x"}])
def test_a_wrong_positional_param_count_is_422(api, number, template, body) -> None:
    error = refused(
        api, 422, "template_params_mismatch", template_body(number, params={"body": body})
    )
    assert "template.params.body" in error["fields"]


def test_a_template_without_params_takes_none(api, number) -> None:
    make_template(account=number.account, name="hello", body_text="Hello", body_param_count=0)
    response, _ = api.send(template_body(number, name="hello", params={}))
    assert response.status_code == 202
    Message.objects.all().delete()
    refused(
        api,
        422,
        "template_params_mismatch",
        template_body(number, name="hello", params={"body": ["x"]}),
    )


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        ({"first_name": "Asha"}, "missing order_id"),
        ({"first_name": "Asha", "order_id": "7", "extra": "x"}, "unknown extra"),
        (["Asha", "7"], "named"),
    ],
)
def test_named_params_must_match_the_templates_names(api, number, body, mentions) -> None:
    make_template(
        account=number.account,
        name="order",
        body_text="Hi {{first_name}}, order {{order_id}}",
        body_param_count=0,
        body_param_names=["first_name", "order_id"],
    )
    error = refused(
        api,
        422,
        "template_params_mismatch",
        template_body(number, name="order", params={"body": body}),
    )
    assert mentions in error["message"]


URL_BUTTON = {"index": 0, "type": "URL", "sub_type": "url", "param": "required"}
QUICK_REPLY = {"index": 1, "type": "QUICK_REPLY", "sub_type": "quick_reply", "param": "optional"}


def order_template(number, **fields):
    fields.setdefault("header_format", "IMAGE")
    fields.setdefault("buttons", [URL_BUTTON, QUICK_REPLY])
    return make_template(
        account=number.account,
        name="order",
        body_param_count=0,
        body_param_names=["first_name", "order_id"],
        **fields,
    )


def test_params_are_stored_as_the_template_renders_them(api, number) -> None:
    order_template(number)
    params = {
        "body": {"order_id": "7", "first_name": "Asha"},
        "header": {"value": "https://example.com/a.png"},
        "buttons": [{"sub_type": "url", "index": 0, "value": "track/7"}],
    }
    response, body = api.send(template_body(number, name="order", params=params))
    assert response.status_code == 202
    assert Message.objects.get(pk=body["id"]).params == {
        "header": {"type": "image", "value": "https://example.com/a.png"},
        "body": {"first_name": "Asha", "order_id": "7"},
        "buttons": [{"sub_type": "url", "index": 0, "value": "track/7"}],
    }


ORDER_BODY = {"first_name": "Asha", "order_id": "7"}
ORDER_BUTTON = [{"sub_type": "url", "index": 0, "value": "t/7"}]


@pytest.mark.parametrize(
    ("template_fields", "params", "mentions"),
    [
        ({}, {"body": ORDER_BODY, "buttons": ORDER_BUTTON}, "image header"),
        (
            {},
            {"body": ORDER_BODY, "header": {"value": "not a link"}, "buttons": ORDER_BUTTON},
            "link",
        ),
        (
            {},
            {
                "body": ORDER_BODY,
                "header": {"type": "video", "value": "https://x/a.mp4"},
                "buttons": ORDER_BUTTON,
            },
            "not video",
        ),
        (
            {"header_format": ""},
            {"body": ORDER_BODY, "header": {"value": "x"}, "buttons": ORDER_BUTTON},
            "no header",
        ),
        ({}, {"body": ORDER_BODY, "header": {"value": "123"}}, "need their parameter"),
        (
            {},
            {
                "body": ORDER_BODY,
                "header": {"value": "123"},
                "buttons": [*ORDER_BUTTON, {"sub_type": "url", "index": 5, "value": "x"}],
            },
            "no button 5",
        ),
        (
            {},
            {
                "body": ORDER_BODY,
                "header": {"value": "123"},
                "buttons": [*ORDER_BUTTON, {"sub_type": "url", "index": 1, "value": "x"}],
            },
            "quick_reply button",
        ),
        (
            {"buttons": [{"index": 0, "type": "CATALOG", "param": "unsupported"}]},
            {"body": ORDER_BODY, "header": {"value": "123"}},
            "cannot send",
        ),
    ],
)
def test_header_and_buttons_must_fit_the_template(
    api, number, template_fields, params, mentions
) -> None:
    order_template(number, **template_fields)
    error = refused(
        api, 422, "template_params_mismatch", template_body(number, name="order", params=params)
    )
    assert mentions in error["message"], error
    assert [key.split(".")[2] for key in error["fields"]] in (["header"], ["buttons"])


def test_an_authentication_templates_code_button_takes_the_code(api, number) -> None:
    make_template(
        account=number.account,
        name="login_code",
        category="AUTHENTICATION",
        body_text="{{1}} is your code.",
        buttons=[{"index": 0, "type": "OTP", "sub_type": "", "param": "unsupported"}],
    )
    params = {"body": ["482913"], "buttons": [{"sub_type": "url", "index": 0, "value": "482913"}]}
    response, body = api.send(template_body(number, name="login_code", params=params))
    assert response.status_code == 202
    assert Message.objects.get(pk=body["id"]).params["buttons"] == params["buttons"]
    Message.objects.all().delete()
    refused(
        api,
        422,
        "template_params_mismatch",
        template_body(number, name="login_code", params={"body": ["482913"]}),
    )


# --- text: only inside the 24 h customer-service window ------------------------------------


def inbound(number, *, from_phone: str, ago: timedelta) -> InboundMessage:
    """A message the user sent, recorded as the webhook applier records it."""
    service_windows_record([(number.pk, from_phone, timezone.now() - ago)])
    return InboundMessage.objects.create(
        wamid=f"wamid.in.{from_phone}.{ago.total_seconds()}",
        from_phone=from_phone,
        type="text",
        text="hello?",
        sent_at=timezone.now() - ago,
        phone_number=number,
        payload={},
    )


def text_body(number, to: str = "+5511987650001") -> dict:
    return {"phone_number_id": number.phone_number_id, "to": to, "text": "Your order shipped."}


def test_text_without_an_inbound_message_is_422(api, number) -> None:
    error = refused(api, 422, "outside_service_window", text_body(number))
    assert "24" in error["message"]


def test_text_after_the_window_closed_is_422(api, number) -> None:
    inbound(number, from_phone="+5511987650001", ago=timedelta(hours=24, minutes=1))
    refused(api, 422, "outside_service_window", text_body(number))


def test_text_when_the_recipient_wrote_to_another_number_is_422(api, number, other_number) -> None:
    inbound(other_number, from_phone="+5511987650001", ago=timedelta(minutes=5))
    refused(api, 422, "outside_service_window", text_body(number))


def test_text_inside_the_window_is_accepted(api, number) -> None:
    inbound(number, from_phone="+5511987650001", ago=timedelta(hours=23, minutes=59))
    response, body = api.send(text_body(number))
    assert response.status_code == 202
    message = Message.objects.get(pk=body["id"])
    assert message.text == "Your order shipped." and message.template is None
