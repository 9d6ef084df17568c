"""Template kinds this version cannot send fail closed: the sync keeps them and says why,
the admin pages mark them, and the pre-flight and the launch refuse them with the reason.

The templates are Meta's and pywa's published ones (tests/fixtures/real/templates_listing).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.catalogue.components import components_parse
from campaigns.catalogue.params import ParamMappingError, mapping_validate
from campaigns.catalogue.sendable import components_unsupported, template_unusable_reasons
from campaigns.models import BusinessAccount, Campaign, CampaignStatus, Template, TemplateStatus
from delivery.campaigns.launch import LaunchError, campaign_validate
from delivery.campaigns.launch_queue import campaign_launch
from delivery.campaigns.preflight import ERROR, campaign_preflight
from delivery.cloud.template_sync import templates_sync
from tests.engine_support import running_simulator
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)

LISTING = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "templates_listing"
CAROUSEL = "carousel templates are not supported yet"
LTO = "limited-time-offer templates are not supported yet"


def published(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LISTING / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("name", "reasons"),
    [
        ("meta_doc_carousel_media_cards", [CAROUSEL]),
        ("pywa_carousel_media_cards", [CAROUSEL]),
        ("pywa_carousel_product_cards", [CAROUSEL]),
        ("meta_doc_limited_time_offer", [LTO, "COPY_CODE buttons are not supported yet"]),
        ("pywa_limited_time_offer", [LTO, "COPY_CODE buttons are not supported yet"]),
        ("pywa_coupon_code", ["COPY_CODE buttons are not supported yet"]),
        ("pywa_catalog", ["CATALOG buttons are not supported yet"]),
        ("pywa_mpm", ["MPM buttons are not supported yet"]),
        (
            "pywa_spm_product_header",
            ["PRODUCT headers are not supported yet", "SPM buttons are not supported yet"],
        ),
        ("pywa_seasonal_promotion", []),
        ("pywa_order_confirmation", []),
    ],
)
def test_published_templates_and_why_this_version_cannot_send_them(
    name: str, reasons: list[str]
) -> None:
    components = published(name)["components"]
    assert components_unsupported(components) == reasons
    # The parse leads its problems with the same reasons (the sync reports these).
    assert components_parse(components).problems[: len(reasons)] == reasons


@pytest.mark.parametrize(
    ("components", "reason"),
    [
        (
            [{"type": "CALL_PERMISSION_REQUEST"}, {"type": "BODY", "text": "Hi"}],
            "call-permission-request templates are not supported yet",
        ),
        (
            [{"type": "SOMETHING_NEW"}],
            "templates with a SOMETHING_NEW component are not supported yet",
        ),
        (
            [{"type": "BUTTONS", "buttons": [{"type": "FLOW", "text": "Book"}]}],
            "FLOW buttons are not supported yet",
        ),
        (
            [{"type": "BUTTONS", "buttons": [{"type": "VOICE_CALL", "text": "Call"}]}],
            "VOICE_CALL buttons are not supported yet",
        ),
        (
            [{"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]}],
            "OTP buttons are not supported yet",
        ),
        ([{"type": "HEADER", "format": "GIF"}], "GIF headers are not supported yet"),
    ],
)
def test_any_other_kind_fails_closed(components: list[dict[str, Any]], reason: str) -> None:
    assert components_unsupported(components) == [reason]


def test_a_row_typed_by_hand_is_judged_by_its_recorded_buttons() -> None:
    row = Template(name="t", language="en", buttons=[{"index": 0, "type": "COPY_CODE"}])
    assert template_unusable_reasons(row) == ["COPY_CODE buttons are not supported yet"]
    assert template_unusable_reasons(Template(name="ok", language="en")) == []


# --- the sync ------------------------------------------------------------------------------


def listed(sim: Any, account: BusinessAccount, name: str) -> None:
    """A published template as the listing carries it (APPROVED, with an id)."""
    template = published(name)
    sim.add_template(
        name=template["name"],
        language=template["language"],
        category=template["category"].upper(),
        components=template["components"],
        waba_id=account.waba_id,
    )


@pytest.mark.django_db(transaction=True)
def test_the_sync_stores_carousel_and_offer_templates_and_names_them_unusable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with running_simulator() as sim:
        account = make_account()
        make_phone_number(account=account, api_base_url=sim.url, access_token="sim-token")
        for name in ("pywa_carousel_media_cards", "meta_doc_limited_time_offer"):
            listed(sim, account, name)
        listed(sim, account, "pywa_seasonal_promotion")
        with caplog.at_level(logging.WARNING, logger="delivery.cloud.template_sync"):
            report = templates_sync(account=account)
    assert report.ok, report.error
    assert report.listed == 3 and report.created == 3
    carousel = Template.objects.get(account=account, name="carousel_template_media_cards_v1")
    offer = Template.objects.get(account=account, name="limited_time_offer_caribbean_pkg_2023")
    usable = Template.objects.get(account=account, name="seasonal_promotion")
    assert carousel.status == TemplateStatus.APPROVED and carousel.body_param_count == 3
    assert carousel.components == published("pywa_carousel_media_cards")["components"]
    assert report.unusable[str(carousel)] == [CAROUSEL]
    assert report.unusable[str(offer)][:2] == [LTO, "COPY_CODE buttons are not supported yet"]
    assert str(usable) not in report.unusable
    assert template_unusable_reasons(carousel) == [CAROUSEL]
    assert template_unusable_reasons(usable) == []
    logged = caplog.text
    assert f"{carousel} of WABA {account.waba_id} is not usable by campaigns: {CAROUSEL}" in logged
    assert f"{offer} of WABA" in logged and LTO in logged


# --- launch and pre-flight -------------------------------------------------------------------


def stored(account: BusinessAccount, name: str) -> Template:
    """A published template as the sync stores it."""
    template = published(name)
    parsed = components_parse(template["components"])
    return make_template(
        account=account,
        name=template["name"],
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        buttons=parsed.buttons,
        header_format=parsed.header_format,
        components=template["components"],
    )


@pytest.fixture
def carousel_campaign() -> Campaign:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account, rate_per_second=80)
    contacts = make_contact_list(name="buyers")
    make_contact(phone="+5511900000001", name="Ana", contact_list=contacts)
    return make_campaign(
        phone_number=number,
        template=stored(account, "pywa_carousel_media_cards"),
        lists=[contacts],
        param_mapping={
            "body": {"1": {"field": "name"}, "2": {"value": "30%"}, "3": {"value": "30OFF"}}
        },
    )


@pytest.mark.django_db
def test_a_carousel_campaign_cannot_be_launched_and_the_error_says_why(
    carousel_campaign: Campaign,
) -> None:
    with pytest.raises(LaunchError, match=CAROUSEL) as refused:
        campaign_launch(campaign=carousel_campaign)
    assert "cannot be sent by this version" in str(refused.value)
    with pytest.raises(LaunchError, match=CAROUSEL):
        campaign_validate(campaign=carousel_campaign)
    carousel_campaign.refresh_from_db()
    assert carousel_campaign.status == CampaignStatus.DRAFT
    assert carousel_campaign.status_reason == ""
    with pytest.raises(ParamMappingError, match=CAROUSEL):
        mapping_validate(carousel_campaign.template, carousel_campaign.param_mapping)


@pytest.mark.django_db
def test_the_preflight_names_the_reason_as_an_error(carousel_campaign: Campaign) -> None:
    report = campaign_preflight(campaign=carousel_campaign)
    assert not report.ok
    texts = [f.text for f in report.errors]
    assert any(CAROUSEL in text for text in texts), texts
    # One finding for the kind, not a second one worded as a mapping problem.
    assert not any(text.startswith("Parameter mapping") for text in texts)
    assert all(f.level == ERROR for f in report.errors)


@pytest.mark.django_db
def test_an_offer_campaign_is_refused_with_both_reasons() -> None:
    number = make_phone_number()
    template = stored(number.account, "pywa_limited_time_offer")
    contacts = make_contact_list()
    make_contact(contact_list=contacts, name="Bo")
    campaign = make_campaign(
        phone_number=number,
        template=template,
        lists=[contacts],
        param_mapping={
            "body": {"1": {"field": "name"}, "2": {"value": "CARIBE25"}},
            "header": {"value": "https://cdn.example/offer.jpg"},
            "buttons": {"1": {"value": "n3mtql"}},
        },
    )
    with pytest.raises(LaunchError) as refused:
        campaign_validate(campaign=campaign)
    assert LTO in str(refused.value) and "COPY_CODE buttons" in str(refused.value)


# --- the admin pages ---------------------------------------------------------------------------


@pytest.fixture
def admin_client(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_template_pages_mark_it_unusable_with_the_reason(
    admin_client: Client, carousel_campaign: Campaign
) -> None:
    template = carousel_campaign.template
    fine = make_template(account=template.account, name="plain_hello")
    page = admin_client.get(reverse("admin:campaigns_template_change", args=[template.pk]))
    assert page.status_code == 200
    assert CAROUSEL in page.content.decode()
    listing = admin_client.get(reverse("admin:campaigns_template_changelist")).content.decode()
    assert CAROUSEL in listing and "plain_hello" in listing
    fine_page = admin_client.get(reverse("admin:campaigns_template_change", args=[fine.pk]))
    assert CAROUSEL not in fine_page.content.decode()


@pytest.mark.django_db
def test_the_campaign_form_marks_the_choice_and_refuses_it(
    admin_client: Client, carousel_campaign: Campaign
) -> None:
    template = carousel_campaign.template
    page = admin_client.get(reverse("admin:campaigns_campaign_add")).content.decode()
    assert f"{template} (not usable: {CAROUSEL})" in page
    saved = admin_client.post(
        reverse("admin:campaigns_campaign_change", args=[carousel_campaign.pk]),
        {
            "name": carousel_campaign.name,
            "phone_number": carousel_campaign.phone_number_id,
            "template": template.pk,
            "lists": [carousel_campaign.lists.get().pk],
            "param_mapping": json.dumps(carousel_campaign.param_mapping),
            "max_attempts": 3,
            "ambiguous_policy": carousel_campaign.ambiguous_policy,
            "canary_size": 0,
            "canary_max_failure_percent": 5,
            "share_weight": 1,
        },
    )
    assert saved.status_code == 200  # the form again, with the error (the label says "not usable")
    assert f"cannot be sent by this version: {CAROUSEL}" in saved.content.decode()


@pytest.mark.django_db
def test_the_preflight_page_shows_the_reason(
    admin_client: Client, carousel_campaign: Campaign
) -> None:
    page = admin_client.get(
        reverse("admin:campaigns_campaign_preflight", kwargs={"object_id": carousel_campaign.pk})
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert CAROUSEL in html and "The launch would be refused" in html
    assert 'id="wb-launch-form"' not in html
