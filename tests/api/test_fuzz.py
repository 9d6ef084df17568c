"""Property: no request body, header or path makes the API answer 500 or off its description.

Random JSON, random bytes, and near-valid requests with one part replaced by junk (wrong
types, huge numbers, deep nesting, NUL, lone surrogates, odd content types and keys). The
test client re-raises any exception a view lets escape, so a crash fails the test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from delivery.api.keys import api_key_create
from tests.api.support import DOCUMENT, Api
from tests.factories import make_phone_number, make_template

pytestmark = pytest.mark.django_db

POST_STATUSES = {int(s) for s in DOCUMENT["paths"]["/messages"]["post"]["responses"]}
GET_STATUSES = {int(s) for s in DOCUMENT["paths"]["/messages/{id}"]["get"]["responses"]}
FUZZ = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
junk_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=any_char, max_size=20),
    st.sampled_from(["", " ", "\x00", "\ud800", "+", "+5511987650001\x00", "9" * 400]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    junk_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(junk_text, inner, max_size=5)
    ),
    max_leaves=30,
)


def valid_body(number_id: str) -> dict[str, Any]:
    return {
        "phone_number_id": number_id,
        "to": "+5511987650001",
        "template": {
            "name": "otp",
            "language": "en_US",
            "params": {
                "body": ["123456"],
                "header": {"type": "text", "value": "Hi"},
                "buttons": [{"sub_type": "url", "index": 0, "value": "x"}],
            },
        },
    }


# Where one part of a valid body is replaced (or removed, or joined by a stray field).
PATHS = [
    (),
    ("phone_number_id",),
    ("to",),
    ("template",),
    ("text",),
    ("template", "name"),
    ("template", "language"),
    ("template", "params"),
    ("template", "params", "body"),
    ("template", "params", "body", 0),
    ("template", "params", "header"),
    ("template", "params", "header", "type"),
    ("template", "params", "header", "value"),
    ("template", "params", "buttons"),
    ("template", "params", "buttons", 0),
    ("template", "params", "buttons", 0, "index"),
    ("template", "params", "buttons", 0, "sub_type"),
]


@st.composite
def near_valid_bodies(draw: st.DrawFn, number_id: str) -> dict[str, Any]:
    """A valid body with one part replaced by junk, removed, or a stray field added."""
    body = valid_body(number_id)
    path = draw(st.sampled_from(PATHS))
    if not path:
        return body
    parent: Any = body
    for step in path[:-1]:
        parent = parent[step]
    action = draw(st.sampled_from(["replace", "remove", "stray"]))
    if action == "remove" and isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif action == "stray" and isinstance(parent, dict):
        parent[draw(junk_text)] = draw(json_values)
    else:
        parent[path[-1]] = draw(json_values)
    return body


def encoded(value: Any) -> bytes:
    return json.dumps(value).encode()


content_types = st.one_of(
    st.just("application/json"),
    st.sampled_from(
        [
            "application/json; charset=utf-8",
            "application/json; charset=latin-1",
            "application/json;;;",
            "text/plain",
            "multipart/form-data; boundary=x",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40),
)
header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=80)


NUMBER_ID = "fuzz-number"


@pytest.fixture
def fuzz_api(db) -> Api:
    number = make_phone_number(phone_number_id=NUMBER_ID)
    make_template(
        account=number.account,
        name="otp",
        body_param_count=1,
        header_format="TEXT",
        header_param="1",
        buttons=[{"index": 0, "type": "URL", "sub_type": "url", "param": "required"}],
    )
    _, raw = api_key_create(name="fuzz", phone_number_ids=[NUMBER_ID], requests_per_second=10**6)
    return Api(raw)


@FUZZ
@given(body=near_valid_bodies(NUMBER_ID), idempotency_key=st.sampled_from([None, "a", "b"]))
def test_no_near_valid_body_makes_the_send_endpoint_fail(fuzz_api, body, idempotency_key) -> None:
    response, payload = fuzz_api.send(body, idempotency_key=idempotency_key)
    event(f"status {response.status_code} {(payload.get('error') or {}).get('code', '')}")
    assert response.status_code in POST_STATUSES


@FUZZ
@given(
    raw=st.one_of(
        json_values.map(encoded),
        st.binary(min_size=1, max_size=200),
        st.integers(1, 3000).map(lambda n: b'{"to": ' + b"[" * n + b"]" * n + b"}"),
    )
)
def test_no_junk_body_makes_the_send_endpoint_fail(fuzz_api, raw) -> None:
    response, _ = fuzz_api.send(raw=raw)
    event(f"status {response.status_code}")
    assert response.status_code in POST_STATUSES


@FUZZ
@given(
    authorization=st.one_of(st.none(), header_values),
    content_type=content_types,
    idempotency_key=st.one_of(st.none(), header_values),
)
def test_no_header_makes_the_send_endpoint_fail(
    fuzz_api, authorization, content_type, idempotency_key
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    response, _ = fuzz_api.send(valid_body(NUMBER_ID), content_type=content_type, headers=headers)
    event(f"status {response.status_code}")
    assert response.status_code in POST_STATUSES


@FUZZ
@given(tail=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), max_size=30))
def test_no_path_makes_the_status_endpoint_fail(fuzz_api, tail) -> None:
    response = fuzz_api.client.get(
        f"/api/v1/messages/{tail}", headers={"Authorization": f"Bearer {fuzz_api.key}"}
    )
    assert response.status_code in GET_STATUSES
    assert json.loads(response.content)["error" if response.status_code != 200 else "id"]
