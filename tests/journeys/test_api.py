"""API v1's events in and journeys: every answer checked against the served document,
every documented status provoked, scopes and numbers held."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings

from campaigns.models import Contact
from delivery.api.keys import api_key_create
from journeys.models import ContactEvent, JourneyInstance, JourneyStatus
from tests.api.support import DOCUMENT, response_check
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, run, template_on

pytestmark = pytest.mark.django_db

CART = {
    "entry": {"type": "event", "event": "cart_updated"},
    "key": "cart_id",
    "goal": {"event": "checkout", "within_days": 3},
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 1}},
        {"id": "remind", "type": "send", "template": "reminder",
         "mapping": {"body": {"1": {"field": "name"}}}},
    ],
}  # fmt: skip


def key(*scopes: str, numbers: list[str] | None = None, rate: int = 10_000) -> str:
    _, raw = api_key_create(
        name=f"k{len(scopes)}{rate}",
        phone_number_ids=numbers or [],
        all_numbers=numbers is None,
        scopes=list(scopes),
        requests_per_second=rate,
    )
    return raw


def call(
    method: str,
    path: str,
    body: Any = None,
    *,
    key: str | None,
    raw: bytes | None = None,
    content_type: str = "application/json",
    documented_as: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[HttpResponse, Any]:
    headers = dict(headers or {})
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    response = Client().generic(
        method.upper(), f"/api/v1{path}", data=data, content_type=content_type, headers=headers
    )
    template = re.sub(r"/\d+", "/{id}", path.split("?", 1)[0])
    return response, response_check(template, documented_as or method.lower(), response)


def status(*args: Any, **kwargs: Any) -> int:
    return call(*args, **kwargs)[0].status_code


def twice(method: str, path: str, scope: str) -> set[int]:
    """A key of 1 request/s: the first call passes the quota, the second is a 429."""
    tight = key(scope, rate=1)
    return {status(method, path, key=tight) for _ in range(2)}


def documented(path: str, method: str) -> set[int]:
    return {int(code) for code in DOCUMENT["paths"][path][method]["responses"]}


@pytest.fixture
def number() -> Any:
    number = make_phone_number()
    template_on(number, "reminder")
    return number


def test_events_start_journeys_and_a_retry_stores_nothing_twice(number: Any) -> None:
    journey_live(number, CART)
    shop = key("campaigns")
    events = [
        {"id": "e1", "phone": "+5511987650001", "name": "cart_updated",
         "properties": {"cart_id": "7781", "total": 129.9}},
        {"id": "e2", "phone": "+55 11 98765-0002", "name": "cart_updated",
         "properties": {"cart_id": "7782"}, "occurred_at": "2026-12-07T18:05:00-03:00"},
        {"id": "e3", "phone": "12345", "name": "cart_updated"},
    ]  # fmt: skip
    response, body = call("post", "/events", {"events": events}, key=shop)
    assert response.status_code == 200
    assert (body["received"], body["stored"], body["rejected"], body["contacts_created"]) == (
        3,
        2,
        1,
        2,
    )
    assert body["results"][2]["errors"] == {
        "events[2].phone": "Not a phone number in international form (e.g. +5511987654321)."
    }
    again = call("post", "/events", {"events": events}, key=shop)[1]
    assert (again["stored"], again["duplicates"]) == (0, 2)
    assert [r["id"] for r in again["results"][:2]] == [r["id"] for r in body["results"][:2]]
    assert ContactEvent.objects.count() == 2
    run()
    assert JourneyInstance.objects.count() == 2
    assert Contact.objects.get(phone="+5511987650002")


def test_a_journey_reads_with_its_figures_and_other_numbers_journeys_are_hidden(
    number: Any,
) -> None:
    journey = journey_live(number, CART, name="carts")
    other = make_phone_number()
    template_on(other, "reminder")
    journey_live(other, CART, name="other shop's carts")
    mine = key("read", numbers=[number.phone_number_id])
    call(
        "post",
        "/events",
        {
            "events": [
                {"phone": "+5511987650001", "name": "cart_updated", "properties": {"cart_id": "1"}}
            ]
        },  # fmt: skip
        key=key("campaigns"),
    )
    run()
    page = call("get", "/journeys", key=mine)[1]
    assert [j["name"] for j in page["data"]] == ["carts"]
    detail = call("get", f"/journeys/{journey.pk}", key=mine)[1]
    assert detail["definition"] == CART
    assert detail["figures"]["entered"] == 1
    assert {s["step"]: s["waiting"] for s in detail["figures"]["steps"]} == {"wait": 1, "remind": 0}
    assert detail["figures"]["goal"]["event"] == "checkout"
    hidden = call("get", f"/journeys/{journey.pk + 1}", key=mine)[0]
    assert hidden.status_code == 404


def test_pause_and_resume_through_the_api(number: Any) -> None:
    journey = journey_live(number, CART)
    shop = key("campaigns")
    paused = call("post", f"/journeys/{journey.pk}/pause", key=shop)[1]
    assert paused["status"] == JourneyStatus.PAUSED
    assert paused["status_reason"].startswith("paused through the API")
    again = call("post", f"/journeys/{journey.pk}/pause", key=shop)
    assert again[0].status_code == 409 and "paused" in again[1]["error"]["message"]
    assert call("post", f"/journeys/{journey.pk}/resume", key=shop)[1]["status"] == "live"


@override_settings(EVENTS_IN_MAX_BODY_BYTES=2048)
def test_every_documented_status_is_real(number: Any) -> None:
    journey = journey_live(number, CART)
    shop, reader, sender = key("campaigns"), key("read"), key("send")
    tight = key("campaigns", rate=1)
    body = {"events": [{"phone": "+5511987650001", "name": "cart_updated"}]}
    events = {
        status("post", "/events", body, key=shop),  # 200
        status("post", "/events", {"events": []}, key=shop),  # 400
        status("post", "/events", {"events": [{"name": "x"}]}, key=shop),  # 400
        status("post", "/events", body, key="wb_0123456789_nothing"),  # 401
        status("post", "/events", body, key=reader),  # 403
        status("get", "/events", key=shop, documented_as="post"),  # 405
        status("post", "/events", {**body, "pad": "x" * 3000}, key=shop),  # 413
        status("post", "/events", raw=b"{}", content_type="text/plain", key=shop),  # 415
        *{status("post", "/events", body, key=tight) for _ in range(2)},  # 200, 429
    }
    assert events == documented("/events", "post")

    listing = {
        status("get", "/journeys", key=reader),  # 200
        status("get", "/journeys?status=nope", key=reader),  # 400
        status("get", "/journeys?limit=0", key=reader),  # 400
        status("get", "/journeys?cursor=", key=reader),  # 400: empty is not left out
        status("get", "/journeys?cursor=nope", key=reader),  # 400
        status("get", "/journeys", key=None),  # 401
        status("get", "/journeys", key=sender),  # 403
        status("post", "/journeys", key=reader, documented_as="get"),  # 405
        *twice("get", "/journeys", "read"),  # 200, 429
    }
    assert listing == documented("/journeys", "get")

    one = f"/journeys/{journey.pk}"
    detail = {
        status("get", one, key=reader),  # 200
        status("get", one, key=None),  # 401
        status("get", one, key=sender),  # 403
        status("get", f"/journeys/{journey.pk + 99}", key=reader),  # 404
        status("delete", one, key=reader, documented_as="get"),  # 405
        *twice("get", one, "read"),  # 200, 429
    }
    assert detail == documented("/journeys/{id}", "get")

    for action, wrong in (("pause", "resume"), ("resume", "resume")):
        path = f"{one}/{action}"
        if action == "resume":
            call("post", f"{one}/pause", key=shop)
        seen = {
            status("post", path, key=shop),  # 200
            status("post", path, key=shop),  # 409: already so
            status("post", path, key=None),  # 401
            status("post", path, key=reader),  # 403
            status("post", f"/journeys/{journey.pk + 99}/{action}", key=shop),  # 404
            status("get", path, key=shop, documented_as="post"),  # 405
            *twice("post", path, "campaigns"),  # 429 (the second, at 1 request/s)
        }
        assert seen == documented("/journeys/{id}/" + action, "post"), (action, wrong)
