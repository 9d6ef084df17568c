"""The engagement options of ``manage.py campaign``: a tracked link, a holdout and an
attribution window at create; an A/B test set, read and picked; a follow-up to those who
tapped a quick reply."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from campaigns.models import AbState, Campaign
from delivery.campaigns.launch import campaign_start
from delivery.models import Message
from tests.test_commands import setup_campaign_inputs

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def create(*extra: str) -> Campaign:
    campaign_id = run(
        "campaign",
        "create",
        "--name",
        "Sale",
        "--number",
        "PN1",
        "--template",
        "promo",
        "--list",
        "vip",
        "--param",
        "1=name",
        "--param",
        "2=const:SALE20",
        *extra,
    )
    return Campaign.objects.get(pk=int(campaign_id))


def test_create_with_a_link_a_holdout_and_an_attribution_window(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    campaign = create(
        "--link",
        "https://shop.example.com/{{name}}",
        "--no-utm",
        "--holdout",
        "10",
        "--attribution-days",
        "3",
    )
    assert (campaign.link_destination, campaign.link_utm) == (
        "https://shop.example.com/{{name}}",
        False,
    )
    assert (campaign.holdout_percent, campaign.attribution_days) == (10.0, 3)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--holdout", "60"], r"the holdout is 0 to 50% of the audience"),
        (["--attribution-days", "0"], r"the attribution window is 1 to 90 days"),
        (["--link", "ftp://x.example.com"], r"http"),
    ],
)
def test_create_refuses_bad_engagement_values(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    setup_campaign_inputs(tmp_path)
    with pytest.raises(CommandError, match=message):
        create(*extra)
    assert not Campaign.objects.exists()


def test_an_ab_test_set_read_and_picked_from_the_command_line(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    run(
        "template",
        "add",
        "--number",
        "PN1",
        "--name",
        "promo_b",
        "--language",
        "en_US",
        "--body",
        "Hello {{1}}, code {{2}}",
    )
    campaign = create()
    with pytest.raises(CommandError, match="one --variant-mapping per --variant"):
        run(
            "campaign",
            "ab-test",
            str(campaign.pk),
            "--variant",
            "promo",
            "--variant-mapping",
            "{}",
            "--variant",
            "promo_b",
        )
    out = run(
        "campaign",
        "ab-test",
        str(campaign.pk),
        "--variant",
        "promo",
        "--variant",
        "promo_b:en_US",
        "--share",
        "100",
        "--metric",
        "reply",
        "--manual",
    )
    assert out == f"{campaign.pk} A/B test on 100%, 2 variants"
    campaign.refresh_from_db()
    assert (campaign.ab_test_percent, campaign.ab_metric, campaign.ab_auto_winner) == (
        100.0,
        "reply",
        False,
    )
    assert [v.template.name for v in campaign.variants.order_by("position")] == [
        "promo",
        "promo_b",
    ]
    campaign_start(campaign=campaign)
    assert Message.objects.get().variant in (0, 1)
    status = json.loads(run("campaign", "ab-status", str(campaign.pk), "--json"))
    assert status["state"] == AbState.TESTING
    assert [a["variant"] for a in status["arms"]] == ["A", "B"]
    assert sum(a["recipients"] for a in status["arms"]) == 1
    text = run("campaign", "ab-status", str(campaign.pk))
    assert text.startswith("testing: winning metric Reply rate")
    with pytest.raises(CommandError, match="the variant is a letter, A to E"):
        run("campaign", "ab-pick", str(campaign.pk), "Z")
    assert run("campaign", "ab-pick", str(campaign.pk), "b") == "variant B goes to the rest"
    with pytest.raises(CommandError, match="already decided"):
        run("campaign", "ab-pick", str(campaign.pk), "A")


def test_ab_status_of_a_campaign_without_a_test_says_so(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    campaign = create()
    with pytest.raises(CommandError, match="runs no A/B test"):
        run("campaign", "ab-status", str(campaign.pk))


def test_follow_up_with_an_unknown_outcome_names_the_known_ones(tmp_path: Path) -> None:
    setup_campaign_inputs(tmp_path)
    campaign = create()
    campaign_start(campaign=campaign)
    with pytest.raises(CommandError, match="tapped:<button>"):
        run("campaign", "follow-up", str(campaign.pk), "--with", "bounced")
