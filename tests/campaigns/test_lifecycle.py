"""Pause, resume and cancel: the state machine and what happens to the rows."""

from __future__ import annotations

import pytest

from campaigns.models import CampaignStatus
from campaigns.state import LifecycleError, campaign_pause, campaigns_pause_for
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.lifecycle import campaign_cancel, campaign_resume
from delivery.models import Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def running(n: int = 3):
    contact_list = make_contact_list()
    for i in range(n):
        make_contact(phone=f"+3468{i:07d}", name=f"L{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    campaign_start(campaign=campaign)
    return campaign


def test_pause_then_resume() -> None:
    campaign = running()
    campaign_pause(campaign=campaign, reason="lunch")
    assert campaign.status == CampaignStatus.PAUSED and campaign.status_reason == "lunch"
    resumed = campaign_resume(campaign=campaign)
    assert resumed.status == CampaignStatus.RUNNING and resumed.status_reason == ""
    assert Message.objects.filter(campaign=campaign, status=MessageStatus.PENDING).count() == 3


def test_resume_of_a_draft_is_refused() -> None:
    with pytest.raises(LifecycleError, match="cannot be resumed"):
        campaign_resume(campaign=make_campaign())


def test_cancel_marks_remaining_rows_cancelled_but_not_those_in_flight() -> None:
    campaign = running(3)
    first = Message.objects.filter(campaign=campaign).order_by("id").first()
    Message.objects.filter(pk=first.pk).update(status=MessageStatus.SENDING)
    assert campaign_cancel(campaign=campaign) == 2
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.CANCELLED
    assert Message.objects.get(pk=first.pk).status == MessageStatus.SENDING
    with pytest.raises(LifecycleError, match="already cancelled"):
        campaign_cancel(campaign=campaign)


def test_a_broken_template_pauses_every_campaign_using_it() -> None:
    campaign = running(1)
    assert campaigns_pause_for(template=campaign.template, reason="template PAUSED") == 1
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert campaign.status_reason == "template PAUSED"
