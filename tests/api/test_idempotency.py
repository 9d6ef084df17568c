"""Idempotency-Key: a retried request returns the same message and sends nothing twice."""

from __future__ import annotations

import threading

import django_rq
import pytest
from django.db import connection

from delivery.api.keys import api_key_create
from delivery.models import Message, MessageStatus
from tests.api.support import Api, template_body
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_template

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_the_same_key_and_body_twice_is_one_message_and_one_send() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        make_template(account=number.account, name="otp", body_param_count=1)
        sim.add_template(name="otp", language="en_US", body_params=1)
        _, raw = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
        api = Api(raw)
        body = template_body(number)

        first, created = api.send(body, idempotency_key="order-77")
        work_burst()
        second, replayed = api.send(body, idempotency_key="order-77")
        work_burst()

        assert first.status_code == 202 and second.status_code == 200
        assert second["Idempotent-Replayed"] == "true"
        assert replayed["id"] == created["id"]
        assert replayed["status"] == MessageStatus.SENT  # the current status, not a copy
        assert Message.objects.count() == 1
        records = sim.records()
        assert [r["to"] for r in records] == ["+5511987650001"]
        assert records[0]["callback_data"] == f"wb:{created['id']}"


def test_the_same_key_with_another_body_is_409_and_changes_nothing(number, template) -> None:
    api = _api_for(number)
    first, created = api.send(template_body(number), idempotency_key="k-1")
    response, body = api.send(template_body(number, to="+5511987650002"), idempotency_key="k-1")
    assert first.status_code == 202
    assert response.status_code == 409
    assert body["error"]["code"] == "idempotency_key_reused"
    assert list(Message.objects.values_list("to", flat=True)) == ["+5511987650001"]


def test_key_order_and_whitespace_do_not_make_a_body_different(number, template) -> None:
    api = _api_for(number)
    body = template_body(number)
    first, created = api.send(body, idempotency_key="k-2")
    reordered = (
        b'{ "template": {"params": {"body": ["123456"]}, "language": "en_US", "name": "otp"},\n'
        + f' "to": "+5511987650001", "phone_number_id": "{number.phone_number_id}" }}'.encode()
    )
    second, replayed = api.send(raw=reordered, idempotency_key="k-2")
    assert second.status_code == 200 and replayed["id"] == created["id"]


def test_keys_are_per_api_key(number, template) -> None:
    one, two = _api_for(number), _api_for(number)
    _, first = one.send(template_body(number), idempotency_key="shared")
    response, second = two.send(template_body(number), idempotency_key="shared")
    assert response.status_code == 202 and second["id"] != first["id"]


def test_without_a_key_every_request_is_a_new_message(number, template) -> None:
    api = _api_for(number)
    ids = {api.send(template_body(number))[1]["id"] for _ in range(3)}
    assert len(ids) == 3


def test_the_send_is_queued_once_on_the_transactional_queue(
    number, template, django_capture_on_commit_callbacks
) -> None:
    api = _api_for(number)
    with django_capture_on_commit_callbacks(execute=True):
        api.send(template_body(number), idempotency_key="q")
        api.send(template_body(number), idempotency_key="q")
    queue = django_rq.get_queue("transactional")
    assert queue.count == 1
    assert queue.jobs[0].func_name == "whatsblast.jobs.transactional_send_job"


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_create_one_message(number, template) -> None:
    """Requests racing past the lookup meet the unique constraint; both get the one id."""
    api_key_raw = _api_for(number).key
    barrier = threading.Barrier(6)
    results: list[tuple[int, int]] = []

    def retry() -> None:
        try:
            barrier.wait()
            response, body = Api(api_key_raw).send(template_body(number), idempotency_key="race")
            results.append((response.status_code, body["id"]))
        finally:
            connection.close()

    threads = [threading.Thread(target=retry) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6
    assert len({message_id for _, message_id in results}) == 1
    assert sorted(status for status, _ in results).count(202) == 1
    assert Message.objects.count() == 1


def _api_for(number) -> Api:
    _, raw = api_key_create(
        name="k", phone_number_ids=[number.phone_number_id], requests_per_second=1000
    )
    return Api(raw)
