"""Template kinds this version cannot send fail closed: the sync keeps them and says why,
the admin pages mark them, and the pre-flight and the launch refuse them with the reason.

Meta's marketing formats (carousels, offers, coupons, catalogue and Flow buttons) are
sendable: tests/campaigns/test_template_formats.py. The templates here are Meta's and
pywa's published ones (tests/fixtures/real/templates_listing), and a GIF header (the
Marketing Messages API's animated media), which the send path does not build.
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
GIF = "GIF headers are not supported yet"
NEW_KIND = "templates with a SOMETHING_NEW component are not supported yet"
GIF_COMPONENTS = [
    {"type": "HEADER", "format": "GIF", "example": {"header_handle": ["4::aW..."]}},
    {"type": "BODY", "text": "Hi {{1}}, our sale starts now", "example": {"body_text": [["Ana"]]}},
]


def published(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((LISTING / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    "name",
    [
        "meta_doc_carousel_media_cards",
        "pywa_carousel_media_cards",
        "pywa_carousel_product_cards",
        "meta_doc_limited_time_offer",
        "pywa_limited_time_offer",
        "pywa_coupon_code",
        "pywa_catalog",
        "pywa_mpm",
        "pywa_spm_product_header",
        "pywa_seasonal_promotion",
        "pywa_order_confirmation",
    ],
)
def test_every_published_marketing_format_is_sendable(name: str) -> None:
    components = published(name)["components"]
    assert components_unsupported(components) == []
    assert components_parse(components).problems == []


@pytest.mark.parametrize(
    ("components", "reason"),
    [
        ([{"type": "SOMETHING_NEW"}], NEW_KIND),
        (
            [{"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]}],
            "OTP buttons are not supported yet",
        ),
        ([{"type": "HEADER", "format": "GIF"}], GIF),
        (
            [{"type": "CAROUSEL", "cards": [{"components": GIF_COMPONENTS[:1]}]}],
            GIF,
        ),
    ],
)
def test_any_other_kind_fails_closed(components: list[dict[str, Any]], reason: str) -> None:
    assert components_unsupported(components) == [reason]


def test_a_row_typed_by_hand_is_judged_by_its_recorded_buttons() -> None:
    row = Template(name="t", language="en", buttons=[{"index": 0, "type": "OTP"}])
    assert template_unusable_reasons(row) == ["OTP buttons are not supported yet"]
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
def test_the_sync_stores_a_template_it_cannot_send_and_names_it_unusable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with running_simulator() as sim:
        account = make_account()
        make_phone_number(account=account, api_base_url=sim.url, access_token="sim-token")
        sim.add_template(
            name="gif_sale", language="en_US", components=GIF_COMPONENTS, waba_id=account.waba_id
        )
        listed(sim, account, "pywa_carousel_media_cards")
        listed(sim, account, "pywa_seasonal_promotion")
        with caplog.at_level(logging.WARNING, logger="delivery.cloud.template_sync"):
            report = templates_sync(account=account)
    assert report.ok, report.error
    assert report.listed == 3 and report.created == 3
    gif = Template.objects.get(account=account, name="gif_sale")
    carousel = Template.objects.get(account=account, name="carousel_template_media_cards_v1")
    usable = Template.objects.get(account=account, name="seasonal_promotion")
    assert gif.status == TemplateStatus.APPROVED and gif.body_param_count == 1
    assert gif.components == GIF_COMPONENTS
    assert report.unusable == {str(gif): [GIF]}
    assert template_unusable_reasons(gif) == [GIF]
    assert template_unusable_reasons(carousel) == template_unusable_reasons(usable) == []
    assert (
        len(carousel.cards) == 3
        and carousel.components == published("pywa_carousel_media_cards")["components"]
    )
    assert f"{gif} of WABA {account.waba_id} is not usable by campaigns: {GIF}" in caplog.text


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
def gif_campaign() -> Campaign:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account, rate_per_second=80)
    contacts = make_contact_list(name="buyers")
    make_contact(phone="+5511900000001", name="Ana", contact_list=contacts)
    parsed = components_parse(GIF_COMPONENTS)
    template = make_template(
        account=account,
        name="gif_sale",
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        components=GIF_COMPONENTS,
    )
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[contacts],
        param_mapping={"body": {"1": {"field": "name"}}},
    )


@pytest.mark.django_db
def test_a_gif_campaign_cannot_be_launched_and_the_error_says_why(
    gif_campaign: Campaign,
) -> None:
    with pytest.raises(LaunchError, match=GIF) as refused:
        campaign_launch(campaign=gif_campaign)
    assert "cannot be sent by this version" in str(refused.value)
    with pytest.raises(LaunchError, match=GIF):
        campaign_validate(campaign=gif_campaign)
    gif_campaign.refresh_from_db()
    assert gif_campaign.status == CampaignStatus.DRAFT
    assert gif_campaign.status_reason == ""
    with pytest.raises(ParamMappingError, match=GIF):
        mapping_validate(gif_campaign.template, gif_campaign.param_mapping)


@pytest.mark.django_db
def test_the_preflight_names_the_reason_as_an_error(gif_campaign: Campaign) -> None:
    report = campaign_preflight(campaign=gif_campaign)
    assert not report.ok
    texts = [f.text for f in report.errors]
    assert any(GIF in text for text in texts), texts
    # One finding for the kind, not a second one worded as a mapping problem.
    assert not any(text.startswith("Parameter mapping") for text in texts)
    assert all(f.level == ERROR for f in report.errors)


# --- the admin pages ---------------------------------------------------------------------------


@pytest.fixture
def admin_client(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_template_pages_mark_it_unusable_with_the_reason(
    admin_client: Client, gif_campaign: Campaign
) -> None:
    template = gif_campaign.template
    fine = make_template(account=template.account, name="plain_hello")
    page = admin_client.get(reverse("admin:campaigns_template_change", args=[template.pk]))
    assert page.status_code == 200
    assert GIF in page.content.decode()
    listing = admin_client.get(reverse("admin:campaigns_template_changelist")).content.decode()
    assert GIF in listing and "plain_hello" in listing
    fine_page = admin_client.get(reverse("admin:campaigns_template_change", args=[fine.pk]))
    assert GIF not in fine_page.content.decode()


@pytest.mark.django_db
def test_the_campaign_form_marks_the_choice_and_refuses_it(
    admin_client: Client, gif_campaign: Campaign
) -> None:
    template = gif_campaign.template
    page = admin_client.get(reverse("admin:campaigns_campaign_add")).content.decode()
    assert f"{template} (not usable: {GIF})" in page
    saved = admin_client.post(
        reverse("admin:campaigns_campaign_change", args=[gif_campaign.pk]),
        {
            "name": gif_campaign.name,
            "phone_number": gif_campaign.phone_number_id,
            "template": template.pk,
            "lists": [gif_campaign.lists.get().pk],
            "param_mapping": json.dumps(gif_campaign.param_mapping),
            "max_attempts": 3,
            "ambiguous_policy": gif_campaign.ambiguous_policy,
            "canary_size": 0,
            "canary_max_failure_percent": 5,
            "share_weight": 1,
        },
    )
    assert saved.status_code == 200  # the form again, with the error (the label says "not usable")
    assert f"cannot be sent by this version: {GIF}" in saved.content.decode()


@pytest.mark.django_db
def test_the_preflight_page_shows_the_reason(admin_client: Client, gif_campaign: Campaign) -> None:
    page = admin_client.get(
        reverse("admin:campaigns_campaign_preflight", kwargs={"object_id": gif_campaign.pk})
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert GIF in html and "The launch would be refused" in html
    assert 'id="wb-launch-form"' not in html


@pytest.mark.parametrize(
    "name",
    ["meta_doc_voice_call_button", "meta_doc_call_permission_request", "spec_flow_button_by_id"],
)
def test_kinds_that_take_nothing_at_send_time_simply_work(name: str) -> None:
    """Meta's voice-call and call-permission templates need no send-time parameter (their
    published send bodies carry none for them); a Flow button's token is optional."""
    components = published(name)["components"]
    assert components_unsupported(components) == []
    parsed = components_parse(components)
    assert all(b["param"] in ("none", "optional") for b in parsed.buttons), parsed.buttons
