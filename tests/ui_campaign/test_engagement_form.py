"""The campaign form's engagement settings: a tracked link, a holdout, the attribution
window and an A/B test with its variants, saved as a marketer fills them in and refused,
on the field or the variant's row, when they cannot work."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.models import AbMetric, Campaign, CampaignVariant, Template
from tests.factories import make_account, make_campaign, make_template
from tests.ui_campaign.conftest import MAPPING

pytestmark = pytest.mark.django_db

TRACKED = {"body": {"1": {"field": "name"}, "2": {"click": True}}}


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:campaigns_campaign_{name}", args=args)


def form_data(setup: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """The form as the page posts it before this issue: no engagement field at all."""
    data = {
        "name": "Spring sale",
        "phone_number": setup["number"].pk,
        "template": setup["template"].pk,
        "lists": [setup["list"].pk],
        "param_mapping": json.dumps(MAPPING),
        "time_zone_attribute": "timezone",
        "max_attempts": 5,
        "ambiguous_policy": "resend",
        "canary_size": 0,
        "canary_max_failure_percent": 5,
        "share_weight": 1,
    }
    data.update(overrides)
    return data


def short_template(setup: dict[str, Any]) -> Template:
    """A second approved template of the account: one body param and a tracked button."""
    return make_template(
        account=setup["account"],
        name="spring_short",
        body_text="{{1}}, 20% off today only.",
        body_examples=["Asha"],
        buttons=[
            {
                "index": 0,
                "type": "URL",
                "text": "Shop",
                "url": "https://go.example.com/c/{{1}}",
                "sub_type": "url",
                "param": "required",
                "example": "abc",
            }
        ],
    )


def ab_data(setup: dict[str, Any], short: Template, **overrides: Any) -> dict[str, Any]:
    data = {
        "param_mapping": json.dumps(TRACKED),
        "link_destination": "https://shop.example.com/sale?city={{city}}",
        "link_utm": "on",
        "holdout_percent": "10",
        "attribution_days": "5",
        "ab_test_percent": "20",
        "ab_metric": "click",
        "ab_decide_after_hours": "6",
        "ab_decide_min_sample": "250",
        "variant-0-template": setup["template"].pk,
        "variant-0-param_mapping": json.dumps(TRACKED),
        "variant-1-template": short.pk,
        "variant-1-param_mapping": json.dumps(
            {"body": {"1": {"field": "name"}}, "buttons": {"0": {"click": True}}}
        ),
    }
    return form_data(setup, **{**data, **overrides})


def row_html(page: str, label: str) -> str:
    """The variant row's own markup, up to the next row."""
    start = page.index(f'id="wb-variant-{label}"')
    following = re.compile(r'<div class="wb-variant[ "]').search(page, start)
    return page[start : following.start() if following else len(page)]


def test_a_form_without_the_new_fields_still_saves_with_their_defaults(
    marketer: Client, setup: dict[str, Any]
) -> None:
    response = marketer.post(url("add"), form_data(setup))
    campaign = Campaign.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (campaign.holdout_percent, campaign.attribution_days, campaign.ab_test_percent) == (
        0.0,
        7,
        0.0,
    )
    assert campaign.ab_metric == AbMetric.READ and campaign.ab_decide_min_sample == 100
    assert campaign.link_destination == "" and not campaign.variants.exists()


def test_the_form_shows_the_three_sections_and_the_variant_rows(
    marketer: Client, setup: dict[str, Any]
) -> None:
    page = marketer.get(url("add")).content.decode()
    for heading in ("Tracked link", "Holdout and attribution", "A/B test (optional)"):
        assert f"<h2>{heading}</h2>" in page
    for name in ("link_destination", "holdout_percent", "attribution_days", "ab_metric"):
        assert f'name="{name}"' in page
    # Five rows, two shown: a test compares at least two.
    assert re.findall(r'id="wb-variant-([A-E])"', page) == list("ABCDE")
    assert 'id="wb-variant-B" data-position="1">' in page
    assert 'id="wb-variant-C" data-position="2" hidden>' in page
    assert page.count('name="variant-0-template"') == 1


