"""The campaign report's engagement and A/B test sections, read by Marketing and Support:
clicks, button taps, conversions and money, the lift against the holdout, Meta's counts
beside ours, each arm's figures, and the marketer's pick of the winner."""

from __future__ import annotations

import re
from datetime import date
from html import unescape
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.models import AbState, Campaign, CampaignVariant
from delivery.graph_reads import (
    CampaignTemplateAnalytics,
    TemplateAnalyticsDay,
    TemplateButtonClicks,
)
from tests.factories import make_campaign, make_template
from tests.ui.support import role_user
from tests.ui_campaign.conftest import MAPPING
from tests.ui_campaign.engagement_support import (
    QUICK_REPLIES,
    STOP,
    YES,
    seed_ab_results,
    short_template_fields,
)
from whatsblast.admin import campaign_engagement
from whatsblast.auth.roles import MARKETING, SUPPORT
from whatsblast.core.proportions import proportion_diff, wilson_interval

pytestmark = pytest.mark.django_db

SHORT_MAPPING = {"body": {"1": {"field": "name"}}, "buttons": {"0": {"click": True}}}


@pytest.fixture
def ab_campaign(setup: dict[str, Any]) -> Campaign:
    """A launched A/B test (A: the campaign's template, B: a short one with a tracked
    button), a 10 % holdout and a tracked link, with the results of engagement_support."""
    setup["template"].buttons = QUICK_REPLIES
    setup["template"].save()
    short = make_template(account=setup["account"], **short_template_fields())
    campaign = make_campaign(
        phone_number=setup["number"],
        template=setup["template"],
        name="Spring test",
        param_mapping=MAPPING,
        link_destination="https://shop.example.com/sale?city={{city}}",
        holdout_percent=10,
        ab_test_percent=80,
        ab_metric="click",
        ab_auto_winner=False,
    )
    CampaignVariant.objects.create(
        campaign=campaign, position=0, template=setup["template"], param_mapping=MAPPING
    )
    CampaignVariant.objects.create(
        campaign=campaign, position=1, template=short, param_mapping=SHORT_MAPPING
    )
    seed_ab_results(campaign)
    return campaign


