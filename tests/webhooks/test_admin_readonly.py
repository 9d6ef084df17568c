"""Webhook records are read-only in the admin, even for a superuser."""

from __future__ import annotations

import pytest

from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db


def test_webhook_events_cannot_be_added_changed_or_deleted(admin_client) -> None:
    event = WebhookEvent.objects.create(body=b"{}", body_sha256="0" * 64)
    assert admin_client.get(f"/admin/webhooks/webhookevent/{event.pk}/change/").status_code == 200
    assert admin_client.get("/admin/webhooks/webhookevent/add/").status_code == 403
    assert admin_client.get(f"/admin/webhooks/webhookevent/{event.pk}/delete/").status_code == 403
    response = admin_client.post(
        f"/admin/webhooks/webhookevent/{event.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 403
    assert WebhookEvent.objects.filter(pk=event.pk).exists()
