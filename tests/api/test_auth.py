"""Bearer keys: missing, malformed, wrong, revoked, out of scope; stored only as a hash."""

from __future__ import annotations

import hashlib

import pytest

from delivery.api.keys import api_key_authenticate, api_key_create, api_key_revoke
from delivery.models import ApiKey, Message
from tests.api.support import Api, template_body

pytestmark = pytest.mark.django_db


def test_a_request_without_a_key_is_401(api, number, template) -> None:
    response, body = api.send(template_body(number), key="")
    assert response.status_code == 401
    assert body["error"]["code"] == "unauthenticated"
    assert response["WWW-Authenticate"] == "Bearer"
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer    ", "Token abc", "bearer"],
)
def test_other_schemes_and_empty_tokens_are_401(api, number, template, header) -> None:
    response, body = api.send(template_body(number), headers={"Authorization": header})
    assert response.status_code == 401
    assert body["error"]["code"] == "unauthenticated"


def test_a_wrong_secret_for_a_real_prefix_is_401(api, owner_key, number, template) -> None:
    scheme, prefix, _ = owner_key.raw.split("_", 2)
    response, body = api.send(template_body(number), key=f"{scheme}_{prefix}_{'x' * 43}")
    assert response.status_code == 401
    assert body["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    "key", ["wb_0000000000_secret", "nonsense", "wb__", "wb_ÿÿÿÿÿÿÿÿÿÿ_x", "wb_" + "a" * 500]
)
def test_unknown_and_malformed_keys_are_401(api, number, template, key) -> None:
    response, body = api.send(template_body(number), key=key)
    assert response.status_code == 401
    assert body["error"]["code"] == "invalid_api_key"


def test_a_revoked_key_is_401_at_once(api, owner_key, number, template) -> None:
    assert api.send(template_body(number))[0].status_code == 202
    api_key_revoke(api_key_id=owner_key.api_key.pk)
    response, body = api.send(template_body(number, to="+5511987650002"))
    assert response.status_code == 401
    assert body["error"]["code"] == "invalid_api_key"
    assert Message.objects.count() == 1


def test_a_number_outside_the_keys_scope_is_403(
    number, other_number, template, stranger_key
) -> None:
    response, body = Api(stranger_key.raw).send(template_body(number))
    assert response.status_code == 403
    assert body["error"]["code"] == "phone_number_not_allowed"
    assert "phone_number_id" in body["error"]["fields"]
    assert not Message.objects.exists()


def test_an_unknown_number_looks_like_out_of_scope_to_a_scoped_key(api, template) -> None:
    response, body = api.send(
        {
            "phone_number_id": "no-such",
            "to": "+5511987650001",
            "template": {"name": "otp", "language": "en_US", "params": {"body": ["1"]}},
        }
    )
    assert response.status_code == 403


def test_an_all_numbers_key_may_use_any_number(number, other_number, template) -> None:
    _, raw = api_key_create(name="ops", all_numbers=True)
    api = Api(raw)
    assert api.send(template_body(number))[0].status_code == 202
    response, body = api.send({**template_body(number), "phone_number_id": "no-such"})
    assert response.status_code == 422
    assert body["error"]["code"] == "unknown_phone_number"


def test_the_key_is_stored_only_as_its_hash(owner_key) -> None:
    row = ApiKey.objects.get(pk=owner_key.api_key.pk)
    assert owner_key.raw.startswith(f"wb_{row.prefix}_")
    assert row.key_sha256 == hashlib.sha256(owner_key.raw.encode()).hexdigest()
    stored = " ".join(str(v) for v in ApiKey.objects.filter(pk=row.pk).values().first().values())
    assert owner_key.raw.split("_", 2)[2] not in stored


def test_each_key_is_different_and_authenticates_only_itself(number) -> None:
    first, raw1 = api_key_create(name="a", phone_number_ids=[number.phone_number_id])
    second, raw2 = api_key_create(name="b", phone_number_ids=[number.phone_number_id])
    assert raw1 != raw2 and first.prefix != second.prefix
    assert api_key_authenticate(raw_key=raw1) == first
    assert api_key_authenticate(raw_key=raw2) == second
    assert api_key_authenticate(raw_key=raw1[:-1]) is None


def test_use_is_recorded_in_last_used_at(api, owner_key, number, template) -> None:
    assert owner_key.api_key.last_used_at is None
    api.send(template_body(number))
    owner_key.api_key.refresh_from_db()
    assert owner_key.api_key.last_used_at is not None


def test_a_key_needs_an_explicit_scope(number) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        api_key_create(name="nothing")
    with pytest.raises(ValidationError):
        api_key_create(name="typo", phone_number_ids=["does-not-exist"])
