"""The send endpoint validates like Meta and answers with Meta's bodies."""

from __future__ import annotations

import pytest

from tests.simulator.helpers import error_code, post, template_body
from tests.simulator_fixtures import SIM_TOKEN

ORDER_UPDATE = [
    {"type": "header", "parameters": [{"type": "image", "image": {"link": "https://e.com/h.jpg"}}]},
    {"type": "body", "parameters": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
    {
        "type": "button",
        "sub_type": "quick_reply",
        "index": "0",
        "parameters": [{"type": "payload", "payload": "STOP"}],
    },
    {
        "type": "button",
        "sub_type": "url",
        "index": "1",
        "parameters": [{"type": "text", "text": "x"}],
    },
]


def test_accepted_template_answers_meta_success_body(simulator) -> None:
    response = post(simulator.url, template_body(to="+1 (650) 555-1234"))

    assert response.status_code == 200
    data = response.json()
    wamid = data["messages"][0]["id"]
    assert data == {
        "messaging_product": "whatsapp",
        "contacts": [{"input": "+1 (650) 555-1234", "wa_id": "16505551234"}],
        "messages": [{"id": wamid, "message_status": "accepted"}],
    }
    assert wamid.startswith("wamid.") and len(wamid) <= 128


def test_text_message_is_accepted(simulator) -> None:
    body = {
        "messaging_product": "whatsapp",
        "to": "+4915100000001",
        "type": "text",
        "text": {"body": "hello"},
    }
    response = post(simulator.url, body)
    assert response.status_code == 200
    assert "message_status" not in response.json()["messages"][0]


def test_full_template_with_header_body_and_buttons(simulator) -> None:
    response = post(simulator.url, template_body(name="order_update", components=ORDER_UPDATE))
    assert response.status_code == 200


def test_named_parameters(simulator) -> None:
    components = [
        {"type": "header", "parameters": [{"type": "text", "text": "Hi"}]},
        {
            "type": "body",
            "parameters": [{"type": "text", "parameter_name": "first_name", "text": "Asha"}],
        },
    ]
    assert post(simulator.url, template_body(name="welcome_named", components=components)).ok
    components[1]["parameters"][0]["parameter_name"] = "last_name"
    response = post(simulator.url, template_body(name="welcome_named", components=components))
    assert (response.status_code, error_code(response)) == (400, 132000)


@pytest.mark.parametrize(
    ("token", "status", "code"), [("wrong", 401, 190), (None, 401, 190), ("", 401, 190)]
)
def test_bad_token(simulator, token, status, code) -> None:
    response = post(simulator.url, template_body(), token=token)
    assert (response.status_code, error_code(response)) == (status, code)
    assert "error_data" not in response.json()["error"]


def test_unknown_phone_number_id(simulator) -> None:
    response = post(simulator.url, template_body(), number="42")
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["error_subcode"]) == (400, 100, 33)
    assert error["type"] == "GraphMethodException"


def test_auto_register_adopts_unknown_numbers(simulator) -> None:
    simulator.configure(auto_register=True)
    assert post(simulator.url, template_body(), number="777", token="t-777").ok
    response = post(simulator.url, template_body(), number="777", token="other")
    assert error_code(response) == 190


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        {"to": "+1650", "type": "template"},
        {**template_body(), "messaging_product": "sms"},
        {**template_body(), "to": ""},
        {**template_body(), "type": "sticker"},
        {**template_body(), "biz_opaque_callback_data": "x" * 513},
        {**template_body(), "template": {"name": "promo"}},
        template_body(components=[{"type": "footer", "parameters": []}]),
        template_body(components=[{"type": "button", "sub_type": "url", "parameters": []}]),
    ],
)
def test_bad_body_shape_is_code_100(simulator, body) -> None:
    response = post(simulator.url, body)
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (400, 100)
    assert error["message"] == "(#100) Invalid parameter"
    assert error["error_data"]["details"]


@pytest.mark.parametrize(
    ("name", "components", "status", "code"),
    [
        ("missing", None, 404, 132001),
        ("promo", [], 400, 132000),
        (
            "promo",
            [{"type": "body", "parameters": [{"type": "text", "text": "a"}] * 2}],
            400,
            132000,
        ),
        ("order_update", ORDER_UPDATE[1:], 400, 132000),  # header missing
        ("order_update", ORDER_UPDATE[:3], 400, 132000),  # dynamic url button missing
        (
            "order_update",
            [
                {"type": "header", "parameters": [{"type": "video", "video": {"id": "1"}}]},
                *ORDER_UPDATE[1:],
            ],
            400,
            132012,
        ),
    ],
)
def test_template_mismatch(simulator, name, components, status, code) -> None:
    response = post(simulator.url, template_body(name=name, components=components))
    assert (response.status_code, error_code(response)) == (status, code)
    assert response.json()["error"]["message"].startswith(f"(#{code}) ")


@pytest.mark.parametrize(
    ("status", "code"), [("PAUSED", 132015), ("DISABLED", 132016), ("REJECTED", 132001)]
)
def test_template_status(simulator, status, code) -> None:
    simulator.add_template(name="promo", language="en_US", body_params=1, status=status)
    assert error_code(post(simulator.url, template_body())) == code


def test_access_token_is_per_number(simulator) -> None:
    simulator.add_number(phone_number_id="2", access_token="token-2")
    assert post(simulator.url, template_body(), number="2", token="token-2").ok
    assert error_code(post(simulator.url, template_body(), number="2", token=SIM_TOKEN)) == 190
