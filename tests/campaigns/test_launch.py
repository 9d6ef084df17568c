"""Launch: validation before any row exists, then one Message per recipient, once."""

from __future__ import annotations

import pytest

from campaigns.models import CampaignStatus, TemplateCategory, TemplateStatus
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.models import Message, MessageStatus
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)

pytestmark = pytest.mark.django_db(transaction=True)


def audience(n: int, **fields):
    contact_list = make_contact_list()
    for i in range(n):
        make_contact(phone=f"+4917{i:08d}", name=f"P{i}", contact_list=contact_list, **fields)
    return contact_list


def test_launch_creates_one_pending_row_per_recipient_with_rendered_params() -> None:
    contact_list = audience(5)
    campaign = make_campaign(lists=[contact_list])
    summary = campaign_start(campaign=campaign)
    assert summary.recipients == 5 and summary.pending == 5
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    first = Message.objects.get(campaign=campaign, to="+491700000000")
    assert first.params == {"body": ["P0"]}
    assert first.status == MessageStatus.PENDING


def test_contacts_in_two_lists_get_one_message() -> None:
    first, second = audience(3), make_contact_list()
    make_contact(phone="+4916000000001", contact_list=second, name="X")
    for contact in first.contacts.all():
        second.contacts.add(contact)
    campaign = make_campaign(lists=[first, second])
    assert campaign_start(campaign=campaign).recipients == 4


def test_opted_out_contacts_are_skipped_with_a_reason() -> None:
    from django.utils import timezone

    contact_list = audience(2)
    make_contact(
        phone="+4915500000009", name="Gone", contact_list=contact_list, opted_out_at=timezone.now()
    )
    summary = campaign_start(campaign=make_campaign(lists=[contact_list]))
    assert summary.skipped == 1
    assert Message.objects.get(to="+4915500000009").skip_reason == "opted out"


def test_marketing_templates_skip_us_numbers() -> None:
    contact_list = audience(1)
    make_contact(phone="+12025550123", name="Sam", contact_list=contact_list)
    number = make_phone_number()
    template = make_template(account=number.account, category=TemplateCategory.MARKETING)
    summary = campaign_start(
        campaign=make_campaign(phone_number=number, template=template, lists=[contact_list])
    )
    assert summary.skipped == 1 and summary.pending == 1


def test_a_missing_field_stops_the_launch_before_any_row() -> None:
    contact_list = audience(3, attributes={"city": "Rome"})
    make_contact(phone="+4915100000001", name="NoCity", contact_list=contact_list)
    number = make_phone_number()
    template = make_template(account=number.account, body_text="{{1}} in {{2}}", body_param_count=2)
    campaign = make_campaign(
        phone_number=number,
        template=template,
        lists=[contact_list],
        param_mapping={"body": {"1": {"field": "name"}, "2": {"field": "city"}}},
    )
    with pytest.raises(LaunchError, match="1 contact.s. have no value for mapped field 'city'"):
        campaign_start(campaign=campaign)
    assert not Message.objects.filter(campaign=campaign).exists()
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DRAFT


def test_a_bad_param_mapping_stops_the_launch() -> None:
    campaign = make_campaign(lists=[audience(1)], param_mapping={"body": {"9": {"value": "x"}}})
    with pytest.raises(LaunchError, match="no body param"):
        campaign_start(campaign=campaign)


def test_a_template_that_is_not_approved_cannot_launch() -> None:
    number = make_phone_number()
    template = make_template(account=number.account, status=TemplateStatus.PAUSED)
    campaign = make_campaign(phone_number=number, template=template, lists=[audience(1)])
    with pytest.raises(LaunchError, match="only APPROVED"):
        campaign_start(campaign=campaign)


def test_starting_twice_is_harmless() -> None:
    campaign = make_campaign(lists=[audience(4)])
    campaign_start(campaign=campaign)
    again = campaign_start(campaign=campaign)
    assert again.already_started
    assert Message.objects.filter(campaign=campaign).count() == 4


def test_scheduled_launch_waits_for_its_time() -> None:
    from datetime import timedelta

    from django.utils import timezone

    campaign = make_campaign(lists=[audience(2)])
    summary = campaign_start(campaign=campaign, at=timezone.now() + timedelta(hours=1))
    assert summary.status == CampaignStatus.SCHEDULED
    assert summary.recipients == 0
