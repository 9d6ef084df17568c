"""Each key's own request quota: 429 with Retry-After past it, other keys unaffected."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from delivery.api.keys import api_key_create
from delivery.api.quota import quota_take
from delivery.models import Message
from tests.api.support import Api, template_body

pytestmark = pytest.mark.django_db


def test_requests_past_the_keys_quota_are_429(number, template) -> None:
    _, raw = api_key_create(
        name="tight", phone_number_ids=[number.phone_number_id], requests_per_second=3
    )
    api = Api(raw)
    codes = [api.send(template_body(number))[0].status_code for _ in range(5)]
    response, body = api.send(template_body(number))
    assert codes[:3] == [202, 202, 202] and 429 in codes[3:]
    assert response.status_code == 429
    assert body["error"]["code"] == "rate_limited"
    assert response["Retry-After"] == "1"
    assert Message.objects.count() == codes.count(202)


def test_the_quota_frees_up_as_the_window_slides(number, template) -> None:
    _, raw = api_key_create(
        name="tight", phone_number_ids=[number.phone_number_id], requests_per_second=2
    )
    api = Api(raw)
    statuses = [api.send(template_body(number))[0].status_code for _ in range(3)]
    assert statuses == [202, 202, 429]
    time.sleep(2.05)  # two windows later nothing of the burst is counted
    assert api.send(template_body(number))[0].status_code == 202


def test_other_keys_have_their_own_quota(number, template) -> None:
    _, tight = api_key_create(
        name="tight", phone_number_ids=[number.phone_number_id], requests_per_second=1
    )
    _, other = api_key_create(name="other", phone_number_ids=[number.phone_number_id])
    assert Api(tight).send(template_body(number))[0].status_code == 202
    assert Api(tight).send(template_body(number))[0].status_code == 429
    assert Api(other).send(template_body(number))[0].status_code == 202


@override_settings(API_DEFAULT_REQUESTS_PER_SECOND=2)
def test_keys_without_their_own_quota_get_the_default(api, number, template) -> None:
    statuses = [api.status(1)[0].status_code for _ in range(3)]
    assert statuses == [404, 404, 429]


def test_the_sliding_window_holds_the_rate_across_a_window_edge(redis_conn) -> None:
    """A fixed window would allow 2x the quota around an edge; the blend does not."""
    limit = 20
    # Wait for the middle of a second, spend the quota, then try right after the edge.
    time.sleep(1.5 - (time.time() % 1.0))
    first = sum(quota_take(api_key_id=1, limit=limit) is None for _ in range(limit * 2))
    time.sleep(1.05 - (time.time() % 1.0))
    after_edge = sum(quota_take(api_key_id=1, limit=limit) is None for _ in range(limit * 2))
    assert first == limit
    # Just past the edge the previous window still weighs ~95 %: at most a few more fit.
    assert after_edge <= limit * 0.2
