"""Sends as Meta wants them and Meta's answers as Meta means them, through the simulator:
a named header's parameter_name, 131048 (spam limit), 131030 (a test number), template sync
fields, the number and account read from the Graph API, per-message pricing."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from campaigns.models import Campaign, CampaignStatus, PhoneNumber, RateCard, Template
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.campaigns.pricing import campaign_cost_estimate, campaign_costs
from delivery.cloud.template_sync import templates_sync
from delivery.graph_reads import _number_apply, _tier, phone_number_graph_read
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact, make_contact_list, make_phone_number
from whatsblast.core.redis import get_redis
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db(transaction=True)

GRAPH = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "graph"

NAMED_HEADER = [
    {"type": "HEADER", "format": "TEXT", "text": "Welcome to {{shop}}"},
    {"type": "BODY", "text": "Hi {{first_name}}, your code is {{code}}."},
]


def graph(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAPH / f"{name}.json").read_text())
    return data


def sends(sim: Any) -> list[dict[str, Any]]:
    return [json.loads(r["body"]) for r in sim.records(bodies=True) if r.get("body")]


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_named_text_header_goes_out_with_its_parameter_name() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        sim.add_template(
            name="welcome_shop",
            language="en_US",
            components=NAMED_HEADER,
            waba_id=number.account.waba_id,
        )
        assert templates_sync(account=number.account).ok
        template = Template.objects.get(name="welcome_shop")
        assert (template.header_param, template.parameter_format) == ("shop", "NAMED")
        contact_list = make_contact_list()
        for i in range(3):
            make_contact(contact_list=contact_list, name=f"N{i}")
        campaign = make_campaign(
            phone_number=number,
            template=template,
            lists=[contact_list],
            param_mapping={
                "header": {"value": "Lojas"},
                "body": {"first_name": {"field": "name"}, "code": {"value": "X1"}},
            },
        )
        campaign_start(campaign=campaign)
        work_burst()
        assert set(Message.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
            "sent"
        }
        header = next(c for c in sends(sim)[0]["template"]["components"] if c["type"] == "header")
        assert header["parameters"] == [{"type": "text", "text": "Lojas", "parameter_name": "shop"}]


def test_the_simulator_refuses_a_named_header_without_its_name() -> None:
    from delivery.simulator.config import TemplateSpec
    from delivery.simulator.validate import Invalid, check_template

    spec = TemplateSpec.from_dict({"name": "t", "language": "en", "components": NAMED_HEADER})
    body = {
        "template": {
            "components": [
                {"type": "header", "parameters": [{"type": "text", "text": "Lojas"}]},
                {
                    "type": "body",
                    "parameters": [
                        {"type": "text", "parameter_name": "first_name", "text": "A"},
                        {"type": "text", "parameter_name": "code", "text": "B"},
                    ],
                },
            ]
        }
    }
    with pytest.raises(Invalid) as refused:
        check_template(body, spec)
    assert refused.value.code == 100


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_131048_halves_the_number_and_holds_it_instead_of_resuming_at_once() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=20)
        limited = "+5511" + f"{9_0000_0000 + 3:09d}"
        sim.configure(fail_recipients={limited: 131048})
        campaign_start(campaign=campaign)
        work_burst()
        number.refresh_from_db()
        assert number.effective_rate is not None and number.effective_rate <= 100 * 1.0 * 0.5 + 1
        spammed = Message.objects.get(campaign=campaign, to=limited)
        assert spammed.status == "pending" and spammed.last_error_code == 131048
        assert spammed.attempt == 0  # not the message's fault
        # The number is paused for a minute, and the quiet gate holds the rate down.
        key = f"wb:bucket:{{{number.phone_number_id}}}:increase_gate"
        assert get_redis().ttl(key) > 60


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_131030_stops_the_campaign_instead_of_failing_recipients_one_by_one() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=30)
        sim.configure(
            fail_recipients={"+5511" + f"{9_0000_0000 + i:09d}": 131030 for i in range(30)}
        )
        campaign_start(campaign=campaign)
        work_burst()
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.PAUSED
        assert "131030" in campaign.status_reason
        assert not Message.objects.filter(campaign=campaign, status="failed").exists()
        # The first answer halts the campaign's sends on the sender, before the flush that
        # pauses it: the sends already in flight by then, not the audience.
        assert sim.stats()["requests"] < 10


def test_template_sync_keeps_parameter_format_quality_and_rejection() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=10)
        waba = number.account.waba_id
        sim.add_template(name="good", language="en_US", body_params=1, waba_id=waba)
        sim.add_template(
            name="bad",
            language="en_US",
            body_params=["name"],
            status="REJECTED",
            rejected_reason="TAG_CONTENT_MISMATCH",
            quality_score="UNKNOWN",
            waba_id=waba,
        )
        assert templates_sync(account=number.account).ok
        good, bad = Template.objects.get(name="good"), Template.objects.get(name="bad")
        assert (good.parameter_format, good.quality_score, good.rejected_reason) == (
            "POSITIONAL",
            "GREEN",
            "",
        )
        assert (bad.parameter_format, bad.rejected_reason, bad.status) == (
            "NAMED",
            "TAG_CONTENT_MISMATCH",
            "REJECTED",
        )


# --- the Graph API read ------------------------------------------------------------------


def test_the_number_and_account_are_read_from_the_graph_api() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80, tier="TIER_250")
        sim.add_number(
            phone_number_id=number.phone_number_id,
            access_token="sim-token",
            rate=1000,
            waba_id=number.account.waba_id,
            display_phone_number="15550783881",
            quality_rating="YELLOW",
            messaging_limit_tier="TIER_100K",
            throughput_level="HIGH",
            verified_name="Lucky Shrub",
        )
        read = phone_number_graph_read(phone_number=number)
        assert read.ok, read.error
        number.refresh_from_db()
        assert (number.display_phone_number, number.verified_name, number.name_status) == (
            "15550783881",
            "Lucky Shrub",
            "APPROVED",
        )
        assert (number.quality_rating, number.throughput_level, number.rate_per_second) == (
            "YELLOW",
            "HIGH",
            1000,
        )
        assert number.graph_read_at is not None and number.graph_error == ""
        account = number.account
        account.refresh_from_db()
        assert account.messaging_limit_tier == "TIER_100K"
        assert account.account_review_status == "APPROVED" and account.graph_read_at is not None


def test_a_refused_token_is_recorded_on_the_number() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=80)
        PhoneNumber.objects.filter(pk=number.pk).update(access_token="wrong")
        number.refresh_from_db()
        read = phone_number_graph_read(phone_number=number)
        number.refresh_from_db()
        assert not read.ok and number.graph_error.startswith("code 190")
        assert number.graph_read_at is not None


def test_phonenumber_add_reads_the_number_at_once() -> None:
    with running_simulator() as sim:
        sim.add_number(
            phone_number_id="PNX",
            access_token="tok",
            rate=80,
            quality_rating="GREEN",
            messaging_limit_tier="TIER_10K",
        )
        err = StringIO()
        call_command(
            "phonenumber",
            "add",
            "--id",
            "PNX",
            "--display",
            "+15550001",
            "--token",
            "tok",
            "--api-base-url",
            sim.url,
            stdout=StringIO(),
            stderr=err,
        )
        number = PhoneNumber.objects.get(phone_number_id="PNX")
        assert number.graph_read_at is not None and number.quality_rating == "GREEN"
        assert number.account.messaging_limit_tier == "TIER_10K"
        assert "quality GREEN" in err.getvalue()


def test_the_periodic_read_is_queued_by_the_tick_once_per_interval() -> None:
    assert maintenance_tick()["graph_read_queued"] is True
    assert maintenance_tick()["graph_read_queued"] is False


@pytest.mark.parametrize(
    ("name", "tier"),
    [
        ("meta_doc_phone_number_messaging_limit", "TIER_250"),
        ("spec_phone_number_default", ""),
    ],
)
def test_real_graph_answers_give_the_tier(name: str, tier: str) -> None:
    assert _tier(graph(name)) == tier


@pytest.mark.parametrize(
    "name",
    [
        "spec_phone_number_default",
        "spec_phone_number_name_and_verification",
        "meta_doc_phone_number_throughput_platform",
        "bindambc_phone_number_throughput",
        "pywa_phone_number_all_fields",
    ],
)
def test_real_graph_answers_are_read(name: str) -> None:
    number = make_phone_number(rate_per_second=40)
    data = graph(name)
    changed = _number_apply(number, data)
    assert "display_phone_number" in changed or number.display_phone_number == str(
        data.get("display_phone_number")
    )
    if isinstance(data.get("throughput"), dict):
        assert number.throughput_level == data["throughput"]["level"]
    if data.get("quality_rating"):
        assert number.quality_rating in ("GREEN", "YELLOW", "RED", "UNKNOWN")
    assert number.rate_per_second == (1000 if number.throughput_level == "HIGH" else 40)


# --- per-message pricing -----------------------------------------------------------------


def test_costs_by_category_and_type_from_the_rate_card_and_the_preflight_estimate() -> None:
    number = make_phone_number()
    RateCard.objects.create(country_prefix="+55", category="marketing", price=Decimal("0.0625"))
    RateCard.objects.create(country_prefix="+5511", category="marketing", price=Decimal("0.07"))
    RateCard.objects.create(country_prefix="*", category="marketing", price=Decimal("0.1"))
    contact_list = make_contact_list()
    for phone in ("+5511999990001", "+5521999990002", "+4915100000003"):
        make_contact(phone=phone, contact_list=contact_list)
    from tests.factories import make_template

    template = make_template(account=number.account, category="MARKETING")
    campaign = make_campaign(phone_number=number, template=template, lists=[contact_list])
    estimate = campaign_cost_estimate(campaign=campaign)
    assert (estimate.messages, estimate.cost, estimate.unpriced) == (3, Decimal("0.2325"), 0)
    report = campaign_preflight(campaign=campaign)
    assert report.cost is not None and report.as_dict()["cost"]["cost"] == "0.2325"

    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.COMPLETED)
    rows = [
        ("+5511999990001", "regular", "marketing"),
        ("+5521999990002", "regular", "marketing"),
        ("+4915100000003", "free_entry_point", "marketing"),
    ]
    for to, kind, category in rows:
        Message.objects.create(
            campaign=campaign,
            phone_number=number,
            to=to,
            status="delivered",
            pricing_model="PMP",
            pricing_type=kind,
            pricing_category=category,
            next_attempt_at="2026-01-01T00:00:00Z",
        )
    lines = {(line.category, line.type): line for line in campaign_costs(campaign=campaign)}
    regular = lines[("marketing", "regular")]
    assert (regular.messages, regular.charged, regular.cost) == (2, 2, Decimal("0.1325"))
    free = lines[("marketing", "free_entry_point")]
    assert (free.messages, free.charged, free.cost) == (1, 0, Decimal(0))