def as_role(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


def report(client: Client, campaign: Campaign) -> str:
    response = client.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    assert response.status_code == 200
    return response.content.decode()


def cells(page: str, table_id: str) -> dict[str, list[str]]:
    """{data-figure or first cell: [each cell's text]} of the table's rows."""
    table = page[page.index(f'id="{table_id}"') :]
    table = table[: table.index("</table>")]
    rows: dict[str, list[str]] = {}
    for row in re.findall(r"<tr([^>]*)>(.*?)</tr>", table, re.S):
        attrs, body = row
        texts = [
            " ".join(unescape(re.sub(r"<[^>]+>", " ", c)).split())
            for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", body, re.S)
        ]
        key = re.search(r'data-(?:figure|arm)="([^"]+)"', attrs)
        rows[key.group(1) if key else texts[0]] = texts
    return rows


def pct(value: float) -> str:
    rounded = round(value * 100, 1)
    return f"{0.0 if rounded == 0 else rounded} %"


def test_the_report_shows_clicks_taps_and_conversions(ab_campaign: Campaign) -> None:
    page = report(as_role(MARKETING), ab_campaign)
    clicks = cells(page, "wb-report-clicks")
    assert clicks["clicks"][:2] == ["Clicks", "10"]
    assert clicks["people"][:2] == ["People who clicked", "9"]
    assert clicks["click_rate"][:2] == ["Click rate", "45.0 %"]  # 9 of 20 delivered
    assert clicks["previews"][:2] == ["Preview fetches", "2"]

    taps = cells(page, "wb-report-taps")
    assert taps[YES] == [YES, "YES", "3", "2"]
    assert taps[STOP] == [STOP, "STOP", "1", "1"]

    roi = cells(page, "wb-report-roi")
    assert roi["conversions"][:2] == ["Conversions", "3"]
    assert roi["revenue"][:2] == ["Revenue", "180.0000 BRL"]
    assert roi["revenue_per_message"][1:] == [
        "9.0000 BRL",
        "Revenue ÷ 20 messages sent.",
    ]
    assert roi["cost"][:2] == ["Cost", "no rate card loaded"]
    assert roi["return_on_spend"][1:] == ["not known", "The cost is not known in full."]
    assert "No rate card loaded: the cost is not known." in page

    # Lift: 3 of the 20 sent converted, 1 of the 5 held out.
    lift = cells(page, "wb-report-lift")
    assert lift["treated"] == ["Messaged, converted", "15.0 % of 20 recipients"]
    assert lift["control"] == ["Held out, converted", "20.0 % of 5 recipients"]
    comparison = proportion_diff(1, 5, 3, 20)
    low, high = comparison.interval.low * 100, comparison.interval.high * 100
    assert lift["lift"][1] == (
        f"−5.0 points (−25 % relative) 95 %: −{abs(round(low, 1))} points to "
        f"+{round(high, 1)} points · p = {comparison.p_value:.2f} · could be chance (95 %)"
    )


def test_the_ab_section_shows_each_arm_against_a(ab_campaign: Campaign) -> None:
    page = report(as_role(MARKETING), ab_campaign)
    assert 'id="wb-report-ab" data-state="Waiting for the marketer&#x27;s pick"' in page
    assert "Winning metric: click rate" in page
    arms = cells(page, "wb-report-ab")
    a_low, a_high = (x * 100 for x in (wilson_interval(3, 10).low, wilson_interval(3, 10).high))
    assert arms["A"][:5] == [
        "A",
        "spring_sale (en_US)",
        "10",
        "3",
        f"30.0 % 95 %: {round(a_low, 1)} % to {round(a_high, 1)} %",
    ]
    assert arms["A"][6] == "the baseline"
    b = proportion_diff(3, 10, 6, 10)
    assert arms["B"][:4] == ["B leads", "spring_short (en_US)", "10", "6"]
    assert arms["B"][4].startswith("60.0 % 95 %: ")
    assert arms["B"][6] == (
        f"+30.0 points p = {b.p_value:.2f} 95 %: {'−' if b.interval.low < 0 else '+'}"
        f"{abs(round(b.interval.low * 100, 1))} points to +{round(b.interval.high * 100, 1)} "
        "points · could be chance (95 %)"
    )
    a_best, b_best = int(arms["A"][5].rstrip(" %")), int(arms["B"][5].rstrip(" %"))
    assert b_best > 80 and a_best + b_best == 100
    assert "The test is done: pick the variant the rest is sent." in page
    assert arms["A"][7] == "Send variant A to the rest"
    assert arms["B"][7] == "Send variant B to the rest"


def test_meta_says_beside_our_figures(
    ab_campaign: Campaign, monkeypatch: pytest.MonkeyPatch
) -> None:
    days = [
        TemplateAnalyticsDay(
            "111", date(2026, 3, 1), sent=12, delivered=11, read=5,
            clicked=(
                TemplateButtonClicks("url_button", "Shop", 4),
                TemplateButtonClicks("unique_url_button", "Shop", 3),
                TemplateButtonClicks("quick_reply_button", YES, 2),
            ),
        ),
        TemplateAnalyticsDay("222", date(2026, 3, 1), sent=9, delivered=9, read=4),
    ]  # fmt: skip
    monkeypatch.setattr(
        campaign_engagement,
        "campaign_template_analytics",
        lambda campaign: CampaignTemplateAnalytics(days, {"111": "a", "222": "b"}, "", "now"),
    )
    meta = cells(report(as_role(MARKETING), ab_campaign), "wb-report-meta")
    assert meta["sent"] == ["Sent", "20", "21"]
    assert meta["delivered"] == ["Delivered", "20", "20"]
    assert meta["read"] == ["Read", "9", "9"]
    assert meta["url_button"] == ["Link clicks", "10", "4"]
    assert meta["unique_url_button"] == ["People who clicked", "9", "3"]
    assert meta["quick_reply_button"] == ["Quick-reply taps", "4", "2"]


def test_meta_not_available_says_why(ab_campaign: Campaign) -> None:
    # The templates have no Meta id: nothing is asked of the Graph API.
    page = report(as_role(MARKETING), ab_campaign)
    meta = cells(page, "wb-report-meta")
    assert meta["sent"] == ["Sent", "20", "not available"]
    assert "Meta's counts are not available: no template has Meta's id yet." in unescape(page)


def test_the_report_offers_the_follow_ups_of_every_outcome_and_button(
    ab_campaign: Campaign,
) -> None:
    page = report(as_role(MARKETING), ab_campaign)
    outcomes = re.findall(r'<tr data-outcome="([^"]+)">', page)
    assert "delivered_not_clicked" in outcomes
    assert f"tapped:{YES}" in outcomes and f"tapped:{STOP}" in outcomes
    follow_ups = cells(page, "wb-follow-ups")
    assert follow_ups["Delivered but did not click"][1] == "11"  # 20 delivered, 9 clicked
    assert follow_ups[f"Tapped “{YES}”"][1] == "2"


def test_a_marketer_picks_the_winner(ab_campaign: Campaign) -> None:
    marketer = as_role(MARKETING)
    url = reverse("admin:campaigns_campaign_ab_winner", args=[ab_campaign.pk])
    response = marketer.post(url, {"position": "1"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse(
        "admin:campaigns_campaign_report", args=[ab_campaign.pk]
    )
    ab_campaign.refresh_from_db()
    assert ab_campaign.ab_state == AbState.DECIDED and ab_campaign.ab_winner.position == 1
    page = response.content.decode()
    assert "Variant B is the winner: the rest of Spring test is sent it." in page
    assert cells(page, "wb-report-ab")["B"][0] == "B winner"
    assert unescape(ab_campaign.ab_decision) in unescape(page)
    assert "Send variant" not in page  # decided: nothing left to pick

    again = marketer.post(url, {"position": "0"}, follow=True)
    assert "No winner sent: the winner is already decided." in again.content.decode()
    ab_campaign.refresh_from_db()
    assert ab_campaign.ab_winner.position == 1


def test_a_pick_of_no_arm_says_why(ab_campaign: Campaign) -> None:
    url = reverse("admin:campaigns_campaign_ab_winner", args=[ab_campaign.pk])
    page = as_role(MARKETING).post(url, {"position": "4"}, follow=True).content.decode()
    assert "No winner sent: the campaign has no variant 4." in page
    page = as_role_fresh(MARKETING).post(url, {}, follow=True).content.decode()
    assert "No winner sent: choose a variant." in page
    assert Campaign.objects.get(pk=ab_campaign.pk).ab_state == AbState.WAITING_PICK


def as_role_fresh(role: str) -> Client:
    """The same role's user again (each role's user is made once per test)."""
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(groups__name=role))
    return client


def test_support_reads_the_report_but_cannot_pick_a_winner(ab_campaign: Campaign) -> None:
    support = as_role(SUPPORT)
    page = report(support, ab_campaign)
    assert cells(page, "wb-report-clicks")["people"][1] == "9"
    assert cells(page, "wb-report-ab")["B"][2] == "10"
    assert "Send variant" not in page and 'id="wb-follow-ups"' not in page
    url = reverse("admin:campaigns_campaign_ab_winner", args=[ab_campaign.pk])
    assert support.post(url, {"position": "1"}).status_code == 403
    assert support.get(url).status_code == 405
    assert Campaign.objects.get(pk=ab_campaign.pk).ab_state == AbState.WAITING_PICK


def test_a_campaign_without_engagement_reads_plainly(setup: dict[str, Any]) -> None:
    campaign = make_campaign(
        phone_number=setup["number"], template=setup["template"], status="completed"
    )
    page = report(as_role(MARKETING), campaign)
    assert 'id="wb-report-ab"' not in page
    clicks = cells(page, "wb-report-clicks")
    assert clicks["click_rate"][:2] == ["Click rate", "-"]  # nothing delivered: no rate
    assert "This campaign has no tracked link." in page
    assert 'id="wb-report-taps-none"' in page
    assert "No holdout: set one on the campaign to measure lift." in page
    assert cells(page, "wb-report-roi")["revenue_per_message"][1] == "-"
    assert "not started" in page  # Meta's counts: the campaign never started


@pytest.mark.parametrize(
    ("difference", "shown"),
    [(0.021, "+2.1 points"), (-0.3, "−30.0 points"), (-0.0004, "±0.0 points"), (0, "±0.0 points")],
)
def test_a_difference_reads_in_signed_points_never_minus_zero(
    difference: float, shown: str
) -> None:
    assert campaign_engagement.points_text(difference) == shown


@pytest.mark.parametrize(
    ("p_value", "shown"),
    [(None, "-"), (0.0004, "p < 0.001"), (0.0042, "p = 0.004"), (0.25, "p = 0.25")],
)
def test_a_p_value_reads_plainly(p_value: float | None, shown: str) -> None:
    assert campaign_engagement.p_text(p_value) == shown


@pytest.mark.parametrize(
    ("part", "whole", "shown"),
    [(9, 20, "45.0 %"), (1999, 2000, "99.9 %"), (1, 5000, "0.1 %"), (3, 0, "-")],
)
def test_a_share_is_never_100_or_0_unless_exact(part: int, whole: int, shown: str) -> None:
    assert campaign_engagement.share_text(part, whole) == shown
