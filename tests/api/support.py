"""Calling the API in tests, with every response checked against the OpenAPI description."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.test import Client
from jsonschema import Draft202012Validator

from whatsblast.views.api import api_document

DOCUMENT = api_document()


def response_check(path: str, method: str, response: HttpResponse) -> Any:
    """Assert the response is one the description documents; return its JSON body."""
    operation = DOCUMENT["paths"][path][method]
    documented = operation["responses"].get(str(response.status_code))
    assert documented is not None, (
        f"{method.upper()} {path} answered {response.status_code}, which is not documented: "
        f"{response.content[:300]!r}"
    )
    for header in documented.get("headers", {}):
        assert response.has_header(header), f"{response.status_code} lacks {header}"
    content = documented.get("content", {}).get("application/json")
    if content is None:
        return None
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    # Resolve "#/components/..." references against the document's components.
    schema = {**content["schema"], "components": DOCUMENT["components"]}
    Draft202012Validator(schema).validate(body)
    return body


class Api:
    """A test client for /api/v1 holding a default key."""

    def __init__(self, key: str | None = None) -> None:
        self.client = Client()
        self.key = key

    def _auth(self, key: str | None, headers: dict[str, str]) -> dict[str, str]:
        key = self.key if key is None else key
        if key and "Authorization" not in headers:
            headers = {**headers, "Authorization": f"Bearer {key}"}
        return headers

    def send(
        self,
        body: Any = None,
        *,
        key: str | None = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        idempotency_key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[HttpResponse, Any]:
        headers = dict(headers or {})
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        data = raw if raw is not None else json.dumps(body).encode()
        # generic() sends the bytes as they are, whatever charset the content type names.
        response = self.client.generic(
            "POST",
            "/api/v1/messages",
            data=data,
            content_type=content_type,
            headers=self._auth(key, headers),
        )
        return response, response_check("/messages", "post", response)

    def status(self, message_id: int | str, *, key: str | None = None) -> tuple[HttpResponse, Any]:
        response = self.client.get(f"/api/v1/messages/{message_id}", headers=self._auth(key, {}))
        return response, response_check("/messages/{id}", "get", response)


def template_body(number: Any, *, to: str = "+5511987650001", **template: Any) -> dict[str, Any]:
    template.setdefault("name", "otp")
    template.setdefault("language", "en_US")
    template.setdefault("params", {"body": ["123456"]})
    return {"phone_number_id": number.phone_number_id, "to": to, "template": template}


def otp_sender(sim: Any) -> tuple[Any, Api]:
    """A number of the simulator at 80 msg/s with an approved one-parameter ``otp``
    template (in the table and at the simulator), and an API client holding its key."""
    from delivery.api.keys import api_key_create
    from tests.engine_support import number_on
    from tests.factories import make_template

    number = number_on(sim, rate=80)
    make_template(account=number.account, name="otp", body_param_count=1)
    sim.add_template(name="otp", language="en_US", body_params=1)
    _, raw = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
    return number, Api(raw)
