"""Scheduled campaigns launch when due, through a job; a refused launch pauses visibly."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, Template, TemplateStatus
from delivery.campaigns.launch import campaign_start
from delivery.models import Message
from tests.engine_support import work_burst
from tests.factories import make_campaign, make_contact, make_contact_list
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db(transaction=True)


def scheduled_campaign() -> Campaign:
    contact_list = make_contact_list()
    for i in range(3):
        make_contact(phone=f"+4915900000{i:02d}", name=f"S{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    campaign_start(campaign=campaign, at=timezone.now() + timedelta(hours=1))
    # The hour has passed (and RQ's scheduler lost its job: only the tick is left).
    Campaign.objects.filter(pk=campaign.pk).update(
        scheduled_at=timezone.now() - timedelta(seconds=1)
    )
    return campaign


def test_a_due_schedule_is_launched_by_a_job_queued_from_the_tick() -> None:
    campaign = scheduled_campaign()
    assert maintenance_tick()["schedules_started"] == 1
    assert maintenance_tick()["schedules_started"] == 0  # queued once
    work_burst("maintenance")
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    assert Message.objects.filter(campaign=campaign).count() == 3


def test_a_scheduled_launch_that_can_no_longer_start_pauses_with_the_reason() -> None:
    campaign = scheduled_campaign()
    Template.objects.filter(pk=campaign.template_id).update(status=TemplateStatus.PAUSED)
    maintenance_tick()
    work_burst("maintenance")
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert campaign.status_reason.startswith("scheduled launch refused:")
    assert not Message.objects.filter(campaign=campaign).exists()
