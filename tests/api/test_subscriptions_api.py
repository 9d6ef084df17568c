"""``/api/v1/subscriptions``: events out through the API, each response checked against the
OpenAPI description, and every status it documents provoked once per operation.

A key sees and manages only the subscriptions it created; the secret is in the create's
answer (and its idempotent replay) and in no other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings
from django.utils import timezone
from jsonschema import Draft202012Validator

from delivery.api.keys import api_key_create
from delivery.api.openapi_events import CUSTOM_EVENT_TYPE as OPENAPI_CUSTOM_EVENT_TYPE
from delivery.api.openapi_events import EVENT_TYPE_NAMES
from delivery.events.router import events_route
from delivery.events.signing import signature_verify
from delivery.events.subscriptions import subscription_create, subscription_pause
from delivery.events.types import CUSTOM_EVENT_TYPE, EVENT_TYPES
from delivery.models import ApiCreated, Event, EventDeadLetter, EventOutbox, EventSubscription
from tests.api.support import DOCUMENT, response_check
from tests.events.receiver import Receiver

pytestmark = pytest.mark.django_db

NO_KEY = ""
UNKNOWN_KEY = "wb_0123456789_nothing"


class Hooks:
    """An API client for the subscription endpoints holding a default key."""

    def __init__(self, key: str) -> None:
        self.client = Client()
        self.key = key

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | None = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        idempotency_key: str | None = None,
        documented_as: str | None = None,
    ) -> tuple[HttpResponse, Any]:
        """Call ``path`` (under /api/v1) and check the answer against the operation it
        belongs to (``documented_as``: the operation whose 405 a wrong method meets)."""
        key = self.key if key is None else key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        response = self.client.generic(
            method.upper(),
            f"/api/v1{path}",
            data=data,
            content_type=content_type,
            headers=headers,
        )
        template = re.sub(r"/\d+", "/{id}", path.split("?", 1)[0])
        return response, response_check(template, documented_as or method.lower(), response)

    def create(self, **fields: Any) -> tuple[HttpResponse, Any]:
        fields.setdefault("name", "Order system")
        fields.setdefault("url", "https://hooks.example.com/whatsblast")
        return self.call("post", "/subscriptions", fields)


def new_key(name: str, *scopes: str, rate: int = 10_000) -> str:
    numbers = {"all_numbers": True} if {"send", "campaigns"} & set(scopes) else {}
    _, raw = api_key_create(name=name, scopes=list(scopes), requests_per_second=rate, **numbers)
    return raw


@pytest.fixture
def hooks() -> Hooks:
    return Hooks(new_key("hooks", "campaigns"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def dead_letters(subscription_id: int, count: int, *, error: str = "HTTP 500: down") -> list[Event]:
    """``count`` events the subscription's receiver did not take, set aside as the
    deliverer sets them aside."""
    EventOutbox.objects.bulk_create(
        [
            EventOutbox(
                event_type="message.delivered",
                message_id=100 + i,
                data={"message_id": 100 + i, "status": "delivered"},
                occurred_at=timezone.now() - timedelta(days=1, minutes=count - i),
            )
            for i in range(count)
        ]
    )
    events_route()
    events = list(Event.objects.order_by("-seq")[:count])[::-1]
    # The deliverer moves the cursor past what it sets aside.
    EventSubscription.objects.filter(pk=subscription_id).update(cursor=events[-1].seq)
    EventDeadLetter.objects.bulk_create(
        [
            EventDeadLetter(subscription_id=subscription_id, event=e, attempts=7, last_error=error)
            for e in events
        ]
    )
    return events


# --- create, read, list ------------------------------------------------------------------


def test_create_answers_the_secret_once_and_no_read_shows_it(hooks: Hooks) -> None:
    response, created = hooks.create(event_types=["message.failed", "reply.received"])

    assert response.status_code == 201
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(secret) > 30
    assert response["Location"] == f"http://testserver/api/v1/subscriptions/{created['id']}"
    assert created["event_types"] == ["message.failed", "reply.received"]
    assert (created["active"], created["backlog"], created["dead_letters_waiting"]) == (
        True,
        0,
        0,
    )
    stored = EventSubscription.objects.get(pk=created["id"])
    assert stored.secret.reveal() == secret and stored.api_key is not None

    _, one = hooks.call("get", f"/subscriptions/{created['id']}")
    _, page = hooks.call("get", "/subscriptions")
    assert "secret" not in one and all("secret" not in row for row in page["data"])
    assert secret not in json.dumps(one) + json.dumps(page)
    assert one == {k: v for k, v in created.items() if k != "secret"}


def test_an_idempotent_create_is_made_once_and_its_retry_answers_the_same(hooks: Hooks) -> None:
    body = {"name": "CRM", "url": "http://crm.internal:8080/hooks?x=1"}

    first, created = hooks.call("post", "/subscriptions", body, idempotency_key="sub-1")
    again, replayed = hooks.call("post", "/subscriptions", body, idempotency_key="sub-1")
    other, refused = hooks.call(
        "post", "/subscriptions", {**body, "name": "CRM 2"}, idempotency_key="sub-1"
    )

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert again["Idempotent-Replayed"] == "true" and again["Location"] == first["Location"]
    assert replayed == created  # the retry of a lost answer gets the secret it lost
    assert refused["error"]["code"] == "idempotency_key_reused"
    assert EventSubscription.objects.count() == 1
    assert ApiCreated.objects.get().operation == "createSubscription"
    # A create without a key is made each time.
    hooks.call("post", "/subscriptions", body)
    hooks.call("post", "/subscriptions", body)
    assert EventSubscription.objects.count() == 3


def test_a_key_sees_and_manages_only_the_subscriptions_it_created(hooks: Hooks) -> None:
    mine = [hooks.create(name=f"mine {i}")[1]["id"] for i in range(3)]
    other = Hooks(new_key("other", "campaigns"))
    theirs = other.create(name="theirs")[1]["id"]
    from_admin, _ = subscription_create(name="operators'", url="https://ops.example.com/h")

    _, first = hooks.call("get", "/subscriptions?limit=2")
    _, second = hooks.call("get", f"/subscriptions?limit=2&cursor={first['next_cursor']}")
    assert [row["id"] for row in first["data"] + second["data"]] == mine
    assert second["next_cursor"] is None
    assert [row["id"] for row in other.call("get", "/subscriptions")[1]["data"]] == [theirs]

    for foreign in (theirs, from_admin.pk):
        for method, path in (
            ("get", f"/subscriptions/{foreign}"),
            ("delete", f"/subscriptions/{foreign}"),
            ("post", f"/subscriptions/{foreign}/resume"),
            ("get", f"/subscriptions/{foreign}/dead-letters"),
            ("post", f"/subscriptions/{foreign}/dead-letters/replay"),
        ):
            response, body = hooks.call(method, path)
            assert (response.status_code, body["error"]["code"]) == (404, "not_found"), path
    assert EventSubscription.objects.count() == 5


def test_reading_takes_campaigns_or_read_and_every_change_campaigns(hooks: Hooks) -> None:
    created = hooks.create()[1]["id"]
    reader = Hooks(new_key("reader", "read"))
    sender = Hooks(new_key("sender", "send"))

    _, page = reader.call("get", "/subscriptions")
    assert page == {"data": [], "next_cursor": None}  # a read key creates none to read
    assert reader.call("get", f"/subscriptions/{created}")[0].status_code == 404
    for client, method, path in (
        (reader, "post", "/subscriptions"),
        (reader, "delete", f"/subscriptions/{created}"),
        (reader, "post", f"/subscriptions/{created}/resume"),
        (reader, "post", f"/subscriptions/{created}/dead-letters/replay"),
        (sender, "get", "/subscriptions"),
        (sender, "post", "/subscriptions"),
        (sender, "get", f"/subscriptions/{created}"),
        (sender, "get", f"/subscriptions/{created}/dead-letters"),
    ):
        response, body = client.call(method, path, {"name": "x", "url": "https://x.example"})
        assert (response.status_code, body["error"]["code"]) == (403, "scope_missing"), path
    assert EventSubscription.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://x.example"}, "name"),
        ({"name": "   ", "url": "https://x.example"}, "name"),
        ({"name": "two\nlines", "url": "https://x.example"}, "name"),
        ({"name": "n" * 201, "url": "https://x.example"}, "name"),
        ({"name": "nul\x00", "url": "https://x.example"}, "name"),
        ({"name": "x"}, "url"),
        ({"name": "x", "url": "ftp://x.example/h"}, "url"),
        ({"name": "x", "url": "HTTPS://x.example/h"}, "url"),
        ({"name": "x", "url": "https://x.example/a b"}, "url"),
        ({"name": "x", "url": "https://user:pw@x.example/"}, "url"),
        ({"name": "x", "url": "https://[::1]/"}, "url"),
        ({"name": "x", "url": "https://x.example:83258/"}, "url"),  # past 65535
        ({"name": "x", "url": "https://x.example:0/"}, "url"),
        ({"name": "x", "url": "https://x.example:080/"}, "url"),
        ({"name": "\ufeff", "url": "https://x.example"}, "name"),
        ({"name": "x", "url": "https://x.example/" + "a" * 2000}, "url"),
        ({"name": "x", "url": "https://x.example", "event_types": ["message.lost"]}, "event_types"),
        ({"name": "x", "url": "https://x.example", "event_types": "message.sent"}, "event_types"),
        ({"name": "x", "url": "https://x.example", "event_types": None}, "event_types"),
        ({"name": "x", "url": "https://x.example", "secret": "mine"}, "secret"),
    ],
)
def test_a_body_the_document_refuses_is_refused_naming_the_field(
    hooks: Hooks, body: dict[str, Any], field: str
) -> None:
    response, answer = hooks.call("post", "/subscriptions", body)

    assert response.status_code == 400 and answer["error"]["code"] == "invalid_request"
    assert field in answer["error"]["fields"]
    assert not request_schema().is_valid(body)
    assert not EventSubscription.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "url": "http://127.0.0.1:8000/hooks"},
        {"name": "x", "url": "https://x.example:65535/"},
        {"name": "x", "url": "https://x.example:1"},
        {"name": " Pedidos — São Paulo ", "url": "https://a.b-c.example/p/a?t=1&u=2#frag"},
        {"name": "注文", "url": "https://x.example", "event_types": []},
        {"name": "x", "url": "https://x.example", "event_types": ["guard.acted", "guard.acted"]},
    ],
)
def test_a_body_the_document_accepts_is_accepted(hooks: Hooks, body: dict[str, Any]) -> None:
    assert request_schema().is_valid(body)
    response, created = hooks.call("post", "/subscriptions", body)
    assert response.status_code == 201, created
    assert created["name"] == body["name"].strip()
    assert created["event_types"] == sorted(set(body.get("event_types", [])))


def request_schema() -> Draft202012Validator:
    schema = {
        "$ref": "#/components/schemas/SubscriptionRequest",
        "components": DOCUMENT["components"],
    }
    return Draft202012Validator(schema)


def test_the_documented_event_types_are_the_services() -> None:
    assert EVENT_TYPE_NAMES == tuple(EVENT_TYPES)
    own, journeys = DOCUMENT["components"]["schemas"]["EventType"]["anyOf"]
    assert own["enum"] == list(EVENT_TYPES)
    # A journey's own types: the service's pattern, the same text.
    assert journeys["pattern"] == CUSTOM_EVENT_TYPE == OPENAPI_CUSTOM_EVENT_TYPE


# --- delete, resume, dead letters, replay ------------------------------------------------


def test_delete_forgets_the_subscription_and_its_dead_letters(hooks: Hooks) -> None:
    created = hooks.create()[1]["id"]
    dead_letters(created, 2)

    response, _ = hooks.call("delete", f"/subscriptions/{created}")

    assert response.status_code == 204 and response.content == b""
    assert hooks.call("get", f"/subscriptions/{created}")[0].status_code == 404
    assert hooks.call("delete", f"/subscriptions/{created}")[0].status_code == 404
    assert not EventSubscription.objects.exists() and not EventDeadLetter.objects.exists()


def test_resume_carries_on_a_paused_subscription(hooks: Hooks) -> None:
    created = hooks.create()[1]["id"]
    subscription = EventSubscription.objects.get(pk=created)
    subscription_pause(subscription=subscription, reason="Paused after failing for 1 h 0 min")
    EventSubscription.objects.filter(pk=created).update(
        failing_since=timezone.now() - timedelta(hours=1), last_error="HTTP 503: busy"
    )

    _, paused = hooks.call("get", f"/subscriptions/{created}")
    assert (paused["active"], paused["paused_reason"]) == (
        False,
        "Paused after failing for 1 h 0 min",
    )
    assert paused["failing_since"] is not None and paused["last_error"] == "HTTP 503: busy"
    response, resumed = hooks.call("post", f"/subscriptions/{created}/resume")

    assert response.status_code == 200
    assert (resumed["active"], resumed["paused_reason"], resumed["failing_since"]) == (
        True,
        "",
        None,
    )
    # Resuming an active one changes nothing.
    assert hooks.call("post", f"/subscriptions/{created}/resume")[1] == resumed


def test_a_test_event_reaches_the_receiver_signed_and_leaves_deliveries_alone(
    hooks: Hooks, receiver: Receiver
) -> None:
    created = hooks.create(url=receiver.url)[1]
    before = EventSubscription.objects.values("cursor", "attempts", "next_attempt_at").get()
    EventSubscription.objects.update(active=False, paused_reason="mending the receiver")

    response, answer = hooks.call("post", f"/subscriptions/{created['id']}/ping")

    assert (response.status_code, answer) == (200, {"delivered": True, "error": None})
    (post,) = receiver.received
    assert json.loads(post.body)["subscription_id"] == created["id"]
    (event,) = post.events
    assert (event["type"], event["sequence"], event["message_id"]) == ("ping", 0, None)
    assert event["data"] == {"subscription": created["name"]}
    assert receiver.all_signed(created["secret"])
    after = EventSubscription.objects.values("cursor", "attempts", "next_attempt_at").get()
    assert after == before and not EventSubscription.objects.get().active  # still paused
    assert not EventDeadLetter.objects.exists()

    receiver.mode = "error"
    response, refused = hooks.call("post", f"/subscriptions/{created['id']}/ping")
    assert (response.status_code, refused["delivered"]) == (200, False)
    assert refused["error"].startswith("HTTP 500: receiver failing")
    assert EventSubscription.objects.values("cursor", "attempts", "next_attempt_at").get() == before


def test_dead_letters_are_listed_and_replayed_to_the_receiver(
    hooks: Hooks, receiver: Receiver
) -> None:
    created = hooks.create(url=receiver.url)[1]
    events = dead_letters(created["id"], 3)

    _, page = hooks.call("get", f"/subscriptions/{created['id']}/dead-letters?limit=2")
    _, rest = hooks.call(
        "get", f"/subscriptions/{created['id']}/dead-letters?cursor={page['next_cursor']}"
    )
    rows = page["data"] + rest["data"]
    assert [row["sequence"] for row in rows] == [e.seq for e in events]
    assert rows[0]["event_id"] == str(events[0].event_id)
    assert rows[0]["event_type"] == "message.delivered" and rows[0]["message_id"] == 100
    assert rows[0]["data"] == {"message_id": 100, "status": "delivered"}
    assert {(r["attempts"], r["last_error"], r["replayed_at"]) for r in rows} == {
        (7, "HTTP 500: down", None)
    }
    _, shown = hooks.call("get", f"/subscriptions/{created['id']}")
    assert shown["dead_letters_waiting"] == 3

    response, replayed = hooks.call("post", f"/subscriptions/{created['id']}/dead-letters/replay")

    assert (response.status_code, replayed) == (200, {"replayed": 3})
    assert [e["id"] for e in receiver.events()] == [str(e.event_id) for e in events]
    assert receiver.all_signed(created["secret"])
    assert not EventDeadLetter.objects.filter(replayed_at__isnull=True).exists()
    _, after = hooks.call("get", f"/subscriptions/{created['id']}/dead-letters")
    assert all(row["replayed_at"] for row in after["data"])
    assert hooks.call("get", f"/subscriptions/{created['id']}")[1]["dead_letters_waiting"] == 0
    # Nothing left to replay: nothing is sent.
    assert hooks.call("post", f"/subscriptions/{created['id']}/dead-letters/replay")[1] == {
        "replayed": 0
    }
    assert len(receiver.received) == 1


def test_a_replay_the_receiver_refuses_is_a_502_and_the_letters_stay(
    hooks: Hooks, receiver: Receiver
) -> None:
    created = hooks.create(url=receiver.url)[1]["id"]
    dead_letters(created, 2)
    receiver.mode = "error"

    response, body = hooks.call("post", f"/subscriptions/{created}/dead-letters/replay")

    assert (response.status_code, body["error"]["code"]) == (502, "receiver_failed")
    assert "HTTP 500" in body["error"]["message"] and "2 dead letter(s)" in body["error"]["message"]
    assert EventDeadLetter.objects.filter(replayed_at__isnull=True).count() == 2
    assert set(EventDeadLetter.objects.values_list("last_error", flat=True)) == {
        "HTTP 500: receiver failing"
    }
    receiver.mode = "ok"
    assert hooks.call("post", f"/subscriptions/{created}/dead-letters/replay")[1] == {"replayed": 2}
    assert all(
        signature_verify(
            secret=EventSubscription.objects.get(pk=created).secret.reveal(),
            header=post.signature,
            body=post.body,
        )
        for post in receiver.received
    )


def test_the_backlog_counts_the_events_after_the_subscriptions_cursor(hooks: Hooks) -> None:
    created = hooks.create()[1]["id"]
    EventOutbox.objects.bulk_create(
        [EventOutbox(event_type="message.sent", data={"i": i}) for i in range(4)]
    )
    events_route()

    assert hooks.call("get", f"/subscriptions/{created}")[1]["backlog"] == 4
    assert hooks.call("get", "/subscriptions")[1]["data"][0]["backlog"] == 4


# --- every documented status, provoked -----------------------------------------------------


def documented(path: str, method: str) -> set[int]:
    return {int(code) for code in DOCUMENT["paths"][path][method]["responses"]}


def statuses_of(hooks: Hooks, method: str, path: str, **kwargs: Any) -> int:
    return hooks.call(method, path, **kwargs)[0].status_code


def too_many(method: str, path: str, **kwargs: Any) -> set[int]:
    """The first call of a key limited to 1 request/s passes the quota, the second not."""
    tight = Hooks(new_key("tight", "campaigns", rate=1))
    return {statuses_of(tight, method, path, **kwargs) for _ in range(2)}


@override_settings(API_MAX_BODY_BYTES=1024)
def test_every_documented_status_of_create_and_list_is_real(hooks: Hooks) -> None:
    body = {"name": "Shop", "url": "https://shop.example/hooks"}
    sender = new_key("sender", "send")
    create = {
        statuses_of(hooks, "post", "/subscriptions", body=body, idempotency_key="a"),  # 201
        statuses_of(hooks, "post", "/subscriptions", body=body, idempotency_key="a"),  # 200
        statuses_of(hooks, "post", "/subscriptions", body={**body, "url": "nope"}),  # 400
        statuses_of(hooks, "post", "/subscriptions", body=body, key=UNKNOWN_KEY),  # 401
        statuses_of(hooks, "post", "/subscriptions", body=body, key=sender),  # 403
        statuses_of(hooks, "put", "/subscriptions", body=body, documented_as="post"),  # 405
        statuses_of(  # 409
            hooks, "post", "/subscriptions", body={**body, "name": "B"}, idempotency_key="a"
        ),
        statuses_of(hooks, "post", "/subscriptions", body={**body, "pad": "x" * 2000}),  # 413
        statuses_of(  # 415
            hooks,
            "post",
            "/subscriptions",
            raw=json.dumps(body).encode(),
            content_type="text/plain",
        ),
        *too_many("post", "/subscriptions", body=body),  # 201, 429
    }
    assert create == documented("/subscriptions", "post")

    listing = {
        statuses_of(hooks, "get", "/subscriptions"),  # 200
        statuses_of(hooks, "get", "/subscriptions?limit=0"),  # 400
        statuses_of(hooks, "get", "/subscriptions?cursor=nope"),  # 400
        statuses_of(hooks, "get", "/subscriptions?cursor="),  # 400: empty is not left out
        statuses_of(hooks, "get", "/subscriptions?limit="),  # 400
        statuses_of(hooks, "get", "/subscriptions", key=NO_KEY),  # 401
        statuses_of(hooks, "get", "/subscriptions", key=sender),  # 403
        statuses_of(hooks, "delete", "/subscriptions", documented_as="get"),  # 405
        *too_many("get", "/subscriptions"),  # 200, 429
    }
    assert listing == documented("/subscriptions", "get")


def test_every_documented_status_of_one_subscription_is_real(
    hooks: Hooks, receiver: Receiver
) -> None:
    sender = new_key("sender", "send")
    one = hooks.create(url=receiver.url)[1]["id"]
    missing = one + 1000
    seen: dict[tuple[str, str], set[int]] = {}

    def provoke(method: str, template: str, *, doomed: bool = False) -> None:
        path = template.replace("{id}", str(one))
        statuses = {
            statuses_of(hooks, method, template.replace("{id}", str(missing))),  # 404
            statuses_of(hooks, method, path, key=UNKNOWN_KEY),  # 401
            statuses_of(hooks, method, path, key=sender),  # 403
            statuses_of(hooks, "patch", path, documented_as=method),  # 405
            *too_many(method, path),  # 404 (another key's), 429
        }
        if not doomed:
            statuses.add(statuses_of(hooks, method, path))  # 2xx
        seen[(template, method)] = statuses

    provoke("get", "/subscriptions/{id}")
    provoke("post", "/subscriptions/{id}/resume")
    provoke("get", "/subscriptions/{id}/dead-letters")
    seen[("/subscriptions/{id}/dead-letters", "get")].add(
        statuses_of(hooks, "get", f"/subscriptions/{one}/dead-letters?limit=1001")  # 400
    )
    dead_letters(one, 1)
    receiver.mode = "error"
    provoke("post", "/subscriptions/{id}/dead-letters/replay", doomed=True)
    replay = seen[("/subscriptions/{id}/dead-letters/replay", "post")]
    replay.add(statuses_of(hooks, "post", f"/subscriptions/{one}/dead-letters/replay"))  # 502
    receiver.mode = "ok"
    replay.add(statuses_of(hooks, "post", f"/subscriptions/{one}/dead-letters/replay"))  # 200
    provoke("post", "/subscriptions/{id}/ping")
    provoke("delete", "/subscriptions/{id}")  # last: 204

    for (template, method), statuses in seen.items():
        assert statuses == documented(template, method), (template, method)
