"""The number read at each supported Graph API version: v23.0 names the portfolio's limit
``messaging_limit_tier``, v24.0 and later ``whatsapp_business_manager_messaging_limit``
(Meta, "Messaging limits"); the read asks for the one its version has and both give the tier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from delivery.cloud.client import CloudApiClient, number_fields
from delivery.graph_reads import _tier, phone_number_graph_read
from delivery.simulator.config import NumberSpec
from tests.engine_support import number_on, running_simulator

GRAPH = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "graph"


def graph(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAPH / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("version", "asked", "not_asked"),
    [
        ("v23.0", "messaging_limit_tier", "whatsapp_business_manager_messaging_limit"),
        ("v22.0", "messaging_limit_tier", "whatsapp_business_manager_messaging_limit"),
        ("v24.0", "whatsapp_business_manager_messaging_limit", "messaging_limit_tier"),
        ("v25.0", "whatsapp_business_manager_messaging_limit", "messaging_limit_tier"),
        ("v26.0", "whatsapp_business_manager_messaging_limit", "messaging_limit_tier"),
    ],
)
def test_each_version_is_asked_for_its_own_limit_field(
    version: str, asked: str, not_asked: str
) -> None:
    fields = number_fields(version).split(",")
    assert asked in fields and not_asked not in fields
    assert {"quality_rating", "throughput", "name_status", "display_phone_number"} <= set(fields)


def test_the_default_version_is_a_supported_one_that_reads_the_new_field() -> None:
    assert settings.WHATSAPP_API_VERSION == "v25.0"
    assert "whatsapp_business_manager_messaging_limit" in number_fields(
        settings.WHATSAPP_API_VERSION
    )


def test_the_v24_shape_and_the_v23_shape_both_give_the_tier() -> None:
    # Meta's messaging-limits page (v24+ field) and Meta's OpenAPI list (v23 field, TIER_1K:
    # an older, smaller tier taken as our smallest).
    assert _tier(graph("meta_doc_phone_number_messaging_limit")) == "TIER_250"
    v23_number = graph("spec_waba_phone_numbers")["data"][0]
    assert v23_number["messaging_limit_tier"] == "TIER_1K"
    assert _tier(v23_number) == "TIER_250"
    assert _tier({"messaging_limit_tier": "TIER_10K"}) == "TIER_10K"


def test_the_new_field_wins_when_both_come_back() -> None:
    both = {
        "messaging_limit_tier": "TIER_250",
        "whatsapp_business_manager_messaging_limit": "TIER_2K",
    }
    assert _tier(both) == "TIER_2K"
    assert _tier({"whatsapp_business_manager_messaging_limit": {"tier": "TIER_2K"}}) == ""


@pytest.mark.parametrize(
    ("version", "field"),
    [
        ("v23.0", "messaging_limit_tier"),
        ("v24.0", "whatsapp_business_manager_messaging_limit"),
        ("v25.0", "whatsapp_business_manager_messaging_limit"),
    ],
)
def test_the_simulator_answers_the_field_of_the_version(version: str, field: str) -> None:
    data = NumberSpec(phone_number_id="1", access_token="t", messaging_limit_tier="TIER_2K")
    answer = data.as_graph(version)
    assert answer[field] == "TIER_2K"
    assert (
        len({"messaging_limit_tier", "whatsapp_business_manager_messaging_limit"} & set(answer))
        == 1
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("version", ["v23.0", "v24.0", "v25.0"])
def test_the_number_read_at_each_version_records_the_tier(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = CloudApiClient(api_version=version, connect_timeout=2.0, read_timeout=5.0)
    monkeypatch.setattr("delivery.graph_reads.get_client", lambda: client)
    with running_simulator() as sim:
        number = number_on(sim, rate=80, tier="TIER_250")
        sim.add_number(
            phone_number_id=number.phone_number_id,
            access_token="sim-token",
            rate=80,
            waba_id=number.account.waba_id,
            messaging_limit_tier="TIER_10K",
        )
        read = phone_number_graph_read(phone_number=number)
        assert read.ok, read.error
        assert "messaging_limit_tier" in read.changed
        number.account.refresh_from_db()
        assert number.account.messaging_limit_tier == "TIER_10K"
