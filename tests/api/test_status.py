"""GET /api/v1/messages/<id>: status, wamid, timestamps, last error; only within scope."""

from __future__ import annotations

from datetime import datetime

import pytest

from delivery.api.keys import api_key_create
from delivery.models import MessageStatus
from tests.api.support import Api, template_body
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_message, make_template

pytestmark = pytest.mark.django_db


def test_a_new_message_is_pending_with_no_wamid(api, number, template) -> None:
    _, created = api.send(template_body(number))
    response, body = api.status(created["id"])
    assert response.status_code == 200
    assert body["id"] == created["id"]
    assert body["status"] == MessageStatus.PENDING
    assert body["phone_number_id"] == number.phone_number_id
    assert body["to"] == "+5511987650001"
    assert body["template"] == {"name": "otp", "language": "en_US"}
    assert body["wamid"] is None and body["sent_at"] is None and body["error"] is None
    assert datetime.fromisoformat(body["created_at"]).tzinfo is not None
    assert body["status_url"] == created["status_url"]
    assert created["status_url"] == f"http://testserver/api/v1/messages/{created['id']}"


@pytest.mark.django_db(transaction=True)
def test_a_sent_message_shows_its_wamid_and_sent_at() -> None:
    with running_simulator() as sim:
        api, number = _api_on(sim)
        _, created = api.send(template_body(number))
        work_burst("transactional")
        _, body = api.status(created["id"])
        record = sim.records()[0]
    assert body["status"] == MessageStatus.SENT
    assert body["wamid"] == record["wamid"]
    assert body["attempt"] == 1
    assert datetime.fromisoformat(body["sent_at"]) >= datetime.fromisoformat(body["created_at"])


@pytest.mark.django_db(transaction=True)
def test_a_failed_message_shows_metas_error_code_and_title() -> None:
    with running_simulator() as sim:
        api, number = _api_on(sim)
        sim.configure(fail_recipients={"+5511987650001": 131026})
        _, created = api.send(template_body(number))
        work_burst("transactional")
        _, body = api.status(created["id"])
    assert body["status"] == MessageStatus.FAILED
    assert body["error"]["code"] == 131026
    assert body["error"]["title"]
    assert body["failed_at"] is not None and body["wamid"] is None


def test_a_message_of_a_number_outside_the_scope_is_404(
    api, number, template, stranger_key
) -> None:
    _, created = api.send(template_body(number))
    response, body = Api(stranger_key.raw).status(created["id"])
    assert response.status_code == 404
    assert body["error"]["code"] == "not_found"


def test_campaign_messages_are_not_served(api, number, template) -> None:
    campaign = make_campaign(phone_number=number, template=template)
    message = make_message(campaign=campaign)
    response, _ = api.status(message.pk)
    assert response.status_code == 404


@pytest.mark.parametrize("message_id", ["999999", str(2**63), "9" * 40])
def test_unknown_ids_are_404(api, message_id) -> None:
    response, body = api.status(message_id)
    assert response.status_code == 404
    assert body["error"]["code"] == "not_found"


def test_status_needs_a_key(api, number, template) -> None:
    _, created = api.send(template_body(number))
    response, _ = Api().status(created["id"])
    assert response.status_code == 401


def test_post_to_a_message_is_405(api, number, template) -> None:
    _, created = api.send(template_body(number))
    response = api.client.post(f"/api/v1/messages/{created['id']}")
    assert response.status_code == 405 and response["Allow"] == "GET"


def _api_on(sim):
    number = number_on(sim, rate=80)
    make_template(account=number.account, name="otp", body_param_count=1)
    sim.add_template(name="otp", language="en_US", body_params=1)
    _, raw = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
    return Api(raw), number
