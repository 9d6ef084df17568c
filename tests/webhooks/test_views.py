"""/webhooks/whatsapp over HTTP: handshake, signature, size cap, durable storage."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.test import Client, RequestFactory

from tests.webhooks.support import URL, VERIFY_TOKEN, fixture_bytes, sign
from webhooks.models import WebhookEvent, WebhookEventStatus
from webhooks.services import DEBOUNCE_KEY
from whatsblast.views import webhooks as views

pytestmark = pytest.mark.django_db


def post(client: Client, body: bytes, signature: str | None = None, **headers: Any) -> Any:
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post(URL, data=body, content_type="application/json", headers=headers)


def test_the_handshake_answers_the_challenge_as_plain_text(client: Client) -> None:
    response = client.get(
        URL,
        {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1158201444"},
    )
    assert response.status_code == 200
    assert response.content == b"1158201444"
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize(
    "params",
    [
        {"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "1"},
        {"hub.mode": "unsubscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"},
        {"hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"},
        {},
    ],
)
def test_the_handshake_refuses_a_bad_token_or_mode(client: Client, params: dict[str, str]) -> None:
    response = client.get(URL, params)
    assert response.status_code == 403
    assert b"1" not in response.content


def test_the_handshake_is_refused_when_no_verify_token_is_configured(
    client: Client, settings: Any
) -> None:
    settings.WHATSAPP_VERIFY_TOKEN = None
    response = client.get(
        URL, {"hub.mode": "subscribe", "hub.verify_token": "", "hub.challenge": "1"}
    )
    assert response.status_code == 403


def test_a_signed_callback_is_stored_raw_and_answered_200(client: Client) -> None:
    body = fixture_bytes("status_sent")
    response = post(client, body, sign(body))
    assert response.status_code == 200
    event = WebhookEvent.objects.get()
    assert bytes(event.body) == body
    assert event.body_sha256 == hashlib.sha256(body).hexdigest()
    assert event.status == WebhookEventStatus.PENDING


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "sha256=",
        "sha256=" + "0" * 64,
        "sha1=abc",
        "md5=" + hashlib.sha256(b"x").hexdigest(),
    ],
)
def test_a_missing_empty_wrong_or_misprefixed_signature_is_403(
    client: Client, signature: str | None
) -> None:
    body = fixture_bytes("status_sent")
    assert post(client, body, signature).status_code == 403
    assert not WebhookEvent.objects.exists()


def test_the_signature_must_cover_the_exact_bytes_sent(client: Client) -> None:
    raw = fixture_bytes("inbound_text")
    reserialised = json.dumps(json.loads(raw)).encode()
    assert post(client, raw, sign(reserialised)).status_code == 403
    assert post(client, raw, sign(raw)).status_code == 200


def test_a_signature_without_its_prefix_is_403(client: Client) -> None:
    body = fixture_bytes("status_sent")
    assert post(client, body, sign(body).removeprefix("sha256=")).status_code == 403


def test_without_an_app_secret_every_post_is_refused_and_logged_once(
    client: Client, settings: Any, caplog: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(views, "_missing_secret_logged", False)
    settings.WHATSAPP_APP_SECRET = None
    body = fixture_bytes("status_sent")
    assert post(client, body, sign(body, "")).status_code == 403
    assert post(client, body, sign(body)).status_code == 403
    assert not WebhookEvent.objects.exists()
    errors = [r for r in caplog.records if "WHATSAPP_APP_SECRET" in r.getMessage()]
    assert len(errors) == 1 and errors[0].levelname == "ERROR"


def test_a_redelivered_identical_body_is_stored_once(client: Client) -> None:
    body = fixture_bytes("status_delivered")
    assert post(client, body, sign(body)).status_code == 200
    assert post(client, body, sign(body)).status_code == 200
    assert WebhookEvent.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2, 3]", "not an object"),
        (b'{"object": "page", "entry": []}', "object is 'page'"),
        (b'{"object": "whatsapp_business_account", "entry": {}}', "entry is not a list"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
)
def test_signed_malformed_json_is_stored_as_rejected_and_answered_200(
    client: Client, body: bytes, reason: str
) -> None:
    response = post(client, body, sign(body))
    assert response.status_code == 200
    event = WebhookEvent.objects.get()
    assert event.status == WebhookEventStatus.REJECTED
    assert reason in event.error
    assert event.processed_at is not None


def test_a_body_over_the_cap_is_413_by_its_declared_length(client: Client, settings: Any) -> None:
    settings.WEBHOOK_MAX_BODY_BYTES = 2048
    body = b'{"object":"whatsapp_business_account","entry":[],"pad":"' + b"x" * 4000 + b'"}'
    assert post(client, body, sign(body)).status_code == 413
    assert not WebhookEvent.objects.exists()


def test_a_body_over_the_cap_is_413_even_when_its_declared_length_is_small(
    rf: RequestFactory, settings: Any
) -> None:
    # The declared length passes the first check; reading the stream finds the real size.
    settings.WEBHOOK_MAX_BODY_BYTES = 2048
    body = b'{"pad":"' + b"x" * 4000 + b'"}'
    request = rf.post(
        URL, data=body, content_type="application/json", headers={"X-Hub-Signature-256": sign(body)}
    )
    request.META["CONTENT_LENGTH"] = "100"
    assert views.whatsapp_webhook(request).status_code == 413
    assert not WebhookEvent.objects.exists()


def test_a_three_megabyte_callback_is_accepted(client: Client) -> None:
    # Django's own 2.5 MB upload limit must not apply: Meta's bodies reach 3 MB.
    status = json.loads(fixture_bytes("status_read"))
    item = status["entry"][0]["changes"][0]["value"]["statuses"][0]
    items = [dict(item, id=f"wamid.{n:0120d}") for n in range(17_000)]
    status["entry"][0]["changes"][0]["value"]["statuses"] = items
    body = json.dumps(status).encode()
    assert 2_600_000 < len(body) < 4_000_000
    assert post(client, body, sign(body)).status_code == 200
    assert WebhookEvent.objects.get().status == WebhookEventStatus.PENDING


def test_other_methods_are_refused(client: Client) -> None:
    assert client.put(URL, data=b"{}").status_code == 405


def test_a_stored_event_schedules_one_applier_job_per_interval(
    client: Client, redis_conn: Any, django_capture_on_commit_callbacks: Any
) -> None:
    import django_rq

    queue = django_rq.get_queue("maintenance")
    for name in ("status_sent", "status_delivered", "status_read"):
        body = fixture_bytes(name)
        with django_capture_on_commit_callbacks(execute=True):
            assert post(client, body, sign(body)).status_code == 200
    assert redis_conn.exists(DEBOUNCE_KEY)
    assert [job.func_name for job in queue.get_jobs()] == ["whatsblast.jobs.webhook_apply_job"]
