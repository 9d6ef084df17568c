"""Events go to public addresses only (unless EVENTS_ALLOW_PRIVATE_URLS): refused when a
subscription is saved, through the service, the API and the admin, and again when the
worker connects, with nothing lost."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError
from django.test import Client, override_settings

from delivery.api.keys import api_key_create
from delivery.events.destinations import address_refusal, addresses_of, host_refusal
from delivery.events.subscriptions import subscription_create, url_errors
from delivery.events.worker import events_pass
from delivery.models import EventOutbox, EventSubscription
from tests.events.receiver import Receiver
from tests.ui.support import role_user
from whatsblast.auth.roles import OPERATORS

pytestmark = pytest.mark.django_db

PRIVATE = [
    "http://127.0.0.1:8000/hooks",
    "http://localhost:8000/hooks",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/hooks",
    "http://192.168.0.10/hooks",
    "http://172.16.5.4/hooks",
    "http://100.64.0.1/hooks",
    "http://0.0.0.0/hooks",
    "http://[::1]/hooks",
    "http://[::ffff:127.0.0.1]/hooks",
    "http://[fd00::1]/hooks",
    "https://[fe80::1]/hooks",
    "http://224.0.0.1/hooks",
]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


@pytest.mark.parametrize("url", PRIVATE)
def test_private_destinations_are_refused_when_saved(url: str) -> None:
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        error = url_errors(url)
        assert error is not None and "public addresses only" in error, url
        with pytest.raises(ValidationError) as raised:
            subscription_create(name="internal", url=url)
    assert "url" in raised.value.message_dict
    assert not EventSubscription.objects.exists()


def test_public_addresses_pass_and_the_switch_lets_private_ones_through() -> None:
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        assert url_errors("https://93.184.215.14/hooks") is None
        assert url_errors("https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/hooks") is None
        assert host_refusal("localhost", 80) in (
            "localhost resolves to 127.0.0.1, not a public address",
            "localhost resolves to ::1, not a public address",
        )
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=True):
        assert url_errors("http://127.0.0.1:8000/hooks") is None
    assert address_refusal("8.8.8.8") is None
    assert address_refusal("::ffff:10.0.0.1") == "::ffff:10.0.0.1 is not a public address"


def test_the_api_refuses_a_private_destination_with_the_reason() -> None:
    _, key = api_key_create(name="shop", scopes=["campaigns"], all_numbers=True)
    client = Client()
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        response = client.post(
            "/api/v1/subscriptions",
            data=json.dumps({"name": "probe", "url": "http://169.254.169.254/latest/"}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 400, response.content
    url_error = response.json()["error"]["fields"]["url"]
    assert "public addresses only" in url_error and "169.254.169.254" in url_error
    assert not EventSubscription.objects.exists()


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize(
    "host", ["0" * 300, "a" * 64 + ".example.com", "x..example.com", ("a" * 60 + ".") * 5 + "com"]
)
def test_a_host_dns_cannot_hold_is_refused_by_name_not_a_crash(
    host: str, allow_private: bool
) -> None:
    _, key = api_key_create(name="shop", scopes=["campaigns"], all_numbers=True)
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=allow_private):
        response = Client().post(
            "/api/v1/subscriptions",
            data=json.dumps({"name": "long", "url": f"https://{host}/hooks"}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 400, response.content
    assert "not a name DNS can hold" in response.json()["error"]["fields"]["url"]
    assert not EventSubscription.objects.exists()


def test_the_worker_takes_an_unusable_host_name_as_unresolvable() -> None:
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        assert host_refusal("0" * 300, 443) is None  # not refused as private: delivery fails
        with pytest.raises(socket.gaierror, match="is not a host name"):
            addresses_of("0" * 300, 443)
        assert url_errors("https://" + "a" * 63 + ".example.com/h") is None


def test_the_admin_form_refuses_a_private_destination() -> None:
    client = Client()
    client.force_login(role_user(OPERATORS))
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        response = client.post(
            "/admin/delivery/eventsubscription/add/",
            {"name": "probe", "url": "http://10.0.0.7/hooks", "event_types": []},
        )
    assert response.status_code == 200
    assert "public addresses only" in response.content.decode()
    assert not EventSubscription.objects.exists()


def test_the_worker_refuses_to_connect_to_a_private_address_and_loses_nothing(
    receiver: Receiver,
) -> None:
    """A subscription saved while private receivers were allowed (or a name that resolves
    elsewhere by the time it is used): the worker checks the address it connects to."""
    subscription, _ = subscription_create(name="shop", url=receiver.url)
    EventOutbox.objects.bulk_create(
        [EventOutbox(event_type="message.sent", data={"i": i}) for i in range(3)]
    )
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=False):
        totals = events_pass()
    assert totals.delivered == 0 and totals.failed_batches == 1
    assert receiver.received == []
    subscription.refresh_from_db()
    assert "not a public address" in subscription.last_error
    assert subscription.cursor == 0 and subscription.attempts == 1
    # Allowed again (or moved to a public receiver): the same events arrive, in order.
    EventSubscription.objects.filter(pk=subscription.pk).update(next_attempt_at="2000-01-01T00:00Z")
    with override_settings(EVENTS_ALLOW_PRIVATE_URLS=True):
        totals = events_pass()
    assert totals.delivered == 3
    assert [event["data"]["i"] for event in receiver.events()] == [0, 1, 2]
