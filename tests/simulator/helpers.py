"""Raw HTTP helpers for simulator tests (the client is tested on its own)."""

from __future__ import annotations

from typing import Any

import requests

from tests.simulator_fixtures import SIM_PHONE_NUMBER_ID, SIM_TOKEN


def template_body(
    *,
    to: str = "+16505551234",
    name: str = "promo",
    components: list[dict[str, Any]] | None = None,
    callback: str | None = "wb:1",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": "template",
        "template": {
            "name": name,
            "language": {"policy": "deterministic", "code": "en_US"},
            "components": components
            if components is not None
            else [{"type": "body", "parameters": [{"type": "text", "text": "Asha"}]}],
        },
    }
    if callback is not None:
        body["biz_opaque_callback_data"] = callback
    return body


def post(
    url: str,
    body: Any,
    *,
    token: str | None = SIM_TOKEN,
    number: str = SIM_PHONE_NUMBER_ID,
    timeout: float = 5.0,
) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if isinstance(body, bytes):
        return requests.post(
            f"{url}/v23.0/{number}/messages", data=body, headers=headers, timeout=timeout
        )
    return requests.post(
        f"{url}/v23.0/{number}/messages", json=body, headers=headers, timeout=timeout
    )


def error_code(response: requests.Response) -> int:
    return int(response.json()["error"]["code"])
