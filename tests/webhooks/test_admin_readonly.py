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


def test_only_operators_may_apply_events_again(client, django_user_model) -> None:
    from django.contrib.auth.models import Permission

    event = WebhookEvent.objects.create(body=b"{}", body_sha256="1" * 64, status="processed")
    url = "/admin/webhooks/webhookevent/"
    viewer = django_user_model.objects.create_user(
        "support", password="pw-123456789", is_staff=True
    )
    viewer.user_permissions.add(Permission.objects.get(codename="view_webhookevent"))
    client.force_login(viewer)
    page = client.get(url)
    assert page.status_code == 200 and b"Apply again" not in page.content
    client.post(url, {"action": "requeue", "_selected_action": [event.pk]})
    event.refresh_from_db()
    assert event.status == "processed"
    viewer.user_permissions.add(Permission.objects.get(codename="change_webhookevent"))
    viewer = django_user_model.objects.get(pk=viewer.pk)
    client.force_login(viewer)
    assert b"Apply again" in client.get(url).content
