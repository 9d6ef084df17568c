"""A phone number, an approved OTP template and API keys scoped to the number."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from campaigns.models import PhoneNumber, Template
from delivery.api.keys import api_key_create
from delivery.models import ApiKey
from tests.api.support import Api
from tests.factories import make_phone_number, make_template


@dataclass
class IssuedKey:
    api_key: ApiKey
    raw: str


@pytest.fixture
def number(db) -> PhoneNumber:
    return make_phone_number(rate_per_second=80)


@pytest.fixture
def other_number(db) -> PhoneNumber:
    return make_phone_number(rate_per_second=80)


@pytest.fixture
def template(number: PhoneNumber) -> Template:
    return make_template(
        account=number.account, name="otp", body_text="Your code is {{1}}", body_param_count=1
    )


@pytest.fixture
def owner_key(number: PhoneNumber) -> IssuedKey:
    """Scoped to ``number`` only."""
    api_key, raw = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
    return IssuedKey(api_key, raw)


@pytest.fixture
def stranger_key(other_number: PhoneNumber) -> IssuedKey:
    """Scoped to another number."""
    api_key, raw = api_key_create(name="other", phone_number_ids=[other_number.phone_number_id])
    return IssuedKey(api_key, raw)


@pytest.fixture
def api(owner_key: IssuedKey) -> Api:
    return Api(owner_key.raw)