def test_a_marketer_saves_an_ab_test_with_a_holdout_and_a_tracked_link(
    marketer: Client, setup: dict[str, Any]
) -> None:
    short = short_template(setup)
    response = marketer.post(url("add"), ab_data(setup, short))
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get()
    assert campaign.link_destination == "https://shop.example.com/sale?city={{city}}"
    assert campaign.link_utm and not campaign.ab_auto_winner
    assert (campaign.holdout_percent, campaign.attribution_days) == (10.0, 5)
    assert (campaign.ab_test_percent, campaign.ab_metric) == (20.0, "click")
    assert (campaign.ab_decide_after_hours, campaign.ab_decide_min_sample) == (6.0, 250)
    assert campaign.param_mapping == TRACKED
    variants = list(CampaignVariant.objects.filter(campaign=campaign).order_by("position"))
    assert [(v.position, v.label, v.template_id) for v in variants] == [
        (0, "A", setup["template"].pk),
        (1, "B", short.pk),
    ]
    assert variants[1].param_mapping["buttons"] == {"0": {"click": True}}

    # The draft opens with its variants in their rows, and saves again unchanged.
    page = marketer.get(url("change", campaign.pk)).content.decode()
    assert f'<option value="{short.pk}" selected data-account="{setup["account"].pk}">' in (
        row_html(page, "B")
    )
    assert "&quot;click&quot;: true" in row_html(page, "B")  # the row's mapping, for the editor
    again = marketer.post(url("change", campaign.pk), ab_data(setup, short, name="Again"))
    assert again.status_code == 302
    assert CampaignVariant.objects.filter(campaign=campaign).count() == 2


def test_an_empty_row_between_variants_is_left_out_and_the_rest_close_up(
    marketer: Client, setup: dict[str, Any]
) -> None:
    short = short_template(setup)
    data = ab_data(
        setup,
        short,
        **{
            "variant-1-template": "",
            "variant-1-param_mapping": "{}",
            "variant-3-template": short.pk,
            "variant-3-param_mapping": json.dumps(
                {"body": {"1": {"value": "Friend"}}, "buttons": {"0": {"click": True}}}
            ),
        },
    )
    assert marketer.post(url("add"), data).status_code == 302
    variants = CampaignVariant.objects.order_by("position")
    assert [(v.label, v.template_id) for v in variants] == [
        ("A", setup["template"].pk),
        ("B", short.pk),
    ]


def test_turning_the_test_off_removes_the_variants(marketer: Client, setup: dict[str, Any]) -> None:
    short = short_template(setup)
    marketer.post(url("add"), ab_data(setup, short))
    campaign = Campaign.objects.get()
    response = marketer.post(url("change", campaign.pk), ab_data(setup, short, ab_test_percent=0))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.ab_test_percent == 0 and not campaign.variants.exists()


def test_a_holdout_over_half_the_audience_is_refused(
    marketer: Client, setup: dict[str, Any]
) -> None:
    response = marketer.post(url("add"), form_data(setup, holdout_percent="60"))
    assert response.status_code == 200 and not Campaign.objects.exists()
    assert response.context["form"].errors["holdout_percent"] == [
        "Ensure this value is less than or equal to 50.0."
    ]
    page = response.content.decode()
    assert "Please correct the error below." in page


def test_a_variant_missing_a_param_is_refused_on_its_row(
    marketer: Client, setup: dict[str, Any]
) -> None:
    short = short_template(setup)
    half = {"body": {"1": {"field": "name"}}}  # the button's link is not mapped
    response = marketer.post(
        url("add"), ab_data(setup, short, **{"variant-1-param_mapping": json.dumps(half)})
    )
    assert response.status_code == 200 and not Campaign.objects.exists()
    page = response.content.decode()
    row = row_html(page, "B")
    assert "Template spring_short button(s) 0 need their url suffix mapped." in row
    assert "need their" not in row_html(page, "A")
    assert response.context["form"].errors["ab_test_percent"] == [
        "A variant below needs correcting."
    ]
    assert not CampaignVariant.objects.exists()


def test_a_test_of_one_variant_is_refused(marketer: Client, setup: dict[str, Any]) -> None:
    short = short_template(setup)
    data = ab_data(setup, short, **{"variant-1-template": ""})
    response = marketer.post(url("add"), data)
    assert response.status_code == 200 and not Campaign.objects.exists()
    assert response.context["form"].errors["ab_test_percent"] == [
        "An A/B test has 2 to 5 variants, this one has 1."
    ]


