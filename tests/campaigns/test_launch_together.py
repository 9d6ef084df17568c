"""Launching campaigns together: one commit starts them all at one instant, or none starts."""

from __future__ import annotations

import django_rq
import pytest
from django.db.models import Max, Min

from campaigns.models import Campaign, CampaignStatus, TemplateStatus
from delivery.campaigns.launch import LaunchError, campaigns_start_together
from delivery.campaigns.launch_queue import (
    campaigns_launch_together,
    campaigns_launch_together_queued,
)
from delivery.models import Message
from tests.factories import make_campaign, make_contact, make_contact_list, make_phone_number

pytestmark = pytest.mark.django_db(transaction=True)


def regional_campaigns(count: int, recipients: int = 3) -> list[Campaign]:
    """``count`` drafts, each on its own number with its own list."""
    campaigns = []
    for index in range(count):
        contact_list = make_contact_list(name=f"region {index}")
        for i in range(recipients):
            make_contact(phone=f"+49170{index:02d}{i:05d}", name=f"P{i}", contact_list=contact_list)
        campaigns.append(make_campaign(phone_number=make_phone_number(), lists=[contact_list]))
    return campaigns


def test_campaigns_started_together_share_one_start_and_their_senders_are_kicked() -> None:
    campaigns = regional_campaigns(3)

    summaries = campaigns_start_together(campaigns=campaigns)

    assert [s.pending for s in summaries] == [3, 3, 3]
    started = {c.started_at for c in Campaign.objects.filter(pk__in=[c.pk for c in campaigns])}
    assert len(started) == 1 and None not in started
    assert set(Campaign.objects.values_list("status", flat=True)) == {CampaignStatus.RUNNING}
    # Every row of every campaign is due at the same instant: the one commit's now().
    due = Message.objects.aggregate(first=Min("next_attempt_at"), last=Max("next_attempt_at"))
    assert Message.objects.count() == 9 and due["first"] == due["last"]
    # Each number's sender was asked for once the rows were committed.
    assert django_rq.get_queue("campaigns").count == 3


def test_one_campaign_that_cannot_start_keeps_the_others_from_starting() -> None:
    campaigns = regional_campaigns(3)
    refused = campaigns[1]
    refused.template.status = TemplateStatus.PAUSED
    refused.template.save()

    with pytest.raises(LaunchError, match=refused.name):
        campaigns_start_together(campaigns=campaigns)

    assert Message.objects.count() == 0
    assert set(Campaign.objects.values_list("status", flat=True)) == {CampaignStatus.DRAFT}
    assert django_rq.get_queue("campaigns").count == 0


def test_a_queued_group_is_one_job_that_starts_every_draft_of_it() -> None:
    campaigns = regional_campaigns(2)

    assert campaigns_launch_together(campaigns=campaigns, actor="mara") == 2

    queue = django_rq.get_queue("maintenance")
    assert queue.count == 1
    job = queue.jobs[0]
    assert job.func_name.endswith("campaigns_launch_together_job")
    assert list(job.args) == [[c.pk for c in campaigns]]
    reasons = set(Campaign.objects.values_list("status_reason", flat=True))
    assert len(reasons) == 1 and reasons.pop().startswith("Launch queued by mara")

    result = campaigns_launch_together_queued(campaign_ids=list(job.args[0]))

    assert result["started"] == 2
    assert set(Campaign.objects.values_list("status", flat=True)) == {CampaignStatus.RUNNING}
    assert Message.objects.count() == 6


def test_a_group_refused_when_its_job_runs_says_why_on_every_campaign() -> None:
    campaigns = regional_campaigns(2)
    campaigns_launch_together(campaigns=campaigns)
    broken = campaigns[0]
    broken.template.status = TemplateStatus.REJECTED
    broken.template.save()

    result = campaigns_launch_together_queued(campaign_ids=[c.pk for c in campaigns])

    assert result["started"] == 0 and broken.name in result["reason"]
    for campaign in Campaign.objects.all():
        assert campaign.status == CampaignStatus.DRAFT
        assert campaign.status_reason.startswith(f"Launch refused: {broken.name}")
    assert Message.objects.count() == 0


@pytest.mark.parametrize("problem", ["one campaign", "not a draft", "cannot start"])
def test_a_group_that_cannot_launch_is_refused_before_anything_is_queued(problem: str) -> None:
    campaigns = regional_campaigns(1 if problem == "one campaign" else 2)
    if problem == "not a draft":
        Campaign.objects.filter(pk=campaigns[1].pk).update(status=CampaignStatus.RUNNING)
        campaigns[1].refresh_from_db()
    if problem == "cannot start":
        campaigns[1].template.status = TemplateStatus.PAUSED
        campaigns[1].template.save()

    with pytest.raises(LaunchError):
        campaigns_launch_together(campaigns=campaigns)

    assert django_rq.get_queue("maintenance").count == 0
    assert all(c.status_reason == "" for c in Campaign.objects.filter(status="draft"))
