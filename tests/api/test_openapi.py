"""The OpenAPI description: a valid 3.1 document, served, and true of the real responses.

``tests.api.support.Api`` checks every response of the suite against it; here each
documented status of each operation is provoked once, so none is documented but unreal.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings
from openapi_spec_validator import validate

from delivery.api.keys import api_key_create, api_key_revoke
from tests.api.support import DOCUMENT, Api, response_check, template_body
from whatsblast.views.api import api_document

pytestmark = pytest.mark.django_db


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(api_document())
    assert DOCUMENT["openapi"].startswith("3.1")


def test_the_document_is_served_without_a_key() -> None:
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    served = json.loads(response.content)
    validate(served)
    assert served["servers"] == [{"url": "http://testserver/api/v1"}]
    assert served["paths"] == json.loads(json.dumps(DOCUMENT["paths"]))


@override_settings(API_MAX_BODY_BYTES=1024)
def test_every_documented_status_of_send_is_real(number, other_number, template) -> None:
    key, raw = api_key_create(
        name="k", phone_number_ids=[number.phone_number_id], requests_per_second=1000
    )
    api = Api(raw)
    body = template_body(number)

    def status(*args, **kwargs) -> int:
        return api.send(*args, **kwargs)[0].status_code

    seen = {
        status(body, idempotency_key="a"),  # 202
        status(body, idempotency_key="a"),  # 200, replayed
        status({**body, "to": "nope"}),  # 400
        status(body, key="wb_0123456789_nothing"),  # 401
        status({**body, "phone_number_id": other_number.phone_number_id}),  # 403
        status(template_body(number, to="+5511987650002"), idempotency_key="a"),  # 409
        status({**body, "pad": "x" * 2000}),  # 413
        status(body, content_type="text/plain"),  # 415
        status(template_body(number, name="none")),  # 422
    }
    method = api.client.get("/api/v1/messages")
    response_check("/messages", "post", method)
    seen.add(method.status_code)
    _, tight = api_key_create(
        name="t", phone_number_ids=[number.phone_number_id], requests_per_second=1
    )
    seen |= {Api(tight).send(body)[0].status_code for _ in range(2)}  # 202, 429
    api_key_revoke(api_key_id=key.pk)
    assert seen == {int(code) for code in DOCUMENT["paths"]["/messages"]["post"]["responses"]}


def test_every_documented_status_of_get_is_real(api, number, template) -> None:
    _, created = api.send(template_body(number))
    seen = {
        api.status(created["id"])[0].status_code,
        api.status(created["id"] + 1000)[0].status_code,
        api.status(created["id"], key="wb_0123456789_nothing")[0].status_code,
    }
    method = api.client.delete(f"/api/v1/messages/{created['id']}")
    response_check("/messages/{id}", "get", method)
    seen.add(method.status_code)
    _, tight = api_key_create(
        name="t", phone_number_ids=[number.phone_number_id], requests_per_second=1
    )
    seen |= {Api(tight).status(created["id"])[0].status_code for _ in range(2)}
    _, contacts_only = api_key_create(name="c", scopes=["contacts"])
    response, body = Api(contacts_only).status(created["id"])
    assert (response.status_code, body["error"]["code"]) == (403, "scope_missing")
    seen.add(response.status_code)
    assert seen == {int(code) for code in DOCUMENT["paths"]["/messages/{id}"]["get"]["responses"]}


def test_a_response_off_the_description_is_caught(api, number, template) -> None:
    """The checker itself: an undocumented field fails validation."""
    import jsonschema

    _, created = api.send(template_body(number))
    response = api.client.get(
        f"/api/v1/messages/{created['id']}", headers={"Authorization": f"Bearer {api.key}"}
    )
    tampered = json.loads(response.content)
    tampered["surprise"] = 1
    response.content = json.dumps(tampered).encode()
    with pytest.raises(jsonschema.ValidationError):
        response_check("/messages/{id}", "get", response)
