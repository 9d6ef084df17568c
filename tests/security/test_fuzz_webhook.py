"""Hostile input at the webhook: random and mutated Meta payloads never cause a 500, and
nothing from an unsigned request is stored or applied."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delivery.models import Message
from tests.webhooks.support import APP_SECRET, URL, fixture_json, make_message, meta_bytes
from webhooks.applier import events_drain
from webhooks.models import WebhookEvent
from webhooks.signature import signature_compute

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = (
    "status_sent",
    "status_delivered",
    "status_read",
    "status_failed",
    "status_played",
    "status_unknown",
    "inbound_text",
    "inbound_stop_button",
    "template_status_update",
    "phone_number_quality_update",
    "account_update",
    "business_capability_update",
    "async_errors",
    "batch_multi",
)
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture(autouse=True)
def secret(settings: Any) -> None:
    settings.WHATSAPP_APP_SECRET = APP_SECRET


def post(client: Any, body: bytes, *, signed: bool) -> int:
    headers = {"HTTP_X_HUB_SIGNATURE_256": signature_compute(body=body, secret=APP_SECRET)}
    return client.post(
        URL, data=body, content_type="application/json", **(headers if signed else {})
    ).status_code


def mutate(payload: Any, rng: random.Random, value: Any) -> Any:
    """Replace one randomly chosen node of the payload with ``value``."""
    if isinstance(payload, dict) and payload and rng.random() < 0.8:
        key = rng.choice(list(payload))
        return {**payload, key: mutate(payload[key], rng, value)}
    if isinstance(payload, list) and payload and rng.random() < 0.8:
        index = rng.randrange(len(payload))
        return [*payload[:index], mutate(payload[index], rng, value), *payload[index + 1 :]]
    return value


@FUZZ
@given(body=st.binary(max_size=2048))
def test_random_bytes_unsigned_are_refused_and_not_stored(client: Any, body: bytes) -> None:
    before = WebhookEvent.objects.count()
    assert post(client, body, signed=False) == 403
    assert WebhookEvent.objects.count() == before


@FUZZ
@given(body=st.binary(max_size=2048))
def test_random_bytes_signed_are_acknowledged(client: Any, body: bytes) -> None:
    assert post(client, body, signed=True) == 200


@FUZZ
@given(
    name=st.sampled_from(FIXTURES),
    seed=st.integers(min_value=0, max_value=2**32),
    value=json_values,
)
def test_mutated_meta_payloads_are_stored_and_applied_without_crashing(
    client: Any, name: str, seed: int, value: Any
) -> None:
    payload = mutate(fixture_json(name), random.Random(seed), value)
    assert post(client, meta_bytes(payload), signed=True) == 200
    events_drain(budget_seconds=5)
    # Nothing stays pending: each event is processed, or isolated and marked failed.
    assert not WebhookEvent.objects.filter(status="pending").exists()


def test_deep_nesting_and_invalid_utf8_and_wrong_types(client: Any) -> None:
    deep = b'{"entry":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    assert post(client, deep, signed=True) == 200
    assert (
        post(client, b'{"object": "whatsapp_business_account", "entry": "\xff\xfe"}', signed=True)
        == 200
    )
    wrong_types = {"object": "whatsapp_business_account", "entry": [{"changes": {"field": 7}}]}
    assert post(client, json.dumps(wrong_types).encode(), signed=True) == 200
    events_drain(budget_seconds=5)
    assert not WebhookEvent.objects.filter(status="pending").exists()


def test_a_huge_body_is_refused_before_it_is_read(client: Any, settings: Any) -> None:
    settings.WEBHOOK_MAX_BODY_BYTES = 1024
    body = b"{" + b" " * 5000 + b"}"
    assert post(client, body, signed=True) == 413
    assert not WebhookEvent.objects.exists()


RANK = {"sent": 1, "failed": 2, "delivered": 3, "read": 4}


@FUZZ
@given(
    order=st.lists(st.sampled_from(["sent", "delivered", "read"]), min_size=1, max_size=6),
    replays=st.integers(min_value=1, max_value=3),
)
def test_replayed_and_reordered_posts_apply_once_and_never_backwards(
    client: Any, order: list[str], replays: int
) -> None:
    message = make_message(status="sending")
    for status in order:
        body = meta_bytes(_statuses_payload(message, [status]))
        for _ in range(replays):  # Meta redelivers: the same bytes, several times
            assert post(client, body, signed=True) == 200
        events_drain(budget_seconds=5)
    message.refresh_from_db()
    assert message.status == max(order, key=RANK.__getitem__)
    # A redelivered identical POST is stored once.
    marker = f'wamid.fuzz{message.pk}"'.encode()
    stored = [e for e in WebhookEvent.objects.all() if marker in bytes(e.body)]
    assert len(stored) == len(set(order))


def _statuses_payload(message: Message, order: list[str]) -> dict[str, Any]:
    payload = fixture_json("status_sent")
    value = payload["entry"][0]["changes"][0]["value"]
    template = value["statuses"][0]
    value["statuses"] = [
        {
            **template,
            "id": f"wamid.fuzz{message.pk}",
            "status": status,
            "timestamp": str(1_750_000_000 + RANK[status]),
            "biz_opaque_callback_data": f"wb:{message.pk}",
        }
        for status in order
    ]
    return payload
