"""Template, number, capability and account callbacks."""

from __future__ import annotations

from typing import Any

import pytest

from campaigns.models import Campaign
from tests.factories import make_account, make_campaign, make_phone_number, make_template
from tests.webhooks.support import fixture_json, store_and_apply
from webhooks.models import AsyncError, WebhookEvent

pytestmark = pytest.mark.django_db

WABA = "102290129340398"


def change_value(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["entry"][0]["changes"][0]["value"]


def test_a_paused_template_is_matched_across_en_us_spellings_and_pauses_its_campaigns() -> None:
    account = make_account(waba_id=WABA)
    number = make_phone_number(account=account)
    template = make_template(account=account, name="order_confirmation", language="en_US")
    other = make_template(account=account, name="order_confirmation", language="pt_BR")
    running = make_campaign(phone_number=number, template=template, status="running")
    draft = make_campaign(phone_number=number, template=template, status="draft")
    unaffected = make_campaign(phone_number=number, template=other, status="running")
    report = store_and_apply(fixture_json("template_status_update"))
    template.refresh_from_db()
    assert template.status == "PAUSED"
    assert "FIRST_PAUSE" in template.status_reason
    assert template.meta_template_id == "1689556908129832"
    assert report.templates_updated == 1 and report.campaigns_paused == 1
    assert Campaign.objects.get(pk=running.pk).status == "paused"
    assert "order_confirmation" in Campaign.objects.get(pk=running.pk).status_reason
    assert Campaign.objects.get(pk=draft.pk).status == "draft"
    assert Campaign.objects.get(pk=unaffected.pk).status == "running"


def test_a_template_is_matched_by_its_meta_id_when_known() -> None:
    account = make_account(waba_id="another-waba")
    template = make_template(account=account, name="renamed", meta_template_id="1689556908129832")
    payload = fixture_json("template_status_update")
    change_value(payload)["event"] = "APPROVED"
    template.status = "PAUSED"
    template.save()
    store_and_apply(payload)
    template.refresh_from_db()
    assert template.status == "APPROVED"


@pytest.mark.parametrize(
    ("event", "pauses"),
    [("DISABLED", True), ("REJECTED", True), ("APPROVED", False), ("FLAGGED", False)],
)
def test_template_events_that_stop_a_template_pause_its_campaigns(event: str, pauses: bool) -> None:
    account = make_account(waba_id=WABA)
    template = make_template(account=account, name="order_confirmation", language="en_US")
    campaign = make_campaign(
        phone_number=make_phone_number(account=account), template=template, status="running"
    )
    payload = fixture_json("template_status_update")
    change_value(payload)["event"] = event
    store_and_apply(payload)
    campaign.refresh_from_db()
    assert (campaign.status == "paused") is pauses


def test_an_unknown_template_event_is_stored_and_ignored() -> None:
    account = make_account(waba_id=WABA)
    template = make_template(account=account, name="order_confirmation", language="en_US")
    payload = fixture_json("template_status_update")
    change_value(payload)["event"] = "SOMETHING_NEW"
    store_and_apply(payload)
    template.refresh_from_db()
    assert template.status == "APPROVED"
    assert WebhookEvent.objects.get().status == "processed"


def test_a_throughput_upgrade_raises_the_numbers_rate_and_the_portfolio_tier() -> None:
    account = make_account(waba_id=WABA, messaging_limit_tier="TIER_10K")
    number = make_phone_number(account=account, display_phone_number="+1 555-078-3881")
    report = store_and_apply(fixture_json("phone_number_quality_update"))
    number.refresh_from_db()
    account.refresh_from_db()
    assert report.account_changes == 1
    assert number.rate_per_second == 1000
    assert account.messaging_limit_tier == "TIER_UNLIMITED"


def test_a_legacy_flagged_quality_update_marks_the_number_red() -> None:
    account = make_account(waba_id=WABA)
    number = make_phone_number(account=account, display_phone_number="+15550783881")
    payload = fixture_json("phone_number_quality_update")
    change_value(payload).update(event="FLAGGED", current_limit="TIER_1K")
    del change_value(payload)["max_daily_conversations_per_business"]
    store_and_apply(payload)
    number.refresh_from_db()
    account.refresh_from_db()
    assert number.quality_rating == "RED"
    assert number.rate_per_second == 80
    assert account.messaging_limit_tier == "TIER_1K"


def test_a_business_capability_update_sets_the_messaging_limit() -> None:
    account = make_account(waba_id=WABA)
    store_and_apply(fixture_json("business_capability_update"))
    account.refresh_from_db()
    assert account.messaging_limit_tier == "TIER_10K"


def test_an_unlimited_capability_is_minus_one() -> None:
    account = make_account(waba_id=WABA)
    payload = fixture_json("business_capability_update")
    change_value(payload)["max_daily_conversations_per_business"] = -1
    store_and_apply(payload)
    account.refresh_from_db()
    assert account.messaging_limit_tier == "TIER_UNLIMITED"


def test_an_account_restriction_pauses_every_campaign_on_the_account() -> None:
    account = make_account(waba_id=WABA)
    template = make_template(account=account)
    a = make_campaign(
        phone_number=make_phone_number(account=account), template=template, status="running"
    )
    b = make_campaign(
        phone_number=make_phone_number(account=account), template=template, status="scheduled"
    )
    elsewhere = make_campaign(status="running")
    report = store_and_apply(fixture_json("account_update"))
    assert report.campaigns_paused == 2
    for campaign in (a, b):
        campaign.refresh_from_db()
        assert campaign.status == "paused"
        assert "RESTRICTED_BIZ_INITIATED_MESSAGING" in campaign.status_reason
    elsewhere.refresh_from_db()
    assert elsewhere.status == "running"


@pytest.mark.parametrize(
    ("value", "pauses"),
    [
        ({"event": "ACCOUNT_VIOLATION", "violation_info": {"violation_type": "SCAM"}}, True),
        ({"event": "DISABLED_UPDATE", "ban_info": {"waba_ban_state": "DISABLE"}}, True),
        ({"event": "DISABLED_UPDATE", "ban_info": {"waba_ban_state": "REINSTATE"}}, False),
        (
            {
                "event": "ACCOUNT_RESTRICTION",
                "restriction_info": [
                    {"restriction_type": "RESTRICTED_ADD_PHONE_NUMBER_ACTION", "expiration": 1}
                ],
            },
            False,
        ),
        ({"event": "PARTNER_ADDED"}, False),
        ({"event": "A_FUTURE_EVENT", "whatever": [1]}, False),
    ],
)
def test_account_events_pause_only_when_sending_is_stopped(
    value: dict[str, Any], pauses: bool
) -> None:
    account = make_account(waba_id=WABA)
    campaign = make_campaign(phone_number=make_phone_number(account=account), status="running")
    payload = fixture_json("account_update")
    payload["entry"][0]["changes"][0]["value"] = value
    store_and_apply(payload)
    campaign.refresh_from_db()
    assert (campaign.status == "paused") is pauses
    assert WebhookEvent.objects.get().status == "processed"


def test_callbacks_for_an_unknown_account_are_ignored() -> None:
    make_account(waba_id="someone-else")
    report = store_and_apply(fixture_json("account_update"))
    assert report.campaigns_paused == 0
    assert WebhookEvent.objects.get().status == "processed"


def test_async_errors_are_stored_and_logged(caplog: Any) -> None:
    report = store_and_apply(fixture_json("async_errors"))
    error = AsyncError.objects.get()
    assert report.async_errors == 1
    assert (error.code, error.title, error.phone_number_id) == (
        130429,
        "Rate limit hit",
        "106540352242922",
    )
    assert error.details.startswith("Message failed to send")
    assert error.event == WebhookEvent.objects.get()
    assert any("130429" in r.getMessage() for r in caplog.records)
