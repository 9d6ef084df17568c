"""POST /api/v1/conversions: refusals in the documented order, a batch, replays stored once.
Every response is checked against the OpenAPI description."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings
from django.utils import timezone

from delivery.api.keys import api_key_create, api_key_revoke
from delivery.models import Conversion, MessageStatus
from tests.api.support import DOCUMENT, response_check
from tests.factories import make_campaign, make_contact, make_message

pytestmark = pytest.mark.django_db

PATH = "/api/v1/conversions"


def post(
    body: Any,
    *,
    key: str | None,
    raw: bytes | None = None,
    content_type: str = "application/json",
    **headers: str,
) -> tuple[HttpResponse, Any]:
    if key:
        headers["Authorization"] = f"Bearer {key}"
    response = Client().generic(
        "POST",
        PATH,
        data=raw if raw is not None else json.dumps(body).encode(),
        content_type=content_type,
        headers=headers,
    )
    return response, response_check("/conversions", "post", response)


@pytest.fixture
def key(db) -> str:
    # Any active key may report conversions, whatever its numbers.
    _, raw = api_key_create(
        name="shop", all_numbers=True, requests_per_second=1000, scopes=["campaigns"]
    )
    return raw


def test_a_batch_is_stored_attributed_and_counted(key: str) -> None:
    campaign = make_campaign()
    contact = make_contact()
    message = make_message(
        campaign=campaign,
        contact=contact,
        to=contact.phone,
        status=MessageStatus.DELIVERED,
        delivered_at=timezone.now() - timedelta(days=1),
    )
    body = {
        "conversions": [
            {"phone": contact.phone, "event": "purchase", "value": 19.9, "currency": "BRL"},
            {"phone": "+5511987654321", "event": "purchase", "id": 77},
            {"phone": "not a phone", "event": "purchase"},
        ]
    }
    response, data = post(body, key=key)
    assert response.status_code == 200
    assert {k: data[k] for k in ("received", "stored", "rejected", "attributed", "unmatched")} == {
        "received": 3,
        "stored": 2,
        "rejected": 1,
        "attributed": 1,
        "unmatched": 1,
    }
    first, second, third = data["results"]
    assert (first["status"], first["message_id"], first["attributed_by"]) == (
        "stored",
        message.pk,
        "delivered",
    )
    assert (second["contact_matched"], second["attributed_by"]) == (False, None)
    assert third["status"] == "rejected" and list(third["errors"]) == ["conversions[2].phone"]
    assert Conversion.objects.count() == 2


def test_a_replay_with_the_same_idempotency_key_stores_once(key: str) -> None:
    contact = make_contact()
    body = {"conversions": [{"phone": contact.phone, "event": "signup"}] * 3}
    first, data = post(body, key=key, **{"Idempotency-Key": "batch-1"})
    assert (first.status_code, data["stored"]) == (200, 3)
    again, replay = post(body, key=key, **{"Idempotency-Key": "batch-1"})
    assert (again.status_code, replay["stored"], replay["duplicates"]) == (200, 0, 3)
    assert [r["status"] for r in replay["results"]] == ["duplicate"] * 3
    # The replay answers with what the first request stored, item for item.
    assert [r["id"] for r in replay["results"]] == [r["id"] for r in data["results"]]
    assert len({r["id"] for r in data["results"]}) == 3
    assert [r["contact_matched"] for r in replay["results"]] == [True] * 3
    assert Conversion.objects.count() == 3


def test_a_malformed_batch_is_refused_whole_naming_each_field(key: str) -> None:
    contact = make_contact()
    body = {
        "conversions": [
            {"phone": contact.phone, "event": "purchase"},
            {"phone": contact.phone, "value": True, "currency": "BRLX"},
            {"event": "purchase", "colour": "red"},
            "purchase",
        ]
    }
    response, data = post(body, key=key)
    assert response.status_code == 400
    assert data["error"]["fields"] == {
        "conversions[1].event": "This field is required.",
        "conversions[1].value": "Must be a number, a decimal string or null.",
        "conversions[1].currency": "3 to 3 characters.",
        "conversions[2].colour": "Unknown field.",
        "conversions[2].phone": "Give the phone or the user_id of the person who converted.",
        "conversions[3]": "Must be an object.",
    }
    assert not Conversion.objects.exists()
    for bad in ({}, {"conversions": []}, {"conversions": {}}, {"conversions": [{}], "x": 1}):
        assert post(bad, key=key)[0].status_code == 400
    assert post(None, key=key, raw=b"{nope")[1]["error"]["code"] == "invalid_json"


@override_settings(CONVERSIONS_MAX_BATCH=2)
def test_more_items_than_the_batch_allows_is_400(key: str) -> None:
    items = [{"phone": "+5511987654321", "event": "x"}] * 3
    response, data = post({"conversions": items}, key=key)
    assert response.status_code == 400
    assert data["error"]["fields"] == {"conversions": "Give 1 to 2 conversions."}


@override_settings(CONVERSIONS_MAX_BODY_BYTES=2048, API_MAX_BODY_BYTES=1024)
def test_every_refusal_comes_in_the_documented_order(db) -> None:
    _, tight = api_key_create(
        name="tight", all_numbers=True, requests_per_second=1, scopes=["campaigns"]
    )
    revoked, revoked_raw = api_key_create(name="gone", all_numbers=True, scopes=["campaigns"])
    api_key_revoke(api_key_id=revoked.pk)
    big = {"conversions": [{"phone": "+5511987654321", "event": "x" * 90}] * 20}  # ~2.3 KiB
    # Over the messages' cap, under the conversions' own: the larger limit applies here.
    fits = {"conversions": [{"phone": "+5511987654321", "event": "x" * 90}] * 12}
    assert 1024 < len(json.dumps(fits)) < 2048 < len(json.dumps(big))

    def code(body: Any, key: str | None, **kwargs: Any) -> tuple[int, str | None]:
        response, data = post(body, key=key, **kwargs)
        error = data.get("error") if isinstance(data, dict) else None
        return response.status_code, error["code"] if error else None

    # 401 before anything else, even a body that breaks every other rule.
    assert code(big, None, content_type="text/plain") == (401, "unauthenticated")
    assert code(big, revoked_raw) == (401, "invalid_api_key")
    assert code(fits, tight) == (200, None)
    # 429 before the content type and size are looked at.
    assert code(big, tight, content_type="text/plain") == (429, "rate_limited")
    _, key = api_key_create(
        name="k", all_numbers=True, requests_per_second=1000, scopes=["campaigns"]
    )
    # 403 for a key without the campaigns scope, after the quota, before the body.
    _, sender = api_key_create(name="sender", all_numbers=True, scopes=["send", "read"])
    assert code(big, sender, content_type="text/plain") == (403, "scope_missing")
    assert code(big, key, content_type="text/plain") == (415, "unsupported_media_type")
    assert code(big, key) == (413, "payload_too_large")
    assert code({"conversions": []}, key, **{"Idempotency-Key": "has space"}) == (
        400,
        "invalid_request",
    )
    response = Client().get(PATH, headers={"Authorization": f"Bearer {key}"})
    response_check("/conversions", "post", response)
    assert (response.status_code, response["Allow"]) == (405, "POST")
    seen = {200, 400, 401, 403, 405, 413, 415, 429}
    assert seen == {int(s) for s in DOCUMENT["paths"]["/conversions"]["post"]["responses"]}
