"""Constraints the database itself enforces, whatever code writes the rows."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import Contact, PhoneNumber
from delivery.models import Message
from tests.factories import make_account, make_campaign, make_contact, make_phone_number

pytestmark = pytest.mark.django_db


def test_contact_phone_is_unique() -> None:
    make_contact(phone="+5511999990001")
    with pytest.raises(IntegrityError, match="campaigns_contact_phone_key"), transaction.atomic():
        Contact.objects.create(phone="+5511999990001")


@pytest.mark.parametrize(
    "phone", ["5511999990001", "+05511999990001", "+55 11 99999-0001", "+1234", "+1234567890123456"]
)
def test_contact_phone_must_be_e164(phone: str) -> None:
    with pytest.raises(IntegrityError, match="contact_phone_is_e164"), transaction.atomic():
        Contact.objects.create(phone=phone)


def test_contact_phone_e164_accepts_shortest_and_longest() -> None:
    Contact.objects.create(phone="+1234567")
    Contact.objects.create(phone="+123456789012345")
    assert Contact.objects.count() == 2


def test_message_recipient_unique_per_campaign_only() -> None:
    campaign = make_campaign()
    number = campaign.phone_number
    now = timezone.now()
    Message.objects.create(
        campaign=campaign, phone_number=number, to="+5511999990001", next_attempt_at=now
    )
    with (
        pytest.raises(IntegrityError, match="message_unique_recipient_per_campaign"),
        transaction.atomic(),
    ):
        Message.objects.create(
            campaign=campaign, phone_number=number, to="+5511999990001", next_attempt_at=now
        )
    # Transactional sends (no campaign) may repeat a recipient, and another campaign may too.
    for _ in range(2):
        Message.objects.create(
            campaign=None,
            kind="transactional",
            phone_number=number,
            to="+5511999990001",
            next_attempt_at=now,
        )
    Message.objects.create(
        campaign=make_campaign(phone_number=number, template=campaign.template),
        phone_number=number,
        to="+5511999990001",
        next_attempt_at=now,
    )
    assert Message.objects.filter(to="+5511999990001").count() == 4


@pytest.mark.parametrize("rate", [0, 1001])
def test_phone_number_rate_within_meta_range(rate: int) -> None:
    with (
        pytest.raises(IntegrityError, match="phone_number_rate_in_meta_range"),
        transaction.atomic(),
    ):
        make_phone_number(rate_per_second=rate)


@pytest.mark.parametrize("rate", [1, 1000])
def test_phone_number_rate_bounds_accepted(rate: int) -> None:
    assert make_phone_number(rate_per_second=rate).rate_per_second == rate


@pytest.mark.parametrize("reserve", [-0.1, 0.95])
def test_phone_number_reserve_is_a_fraction(reserve: float) -> None:
    with pytest.raises(IntegrityError, match="phone_number_reserve_fraction"), transaction.atomic():
        PhoneNumber.objects.create(
            phone_number_id="pn-x",
            display_phone_number="+1555",
            account=make_account(),
            access_token="t",
            transactional_reserve=reserve,
        )
