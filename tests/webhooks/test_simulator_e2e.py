"""End to end over real HTTP: the simulator sends, Meta-style callbacks come back signed,
batched, out of order and duplicated to the live endpoint, and the applier settles them."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from delivery.cloud.client import Accepted, CloudApiClient, SendRequest
from delivery.models import STATUS_RANK, Message
from delivery.simulator.config import SimConfig
from delivery.simulator.server import SimulatorServer
from tests.factories import make_phone_number
from tests.webhooks.support import APP_SECRET, make_message
from webhooks.applier import events_drain
from webhooks.models import UnmatchedStatus, WebhookEvent, WebhookEventStatus

RECIPIENTS = 60


def highest_received(events: list[WebhookEvent]) -> dict[str, str]:
    """Per wamid, the highest-ranked status the stored callbacks carry (the test's oracle)."""
    best: dict[str, str] = {}
    for event in events:
        body = json.loads(bytes(event.body))
        for entry in body["entry"]:
            for change in entry["changes"]:
                for status in change["value"].get("statuses", []):
                    seen = best.get(status["id"])
                    if seen is None or STATUS_RANK[status["status"]] > STATUS_RANK[seen]:
                        best[status["id"]] = status["status"]
    return best


@pytest.mark.django_db(transaction=True)
def test_callbacks_from_the_simulator_settle_every_message(live_server: Any) -> None:
    config = SimConfig(
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        pair_limit_enabled=False,
        webhook_batch_size=25,
        webhook_out_of_order=True,
        webhook_duplicate_fraction=0.3,
        read_fraction=0.5,
        async_failure_fraction=0.1,
        seed=5,
    )
    with SimulatorServer(config) as simulator:
        number = make_phone_number(api_base_url=simulator.url, access_token="sim-token")
        simulator.add_number(
            phone_number_id=number.phone_number_id, access_token="sim-token", rate=1000
        )
        simulator.add_template(name="promo", language="en_US", body_params=1)
        messages = [
            make_message(phone_number=number, status="sending", to=f"+4915{n:09d}")
            for n in range(RECIPIENTS)
        ]
        client = CloudApiClient(api_version="v23.0", connect_timeout=3, read_timeout=10)
        results = client.send_batch(
            [
                SendRequest(
                    base_url=simulator.url,
                    phone_number_id=number.phone_number_id,
                    access_token="sim-token",
                    to=m.to,
                    callback_data=m.callback_data,
                    template_name="promo",
                    language="en_US",
                    params={"body": ["Asha"]},
                )
                for m in messages
            ],
            concurrency=16,
        )
        assert all(isinstance(r, Accepted) for r in results)
        wamids = {
            m.pk: r.wamid for m, r in zip(messages, results, strict=True) if isinstance(r, Accepted)
        }
        # The worker records only half the wamids before the callbacks land: the rest are
        # matched by callback data alone.
        for m in messages[::2]:
            Message.objects.filter(pk=m.pk).update(wamid=wamids[m.pk])
        assert simulator.wait_webhooks_idle(timeout=30)
        stats = simulator.stats()["webhooks"]

    events = list(WebhookEvent.objects.all())
    assert events and all(e.status == WebhookEventStatus.PENDING for e in events)
    # Every POST was answered 200 the first time; identical redeliveries are stored once.
    assert stats["posts"] == stats["posts_ok"] and stats.get("posts_failed", 0) == 0
    assert len(events) <= stats["posts_ok"]
    events_drain(budget_seconds=30)

    expected = highest_received(events)
    assert set(expected) == set(wamids.values())
    by_id = {m.pk: m for m in Message.objects.filter(pk__in=wamids)}
    for message_id, wamid in wamids.items():
        message = by_id[message_id]
        assert message.wamid == wamid
        assert message.status == expected[wamid], (message_id, message.status, expected[wamid])
        if message.status == "failed":
            assert message.last_error_code == 131026
    assert not UnmatchedStatus.objects.exists()
    assert not WebhookEvent.objects.exclude(status=WebhookEventStatus.PROCESSED).exists()
    statuses = defaultdict(int)
    for m in by_id.values():
        statuses[m.status] += 1
    assert statuses["read"] and statuses["failed"] and statuses["delivered"]
