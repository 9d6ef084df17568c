"""Security review: anonymous users, CSRF, signature bypasses, secrets in pages and logs."""

from __future__ import annotations

import hmac
import logging
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from tests.factories import make_phone_number
from tests.webhooks.support import APP_SECRET, URL
from webhooks import signature
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db

TOKEN = "EAAG-very-secret-access-token-1234567890"  # noqa: S105 - a test value


def admin_urls() -> list[str]:
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
        urls.append(reverse("admin:{}_{}_add".format(*info)))
    return urls


def test_every_admin_page_sends_anonymous_users_to_the_login(client: Client) -> None:
    for url in admin_urls():
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url


def test_staff_without_permissions_see_no_model_page(
    client: Client, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("nobody", password="pw-123456789", is_staff=True)
    client.force_login(user)
    for url in admin_urls()[1:]:
        assert client.get(url).status_code == 403, url


def test_api_refuses_anonymous_callers(client: Client) -> None:
    assert (
        client.post("/api/v1/messages", data="{}", content_type="application/json").status_code
        == 401
    )
    assert client.get("/api/v1/messages/1").status_code == 401


def test_forms_require_a_csrf_token(django_user_model: Any) -> None:
    django_user_model.objects.create_superuser("root", password="pw-123456789")
    csrf_client = Client(enforce_csrf_checks=True)
    response = csrf_client.post(
        reverse("admin:login"), {"username": "root", "password": "pw-123456789"}
    )
    assert response.status_code == 403
    csrf_client.force_login(django_user_model.objects.get(username="root"))
    number = make_phone_number()
    url = reverse("admin:campaigns_phonenumber_change", args=[number.pk])
    assert csrf_client.post(url, {"display_phone_number": "+15550000001"}).status_code == 403


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "SHA256={digest}",
        "sha1={digest}",
        "{digest}",
        "sha256={digest}0",
        "sha256= {wrong}",
        "sha256=\u00e9\u00e9",
    ],
)
def test_webhook_signature_cannot_be_bypassed(
    client: Client, settings: Any, header: str | None
) -> None:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    digest = signature.signature_compute(body=body, secret=APP_SECRET).removeprefix("sha256=")
    headers = {}
    if header is not None:
        headers["HTTP_X_HUB_SIGNATURE_256"] = header.format(digest=digest, wrong="0" * 64)
    response = client.post(URL, data=body, content_type="application/json", **headers)
    assert response.status_code == 403
    assert not WebhookEvent.objects.exists()


def test_webhook_signature_is_compared_in_constant_time(monkeypatch: Any) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(signature.hmac, "compare_digest", spy)
    body = b"{}"
    assert signature.signature_is_valid(
        body=body, header=signature.signature_compute(body=body, secret="s"), secret="s"
    )
    assert len(calls) == 1


def test_access_token_never_appears_in_admin_pages(admin_client: Client) -> None:
    number = make_phone_number(access_token=TOKEN)
    pages = [
        reverse("admin:campaigns_phonenumber_changelist"),
        reverse("admin:campaigns_phonenumber_change", args=[number.pk]),
        reverse("admin:campaigns_phonenumber_history", args=[number.pk]),
    ]
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert TOKEN not in response.content.decode(), url


def test_access_token_never_appears_in_logs_of_a_failed_send(caplog: Any) -> None:
    from delivery.cloud.client import CloudApiClient, SendRequest

    caplog.set_level(logging.DEBUG)
    client = CloudApiClient(api_version="v23.0", connect_timeout=0.2, read_timeout=0.2)
    result = client.send(
        SendRequest(
            base_url="http://127.0.0.1:9",  # nothing listens: a connection error
            phone_number_id="pn",
            access_token=TOKEN,
            to="+5511999990000",
            callback_data="wb:1",
            template_name="promo",
            language="en_US",
            params={"body": ["x"]},
        )
    )
    assert TOKEN not in repr(result)
    assert TOKEN not in caplog.text


def test_the_rq_dashboard_needs_its_permission(client: Client, django_user_model: Any) -> None:
    from django.contrib.auth.models import Permission

    url = reverse("admin:django_rq_dashboard_changelist")
    staff = django_user_model.objects.create_user("staff", password="pw-123456789", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403
    staff.user_permissions.add(
        Permission.objects.get(codename="admin", content_type__app_label="django_rq")
    )
    staff = django_user_model.objects.get(pk=staff.pk)  # drop the permission cache
    client.force_login(staff)
    assert client.get(url).status_code == 200
