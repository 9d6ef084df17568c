"""The campaign form, its preview, the pre-flight page, launch and the live page."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import django_rq
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, TemplateStatus
from tests.engine_support import work_burst
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_message,
    make_phone_number,
    make_template,
)
from tests.ui_campaign.conftest import MAPPING
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:campaigns_campaign_{name}", args=args)


def form_data(setup: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    data = {
        "name": "Spring sale",
        "phone_number": setup["number"].pk,
        "template": setup["template"].pk,
        "lists": [setup["list"].pk],
        "param_mapping": json.dumps(MAPPING),
        "window_start": "",
        "window_end": "",
        "time_zone": "",
        "time_zone_attribute": "timezone",
        "max_attempts": 5,
        "ambiguous_policy": "resend",
        "canary_size": 0,
        "canary_max_failure_percent": 5,
        "share_weight": 1,
    }
    data.update(overrides)
    return data


def test_the_form_offers_only_approved_templates(marketer: Client, setup) -> None:
    make_template(account=setup["account"], name="not_yet", status=TemplateStatus.PENDING)
    page = marketer.get(url("add")).content.decode()
    assert "spring_sale" in page and "not_yet" not in page
    assert 'id="wb-mapping"' in page and 'id="wb-preview-samples"' in page
    assert f'data-account="{setup["account"].pk}"' in page


def test_saving_goes_to_the_preflight_check(marketer: Client, setup) -> None:
    data = form_data(
        setup,
        window_start="09:00",
        window_end="20:00",
        time_zone="america/sao_paulo",
        canary_size=100,
        canary_max_failure_percent=2.5,
        _preflight="1",
    )
    response = marketer.post(url("add"), data)
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response["Location"] == url("preflight", campaign.pk)
    assert campaign.status == CampaignStatus.DRAFT
    assert campaign.param_mapping == MAPPING
    assert list(campaign.lists.all()) == [setup["list"]]
    assert campaign.time_zone == "America/Sao_Paulo"
    assert str(campaign.window_start) == "09:00:00"
    assert (campaign.canary_size, campaign.canary_max_failure_rate) == (100, 0.025)


def test_a_draft_saves_before_every_param_is_mapped_and_says_what_is_left(
    marketer: Client, setup
) -> None:
    half = json.dumps({"body": {"1": {"field": "name"}}})
    response = marketer.post(url("add"), form_data(setup, param_mapping=half), follow=True)
    campaign = Campaign.objects.get()
    assert campaign.status == CampaignStatus.DRAFT and campaign.param_mapping == json.loads(half)
    assert "still to do before it can launch: body param(s) 2 of template" in (
        response.content.decode()
    )
    preflight = marketer.get(url("preflight", campaign.pk)).content.decode()
    assert "are not mapped" in preflight


def test_a_mapping_that_does_not_fit_is_refused(marketer: Client, setup) -> None:
    bad = json.dumps({"body": {"1": {"field": "name"}, "2": {"value": "X"}, "9": {"value": "Y"}}})
    response = marketer.post(url("add"), form_data(setup, param_mapping=bad))
    assert response.status_code == 200
    assert "has no body param(s) 9" in response.content.decode()
    assert not Campaign.objects.exists()
    response = marketer.post(url("add"), form_data(setup, window_start="09:00"))
    assert "A send window needs both its start and its end." in response.content.decode()


def test_a_draft_opens_in_the_form_and_saves_changes(marketer: Client, setup) -> None:
    campaign = make_campaign(
        phone_number=setup["number"],
        template=setup["template"],
        lists=[setup["list"]],
        param_mapping=MAPPING,
    )
    page = marketer.get(url("change", campaign.pk)).content.decode()
    assert 'id="wb-campaign-form"' in page and "spring_sale" in page
    response = marketer.post(url("change", campaign.pk), form_data(setup, name="Renamed"))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.name == "Renamed"


def test_a_marketer_sets_the_pool_and_the_share_and_a_pool_keeps_to_one_account(
    marketer: Client, setup
) -> None:
    number = setup["number"]
    same_account = make_phone_number(account=number.account)
    other_account = make_phone_number(account=make_account())
    refused = marketer.post(
        url("add"), form_data(setup, pool_numbers=[other_account.pk], share_weight=3)
    )
    assert refused.status_code == 200
    assert "choose numbers of the same account" in refused.content.decode()
    assert not Campaign.objects.exists()

    saved = marketer.post(
        url("add"), form_data(setup, pool_numbers=[same_account.pk], share_weight=3)
    )
    assert saved.status_code == 302
    campaign = Campaign.objects.get()
    assert campaign.share_weight == 3
    assert list(campaign.pool_numbers.all()) == [same_account]


def preview(client: Client, setup, mapping: Any, lists: bool = True) -> dict[str, Any]:
    query = {"template": setup["template"].pk, "mapping": json.dumps(mapping)}
    if lists:
        query["lists"] = setup["list"].pk
    response = client.get(url("preview"), query)
    assert response.status_code == 200
    return response.json()


def test_the_preview_renders_the_message_for_sample_contacts(marketer: Client, setup) -> None:
    data = preview(marketer, setup, MAPPING)
    assert data["error"] is None
    assert [s["key"] for s in data["slots"]] == ["1", "2"]
    assert data["fields"] == ["name", "phone", "coupon"]
    assert [s["body"] for s in data["samples"]] == [
        "Hi Ana, your code is A1.",
        "Hi Bruno, your code is B2.",
        "Hi Carla, your code is C3.",
    ]
    constant = {"body": {"1": {"field": "name"}, "2": {"value": "VIP"}}}
    assert preview(marketer, setup, constant)["samples"][0]["body"] == "Hi Ana, your code is VIP."


def test_an_unfinished_mapping_previews_with_its_placeholders(marketer: Client, setup) -> None:
    data = preview(marketer, setup, {"body": {"1": {"field": "name"}}})
    assert data["samples"][0]["body"] == "Hi Ana, your code is {{2}}."
    assert "not mapped" in data["error"]
    missing_field = preview(marketer, setup, {"body": {"1": {"field": "nick"}, "2": {"value": ""}}})
    assert missing_field["samples"][0]["missing"] == ["nick"]


def test_without_a_list_the_preview_shows_metas_examples(marketer: Client, setup) -> None:
    data = preview(marketer, setup, MAPPING, lists=False)
    assert data["samples"][0]["body"] == "Hi Asha, your code is SPRING10."


def draft(setup) -> Campaign:
    return make_campaign(
        phone_number=setup["number"],
        template=setup["template"],
        lists=[setup["list"]],
        param_mapping=MAPPING,
    )


def test_the_preflight_page_shows_the_report_and_the_launch_form(
    marketer: Client, viewer: Client, setup
) -> None:
    campaign = draft(setup)
    page = marketer.get(url("preflight", campaign.pk)).content.decode()
    assert '<td id="wb-audience">3</td>' in page
    assert 'id="wb-launch"' in page
    page = viewer.get(url("preflight", campaign.pk)).content.decode()
    assert '<td id="wb-audience">3</td>' in page and 'id="wb-launch"' not in page
    assert 'needs the "Can launch campaigns" permission' in page


@pytest.mark.django_db(transaction=True)
def test_launch_now_runs_as_a_background_job(marketer: Client, setup) -> None:
    campaign = draft(setup)
    response = marketer.post(url("launch", campaign.pk), {"when": "now"})
    assert response.status_code == 302 and response["Location"] == url("change", campaign.pk)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DRAFT
    assert campaign.status_reason.startswith("Launch queued by mara")
    assert django_rq.get_queue("maintenance").count == 1
    page = marketer.get(url("change", campaign.pk)).content.decode()
    assert 'id="wb-live"' in page and "Launching" in page

    work_burst("maintenance")

    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING and campaign.status_reason == ""
    assert campaign.messages.count() == 3
    live = marketer.get(url("live", campaign.pk)).json()
    assert (live["status"], live["total"], live["remaining"]) == ("running", 3, 3)


@pytest.mark.django_db(transaction=True)
def test_a_refused_launch_says_why_on_the_preflight_page(marketer: Client, setup) -> None:
    campaign = draft(setup)
    campaign.param_mapping = {"body": {"1": {"field": "name"}, "2": {"field": "nick"}}}
    campaign.save()
    response = marketer.post(url("launch", campaign.pk), {"when": "now"}, follow=True)
    assert "Not launched: 3 contact(s) have no value for mapped field" in (
        response.content.decode()
    )
    assert django_rq.get_queue("maintenance").count == 0


def test_schedule_in_the_campaigns_time_zone(marketer: Client, setup) -> None:
    campaign = draft(setup)
    campaign.time_zone = "America/Sao_Paulo"
    campaign.save()
    marketer.post(url("launch", campaign.pk), {"when": "schedule", "at": "2099-01-02T09:30"})
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.SCHEDULED
    assert campaign.scheduled_at == datetime(
        2099, 1, 2, 9, 30, tzinfo=ZoneInfo("America/Sao_Paulo")
    )


def test_the_live_page_and_its_json(marketer: Client, setup) -> None:
    campaign = draft(setup)
    campaign.status = CampaignStatus.RUNNING
    campaign.save()
    make_message(
        campaign=campaign,
        status="read",
        pricing_category="marketing",
        billable=True,
        conversation_id="conv-1",
    )
    make_message(
        campaign=campaign,
        status="delivered",
        pricing_category="marketing",
        billable=True,
        conversation_id="conv-2",
    )
    make_message(
        campaign=campaign,
        status="failed",
        last_error_code=131026,
        last_error_title="Message undeliverable",
    )
    make_message(campaign=campaign, status="pending")
    for n, text in enumerate(("Thanks!", "STOP")):
        InboundMessage.objects.create(
            wamid=f"in-{n}",
            from_phone="+5511900000001",
            type="text",
            text=text,
            sent_at=timezone.now(),
            campaign=campaign,
            is_opt_out=text == "STOP",
            payload={},
        )
    page = marketer.get(url("change", campaign.pk)).content.decode()
    assert 'id="wb-live"' in page and 'id="wb-live-data"' in page
    assert 'name="_save"' not in page  # launched: read-only below the panel
    assert url("pause", campaign.pk) in page and url("export", campaign.pk) in page

    live = marketer.get(url("live", campaign.pk)).json()
    assert (live["total"], live["done"], live["remaining"], live["percent"]) == (4, 3, 1, 75.0)
    assert live["funnel"] == [
        {"stage": "pending", "count": 1},
        {"stage": "sent", "count": 2},
        {"stage": "delivered", "count": 2},
        {"stage": "read", "count": 1},
    ]
    assert live["failures"] == [
        {"status": "failed", "code": 131026, "title": "Message undeliverable", "count": 1}
    ]
    assert [(c["category"], c["charged"], c["text"]) for c in live["costs"]] == [
        ("marketing", 2, "no rate card loaded")
    ]
    assert live["charged_label"] == "Charged messages"
    assert live["target_per_second"] == 64.0  # 80/s less the 20 % reserve
    assert "<polyline" in live["chart_svg"] and "target 64.0/s" in live["chart_svg"]
    assert (live["replies"], live["opt_outs"], live["retryable"]) == (2, 1, 0)


def test_the_preflight_says_a_refused_launch_sends_nobody_and_a_fallback_fixes_it(
    marketer: Client, setup
) -> None:
    make_contact(phone="+5511900000009", name="Dora", contact_list=setup["list"])  # no coupon
    campaign = draft(setup)
    page = marketer.get(url("preflight", campaign.pk)).content.decode()
    assert "none: the launch is refused as it stands" in page
    assert '<td id="wb-audience-fixed">4</td>' in page
    assert "have no value for mapped field &#x27;coupon&#x27;" in page
    campaign.param_mapping = {
        "body": {"1": {"field": "name"}, "2": {"field": "coupon", "fallback": "WELCOME"}}
    }
    campaign.save()
    page = marketer.get(url("preflight", campaign.pk)).content.decode()
    assert '<td id="wb-audience">4</td>' in page and "refused" not in page
