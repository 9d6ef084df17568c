"""The Cloud API client: request bodies, error parsing, transport failures, batching."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from delivery.cloud import client as cloud_api
from delivery.cloud.client import (
    Accepted,
    ApiError,
    CloudApiClient,
    SendRequest,
    build_message_body,
    get_client,
    parse_response,
)
from delivery.simulator.config import TemplateSpec
from delivery.simulator.validate import check_shape, check_template
from tests.simulator_fixtures import SIM_PHONE_NUMBER_ID, SIM_TOKEN


def make_request(**fields: object) -> SendRequest:
    defaults: dict[str, object] = {
        "base_url": "http://127.0.0.1:9",
        "phone_number_id": SIM_PHONE_NUMBER_ID,
        "access_token": SIM_TOKEN,
        "to": "+16505551234",
        "callback_data": "wb:9001",
        "template_name": "promo",
        "language": "en_US",
        "params": {"body": ["Asha"]},
    }
    defaults.update(fields)
    return SendRequest(**defaults)  # type: ignore[arg-type]


@pytest.fixture
def client() -> Iterator[CloudApiClient]:
    client = CloudApiClient(api_version="v23.0", connect_timeout=1.0, read_timeout=1.0)
    yield client
    client.close()


# --- request bodies (cloud-api.md §1.1) ---------------------------------------------------------


def test_template_body_matches_documented_shape_for_header_body_and_buttons() -> None:
    req = make_request(
        template_name="order_update",
        params={
            "header": {"type": "image", "value": "https://example.com/h.jpg"},
            "body": ["Asha", "42"],
            "buttons": [
                {"sub_type": "quick_reply", "index": 0, "value": "STOP_PROMO"},
                {"sub_type": "url", "index": 1, "value": "A12345"},
            ],
        },
        callback_data="campaign=42;recipient=9001",
    )

    assert build_message_body(req) == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "+16505551234",
        "type": "template",
        "biz_opaque_callback_data": "campaign=42;recipient=9001",
        "template": {
            "name": "order_update",
            "language": {"policy": "deterministic", "code": "en_US"},
            "components": [
                {
                    "type": "header",
                    "parameters": [
                        {"type": "image", "image": {"link": "https://example.com/h.jpg"}}
                    ],
                },
                {
                    "type": "body",
                    "parameters": [
                        {"type": "text", "text": "Asha"},
                        {"type": "text", "text": "42"},
                    ],
                },
                {
                    "type": "button",
                    "sub_type": "quick_reply",
                    "index": "0",
                    "parameters": [{"type": "payload", "payload": "STOP_PROMO"}],
                },
                {
                    "type": "button",
                    "sub_type": "url",
                    "index": "1",
                    "parameters": [{"type": "text", "text": "A12345"}],
                },
            ],
        },
    }


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"type": "text", "value": "Sale"}, {"type": "text", "text": "Sale"}),
        (
            {"type": "video", "value": "1234567890"},
            {"type": "video", "video": {"id": "1234567890"}},
        ),
        (
            {"type": "document", "value": "https://example.com/a.pdf"},
            {"type": "document", "document": {"link": "https://example.com/a.pdf"}},
        ),
    ],
)
def test_header_parameter_kinds(header: dict[str, str], expected: dict[str, object]) -> None:
    body = build_message_body(make_request(params={"header": header}))
    assert body["template"]["components"] == [{"type": "header", "parameters": [expected]}]


def test_header_given_as_a_list() -> None:
    body = build_message_body(make_request(params={"header": [{"type": "text", "value": "Hi"}]}))
    assert body["template"]["components"] == [
        {"type": "header", "parameters": [{"type": "text", "text": "Hi"}]}
    ]


def test_named_body_parameters_carry_parameter_name() -> None:
    body = build_message_body(make_request(params={"body": {"first_name": "Asha", "n": 3}}))
    assert body["template"]["components"] == [
        {
            "type": "body",
            "parameters": [
                {"type": "text", "parameter_name": "first_name", "text": "Asha"},
                {"type": "text", "parameter_name": "n", "text": "3"},
            ],
        }
    ]


def test_template_without_params_has_no_components() -> None:
    body = build_message_body(make_request(params=None))
    assert "components" not in body["template"]


def test_text_message_body() -> None:
    body = build_message_body(make_request(template_name=None, text="Your code is 1234"))
    assert body == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "+16505551234",
        "type": "text",
        "text": {"preview_url": False, "body": "Your code is 1234"},
        "biz_opaque_callback_data": "wb:9001",
    }


def test_callback_data_over_512_chars_is_refused() -> None:
    with pytest.raises(ValueError, match="512"):
        build_message_body(make_request(callback_data="x" * 513))


def test_sent_bytes_are_the_built_body_with_bearer_token(client, simulator) -> None:
    req = make_request(base_url=simulator.url)
    result = client.send(req)

    assert isinstance(result, Accepted)
    [record] = simulator.records(bodies=True)
    assert json.loads(record["body"]) == build_message_body(req)
    assert record["wamid"] == result.wamid
    assert result.wa_id == "16505551234"
    assert result.message_status == "accepted"


def test_a_request_that_cannot_be_built_is_not_sent(client, simulator) -> None:
    req = make_request(base_url=simulator.url, params={"header": {"type": "audio", "value": "x"}})
    result = client.send(req)

    assert isinstance(result, ApiError)
    assert (result.code, result.may_have_reached_meta) == (100, False)
    assert "audio" in result.details
    assert simulator.stats()["requests"] == 0


# --- error bodies (cloud-api.md §2.1) -----------------------------------------------------------

DOCUMENTED_ERROR = b"""{"error": {"message": "(#130429) Rate limit hit", "type": "OAuthException",
 "code": 130429, "error_data": {"messaging_product": "whatsapp", "details": "Message failed to
 send because there were too many messages sent from this phone number in a short period of
 time"}, "error_subcode": 2494055, "fbtrace_id": "Az8or2yhqkZfEZ-_4Qn_Bam"}}""".replace(b"\n", b"")


def test_parses_documented_error_body() -> None:
    result = parse_response(status=400, body=DOCUMENTED_ERROR, headers={}, latency_s=0.1)

    assert result == ApiError(
        http_status=400,
        code=130429,
        subcode=2494055,
        title="(#130429) Rate limit hit",
        details="Message failed to send because there were too many messages sent from this "
        "phone number in a short period of time",
        retry_after_s=None,
        may_have_reached_meta=True,
        latency_s=0.1,
        fbtrace_id="Az8or2yhqkZfEZ-_4Qn_Bam",
    )


def test_parses_spec_graph_error_without_error_data() -> None:
    body = (
        b'{"error":{"message":"An unknown error occurred","type":"OAuthException","code":1,'
        b'"is_transient":true,"error_user_title":"Temporary","error_user_msg":"Try again"}}'
    )
    result = parse_response(status=400, body=body, headers={}, latency_s=0.0)

    assert isinstance(result, ApiError)
    assert (result.code, result.subcode, result.is_transient) == (1, None, True)
    assert (result.title, result.details) == ("Temporary", "Try again")


def test_parses_auth_error_without_error_data() -> None:
    body = b'{"error":{"message":"Invalid OAuth access token","type":"OAuthException","code":190}}'
    result = parse_response(status=401, body=body, headers={}, latency_s=0.0)

    assert isinstance(result, ApiError)
    assert (result.http_status, result.code, result.details) == (401, 190, "")
    assert result.title == "Invalid OAuth access token"


def test_non_json_error_keeps_status_and_text() -> None:
    result = parse_response(status=502, body=b"<html>Bad Gateway</html>", headers={}, latency_s=0)

    assert isinstance(result, ApiError)
    assert (result.http_status, result.code, result.title) == (502, None, "HTTP 502")
    assert "Bad Gateway" in result.details


def test_success_without_message_id_is_an_error_that_may_have_reached() -> None:
    result = parse_response(
        status=200, body=b'{"messaging_product":"whatsapp"}', headers={}, latency_s=0
    )
    assert isinstance(result, ApiError)
    assert (result.http_status, result.code, result.may_have_reached_meta) == (200, None, True)


def test_success_without_message_status() -> None:
    body = b'{"contacts":[{"input":"+1 650","wa_id":"1650"}],"messages":[{"id":"wamid.X"}]}'
    result = parse_response(status=200, body=body, headers={}, latency_s=0)
    assert result == Accepted(wamid="wamid.X", wa_id="1650", message_status=None, latency_s=0)


def test_retry_after_seconds_and_http_date() -> None:
    seconds = parse_response(status=429, body=b"", headers={"Retry-After": "7"}, latency_s=0)
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    dated = parse_response(status=429, body=b"", headers={"Retry-After": later}, latency_s=0)

    assert isinstance(seconds, ApiError) and seconds.retry_after_s == 7.0
    assert isinstance(dated, ApiError) and 110 < (dated.retry_after_s or 0) <= 120


@pytest.mark.parametrize(
    ("setup", "change", "status", "code"),
    [
        ({}, {"access_token": "wrong"}, 401, 190),
        ({}, {"phone_number_id": "999"}, 400, 100),
        ({}, {"template_name": "missing"}, 404, 132001),
        ({}, {"params": {"body": ["a", "b"]}}, 400, 132000),
        ({"mode": "all_throttle"}, {}, 400, 130429),
        ({"fail_recipients": {"+16505551234": 131026}}, {}, 400, 131026),
        ({"fail_recipients": {"+16505551234": 131050}}, {}, 400, 131050),
    ],
)
def test_simulator_errors_arrive_parsed(client, simulator, setup, change, status, code) -> None:
    simulator.configure(**setup)
    result = client.send(dataclasses.replace(make_request(base_url=simulator.url), **change))

    assert isinstance(result, ApiError)
    assert (result.http_status, result.code, result.may_have_reached_meta) == (status, code, True)
    assert result.title and result.fbtrace_id


# --- transport failures -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_never_reached_meta(client) -> None:
    result = client.send(make_request(base_url=f"http://127.0.0.1:{free_port()}"))

    assert isinstance(result, ApiError)
    assert result.http_status is None and result.code is None
    assert result.may_have_reached_meta is False


def test_unresolvable_host_never_reached_meta(client) -> None:
    result = client.send(make_request(base_url="http://no-such-host.invalid"))
    assert isinstance(result, ApiError) and result.may_have_reached_meta is False


def test_read_timeout_may_have_reached_meta_and_was_sent(simulator) -> None:
    client = CloudApiClient(api_version="v23.0", connect_timeout=1.0, read_timeout=0.3)
    simulator.configure(mode="all_timeout", timeout_hold_s=2.0)
    try:
        result = client.send(make_request(base_url=simulator.url))
    finally:
        client.close()

    assert isinstance(result, ApiError)
    assert result.title == "ReadTimeout"
    assert result.may_have_reached_meta is True
    assert simulator.stats()["accepted"] == 1


@pytest.fixture
def hangup_server() -> Iterator[str]:
    """Reads the request, then closes the connection without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_reset_after_sending_may_have_reached_meta(client, hangup_server) -> None:
    result = client.send(make_request(base_url=hangup_server))
    assert isinstance(result, ApiError) and result.may_have_reached_meta is True


# --- batches and the process client ---------------------------------------------------------


def test_send_batch_keeps_order_and_bounds_concurrency(client, simulator) -> None:
    simulator.configure(latency_ms=100)
    reqs = [make_request(base_url=simulator.url, to=f"+4915{i:09d}") for i in range(20)]

    started = time.perf_counter()
    results = client.send_batch(reqs, concurrency=5)
    elapsed = time.perf_counter() - started

    assert [r.wa_id for r in results if isinstance(r, Accepted)] == [r.to[1:] for r in reqs]
    # 20 requests, 5 at a time, 100 ms each: four rounds.
    assert 0.38 < elapsed < 2.0
    started = time.perf_counter()
    client.send_batch(reqs, concurrency=20)
    assert time.perf_counter() - started < 0.38


def test_get_client_is_one_per_process_and_uses_settings() -> None:
    cloud_api._client = None
    with override_settings(
        WHATSAPP_API_VERSION="v24.0", WHATSAPP_CONNECT_TIMEOUT=1.5, WHATSAPP_READ_TIMEOUT=4.0
    ):
        client = get_client()
        assert get_client() is client
        assert (client.api_version, client.timeout) == ("v24.0", (1.5, 4.0))
        assert client.url_for(make_request(base_url="https://graph.facebook.com/")) == (
            f"https://graph.facebook.com/v24.0/{SIM_PHONE_NUMBER_ID}/messages"
        )
    cloud_api._client = None
    client.close()


@given(
    body=st.lists(st.text(max_size=20), max_size=6),
    header=st.sampled_from([None, "text", "image", "video", "document"]),
    callback=st.text(max_size=512),
)
def test_built_bodies_pass_metas_checks_for_a_matching_template(body, header, callback) -> None:
    params: dict[str, object] = {"body": body}
    if header:
        params["header"] = {"type": header, "value": "12345" if header != "text" else "Hi"}
    template = TemplateSpec.from_dict(
        {"name": "t", "language": "en_US", "body_params": len(body), "header": header}
    )
    built = build_message_body(make_request(params=params, callback_data=callback))

    check_shape(built)
    check_template(built, template)
    assert built.get("biz_opaque_callback_data", "") == callback
    if body:
        sent = [
            p["text"]
            for c in built["template"]["components"]
            if c["type"] == "body"
            for p in c["parameters"]
        ]
        assert sent == body
