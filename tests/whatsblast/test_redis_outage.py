"""With Redis stopped, no request path answers 500.

PostgreSQL is the source of truth; Redis carries queues, rate limits, caches and counters.
A stopped Redis may slow things down or leave work for the maintenance sweep, but every
page, the API and the webhook still answer: each place says what it could not do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from delivery.api.keys import api_key_create
from delivery.models import Message
from tests.ui.crawl import admin_crawl, world_populate
from tests.ui.support import SUPERUSER, role_or_superuser
from tests.webhooks.support import APP_SECRET, URL, meta_bytes, sign
from webhooks.models import WebhookEvent
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", [MARKETING, SUPPORT, OPERATORS, SUPERUSER])
def test_every_admin_page_answers_without_redis(role: str, stopped_redis: str) -> None:
    world = world_populate(token="t0ken-for-the-outage")
    user = role_or_superuser(role)
    client = Client(raise_request_exception=False)
    client.force_login(user)

    pages = admin_crawl(client)

    errors = {url: page.status for url, page in pages.items() if page.status >= 500}
    assert errors == {}
    assert len(pages) > 20
    if role in (MARKETING, SUPERUSER):
        live = client.get(f"/admin/campaigns/campaign/{world.ids['campaign']}/live.json")
        assert live.status_code == 200


def test_the_api_accepts_a_send_without_redis_and_the_sweep_sends_it_later(
    stopped_redis: str,
) -> None:
    world = world_populate(token="t0ken-for-the-outage")
    _key, raw = api_key_create(name="shop", all_numbers=True)
    body = {
        "phone_number_id": "106540352242922",
        "to": "+5511977776666",
        "template": {"name": "spring_sale", "language": "en_US", "params": {"body": ["Ana"]}},
    }

    response = Client(raise_request_exception=False).post(
        "/api/v1/messages",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )

    assert response.status_code == 202, response.content
    message = Message.objects.get(pk=response.json()["id"])
    assert message.status == "pending"  # stored: the maintenance sweep queues it
    assert world.ids["number"] == message.phone_number_id


def test_a_signed_webhook_is_stored_without_redis(stopped_redis: str, settings: Any) -> None:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    body = meta_bytes({"object": "whatsapp_business_account", "entry": []})

    response = Client().post(
        URL, data=body, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=sign(body)
    )

    assert response.status_code == 200
    assert WebhookEvent.objects.filter(status="pending").count() == 1


def test_health_and_metrics_answer_without_redis(stopped_redis: str) -> None:
    client = Client(raise_request_exception=False)

    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["redis"]["ok"] is False
    assert client.get("/metrics").status_code == 200