def test_a_variant_of_another_account_is_refused(marketer: Client, setup: dict[str, Any]) -> None:
    short = short_template(setup)
    stranger = make_template(account=make_account(), name="elsewhere")
    data = ab_data(
        setup,
        short,
        **{
            "variant-1-template": stranger.pk,
            "variant-1-param_mapping": json.dumps({"body": {"1": {"field": "name"}}}),
        },
    )
    response = marketer.post(url("add"), data)
    assert response.status_code == 200
    assert "This template belongs to another WABA than the number." in row_html(
        response.content.decode(), "B"
    )


@pytest.mark.parametrize(
    ("destination", "error"),
    [
        ("ftp://shop.example.com/", "The link must start with https:// (or http://)."),
        (
            "https://{{shop}}.example.com/",
            "A {{field}} may not be part of the site's name, only of what follows it.",
        ),
        ("https://shop.example.com/?c={{city", "A placeholder is not closed"),
    ],
)
def test_a_bad_link_destination_is_refused_on_its_field(
    marketer: Client, setup: dict[str, Any], destination: str, error: str
) -> None:
    response = marketer.post(url("add"), form_data(setup, link_destination=destination))
    assert response.status_code == 200 and not Campaign.objects.exists()
    errors = response.context["form"].errors["link_destination"]
    assert any(e.startswith(error) for e in errors), errors


def test_a_tracked_link_without_a_destination_saves_with_what_is_left_to_do(
    marketer: Client, setup: dict[str, Any]
) -> None:
    response = marketer.post(
        url("add"), form_data(setup, param_mapping=json.dumps(TRACKED)), follow=True
    )
    campaign = Campaign.objects.get()
    assert campaign.param_mapping == TRACKED
    text = response.content.decode()
    assert "say where the tracked link goes (Tracked link goes to)" in text


def test_a_tracked_link_in_a_header_is_refused(marketer: Client, setup: dict[str, Any]) -> None:
    template = make_template(
        account=setup["account"],
        name="with_header",
        header_format="TEXT",
        header_text="Hi {{1}}",
        header_param="1",
        body_text="Sale",
        body_param_count=0,
    )
    mapping = {"header": {"click": True}, "body": {}}
    response = marketer.post(
        url("add"), form_data(setup, template=template.pk, param_mapping=json.dumps(mapping))
    )
    assert response.status_code == 200 and not Campaign.objects.exists()
    assert "a tracked link goes in a body parameter or a URL button" in response.content.decode()


def test_a_launched_campaigns_variants_are_shown_not_edited(
    marketer: Client, setup: dict[str, Any]
) -> None:
    campaign = make_campaign(
        phone_number=setup["number"],
        template=setup["template"],
        status="running",
        ab_test_percent=30,
        param_mapping=MAPPING,
    )
    CampaignVariant.objects.create(
        campaign=campaign, position=0, template=setup["template"], param_mapping=MAPPING
    )
    CampaignVariant.objects.create(
        campaign=campaign, position=1, template=setup["template"], param_mapping=MAPPING
    )
    page = marketer.get(url("change", campaign.pk)).content.decode()
    assert "A: spring_sale (en_US) · B: spring_sale (en_US)" in page
    assert 'name="variant-0-template"' not in page


def test_the_test_as_a_whole_is_checked_as_the_launch_checks_it(
    marketer: Client, setup: dict[str, Any]
) -> None:
    short = short_template(setup)
    response = marketer.post(url("add"), ab_data(setup, short, canary_size=50))
    assert response.status_code == 200 and not Campaign.objects.exists()
    assert response.context["form"].errors["ab_test_percent"] == [
        "An A/B test already sends to a share first: turn the canary off, or the test."
    ]


def test_the_preview_shows_a_tracked_link_as_a_link(
    marketer: Client, setup: dict[str, Any], settings: Any
) -> None:
    short = short_template(setup)
    mapping = {"body": {"1": {"click": True}}, "buttons": {"0": {"click": True}}}
    query = {"template": short.pk, "lists": setup["list"].pk, "mapping": json.dumps(mapping)}
    settings.CLICK_BASE_URL = "https://go.example.com/c"
    sample = marketer.get(url("preview"), query).json()["samples"][0]
    assert sample["body"] == "https://go.example.com/c/…, 20% off today only."
    assert sample["buttons"][0]["url"] == "https://go.example.com/c/…"
    settings.CLICK_BASE_URL = ""
    sample = marketer.get(url("preview"), query).json()["samples"][0]
    assert sample["body"] == "[tracked link], 20% off today only."
