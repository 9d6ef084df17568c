"""The demo prices its campaign at a sample of Meta's rate card, so its pages show real
figures; an operator's own card is never replaced."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest

from campaigns.models import Campaign, RateCard
from delivery.campaigns.pricing import campaign_cost_estimate
from whatsblast.management.commands.demo import Command

pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = {"rate": 80, "reserve": 0.2, "contacts": 4}


def test_the_demo_loads_the_sample_rate_card_and_its_campaign_is_priced() -> None:
    out = io.StringIO()
    campaign_id = Command(stdout=out)._prepare(OPTIONS, "http://127.0.0.1:9")

    assert "Rate card: a sample of Meta's. Loaded" in out.getvalue()
    assert RateCard.objects.get(country_prefix="+55", category="marketing").price == Decimal(
        "0.0625"
    )
    estimate = campaign_cost_estimate(campaign=Campaign.objects.get(pk=campaign_id))
    assert (estimate.messages, estimate.text) == (4, "0.2500 USD")


def test_the_demo_keeps_an_operators_own_rate_card() -> None:
    RateCard.objects.create(country_prefix="*", category="marketing", price=Decimal("0.01"))

    Command(stdout=io.StringIO())._prepare(OPTIONS, "http://127.0.0.1:9")

    assert list(RateCard.objects.values_list("country_prefix", flat=True)) == ["*"]
