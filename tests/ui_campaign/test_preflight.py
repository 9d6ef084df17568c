"""The pre-flight report on a prepared audience: every figure, and agreement with the launch."""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest
from django.utils import timezone

from campaigns.models import CampaignStatus, Contact, TemplateStatus
from delivery.campaigns.launch import LaunchError, campaign_start, campaign_validate
from delivery.campaigns.preflight import ERROR, INFO, WARNING, campaign_preflight
from delivery.engine.reach import reach_admit
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign():
    """8 distinct people in two lists (2 in both): one opted out, one US number, one
    without the mapped coupon, one without a name."""
    account = make_account(messaging_limit_tier="TIER_250")
    number = make_phone_number(account=account, rate_per_second=80, transactional_reserve=0.25)
    template = make_template(
        account=account, name="sale", body_text="Hi {{1}}, use {{2}}", body_param_count=2
    )
    first, second = make_contact_list(name="first"), make_contact_list(name="second")
    coupon = {"coupon": "C1"}
    make_contact(
        phone="+5511900000001",
        name="Out",
        attributes=coupon,
        contact_list=first,
        opted_out_at=timezone.now(),
    )
    make_contact(phone="+12025550100", name="Sam", attributes=coupon, contact_list=first)
    make_contact(phone="+5511900000003", name="NoCoupon", contact_list=first)
    make_contact(phone="+5511900000004", name="", attributes=coupon, contact_list=first)
    for n in (5, 6):
        contact = make_contact(
            phone=f"+551190000000{n}", name=f"P{n}", attributes=coupon, contact_list=first
        )
        second.contacts.add(contact)
    for n in (7, 8):
        make_contact(
            phone=f"+551190000000{n}", name=f"P{n}", attributes=coupon, contact_list=second
        )
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[first, second],
        param_mapping={"body": {"1": {"field": "name"}, "2": {"field": "coupon"}}},
    )


def test_the_audience_figures(campaign) -> None:
    report = campaign_preflight(campaign=campaign)
    assert (report.lists, report.memberships, report.contacts) == (2, 10, 8)
    assert report.duplicates == 2
    assert (report.opted_out, report.us_blocked) == (1, 1)
    assert report.audience == 6
    missing = {m.field: (m.contacts, m.examples) for m in report.missing}
    assert missing == {"name": (1, ["+5511900000004"]), "coupon": (1, ["+5511900000003"])}


def test_errors_are_exactly_what_the_launch_refuses(campaign) -> None:
    report = campaign_preflight(campaign=campaign)
    assert not report.ok
    assert [f.text.split(" (e.g.")[0] for f in report.errors] == [
        "1 contact(s) have no value for mapped field 'coupon'",
        "1 contact(s) have no value for mapped field 'name'",
    ]
    with pytest.raises(LaunchError):
        campaign_validate(campaign=campaign)

    Contact.objects.filter(phone="+5511900000003").update(attributes={"coupon": "C9"})
    Contact.objects.filter(phone="+5511900000004").update(name="Ana")
    report = campaign_preflight(campaign=campaign)
    assert report.ok and report.missing == []
    summary = campaign_start(campaign=campaign)
    assert summary.pending == report.audience == 6
    assert summary.skipped == report.opted_out + report.us_blocked


def test_us_numbers_and_opt_outs_are_reported(campaign) -> None:
    report = campaign_preflight(campaign=campaign)
    levels = {f.text: f.level for f in report.findings}
    assert (
        levels[
            "1 US recipient(s) will be skipped: Meta does not deliver marketing "
            "templates to US numbers (+1 with a US area code) or to user ids issued for "
            "them. Other +1 countries (Canada, the Caribbean) are sent."
        ]
        == WARNING
    )
    assert levels["1 opted-out contact(s) skipped."] == INFO
    assert (
        levels["2 duplicate list entr(y/ies) across lists: each person gets one message."] == INFO
    )


def test_a_utility_template_reaches_us_numbers(campaign) -> None:
    campaign.template.category = "UTILITY"
    campaign.template.save()
    report = campaign_preflight(campaign=campaign)
    assert report.us_blocked == 0 and report.audience == 7


def test_messaging_limit_headroom_from_the_reach_set(campaign) -> None:
    waba = campaign.phone_number.account.waba_id
    reach_admit(waba_id=waba, limit=250, recipients=[f"+4930{i:07d}" for i in range(247)])
    report = campaign_preflight(campaign=campaign)
    assert (report.tier_limit, report.reach_used, report.headroom) == (250, 247, 3)
    assert report.over_headroom == 3 and report.limit_days == 1
    warning = next(f for f in report.findings if f.text.startswith("Messaging limit"))
    assert warning.level == WARNING and "has reached 247" in warning.text


def test_reach_comes_from_the_table_when_redis_lost_it(campaign) -> None:
    from tests.factories import make_message

    other = make_campaign(phone_number=campaign.phone_number, template=campaign.template)
    for i in range(4):
        make_message(campaign=other, to=f"+4930{i:07d}", status="sent", sent_at=timezone.now())
    assert campaign_preflight(campaign=campaign).reach_used == 4


def test_eta_at_the_campaign_share_split_with_other_running_campaigns(campaign) -> None:
    report = campaign_preflight(campaign=campaign)
    assert report.rate_per_second == pytest.approx(60.0)  # 80/s less the 25 % reserve
    assert report.eta_seconds == pytest.approx(6 / 60.0, abs=0.05)
    make_campaign(
        phone_number=campaign.phone_number,
        template=campaign.template,
        status=CampaignStatus.RUNNING,
    )
    report = campaign_preflight(campaign=campaign)
    assert report.rate_per_second == pytest.approx(30.0)


def test_eta_with_a_send_window(campaign) -> None:
    campaign.window_start, campaign.window_end = time(9), time(10)
    campaign.time_zone = "America/Sao_Paulo"
    campaign.save()
    Contact.objects.filter(phone__startswith="+1").delete()  # every recipient in Sao Paulo
    now = datetime(2026, 3, 2, 20, 0, tzinfo=UTC)  # 17:00 in Sao Paulo
    report = campaign_preflight(campaign=campaign, now=now)
    assert report.window == "09:00-10:00"
    # Closed now: the audience goes out when the window next opens, 09:00 local = 12:00 UTC.
    assert report.eta is not None and report.eta.date().isoformat() == "2026-03-03"
    assert report.eta.hour == 12


def test_template_and_mapping_problems_are_errors() -> None:
    account = make_account()
    template = make_template(account=account, status=TemplateStatus.PAUSED)
    campaign = make_campaign(
        phone_number=make_phone_number(account=account),
        template=template,
        param_mapping={"body": {}},
    )
    report = campaign_preflight(campaign=campaign)
    texts = [f.text for f in report.errors]
    assert texts[0].startswith("Template promo (en_US) is PAUSED")
    assert texts[1].startswith("Parameter mapping: template promo body param(s) 1")
    assert texts[2] == "The campaign has no contact list and no segment."
    assert all(f.level == ERROR for f in report.errors)
