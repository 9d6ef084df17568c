"""``manage.py campaign start|pause|resume|cancel`` drive the lifecycle services."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from campaigns.models import CampaignStatus
from delivery.models import Message
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> str:
    out = StringIO()
    call_command("campaign", *args, stdout=out)
    return out.getvalue().strip()


def test_start_pause_resume_cancel() -> None:
    contact_list = make_contact_list()
    for i in range(3):
        make_contact(phone=f"+4477009{i:05d}", name=f"K{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    summary = json.loads(run("start", str(campaign.pk)))
    assert summary["recipients"] == 3 and summary["status"] == "running"
    assert json.loads(run("start", str(campaign.pk)))["already_started"] is True
    assert run("pause", str(campaign.pk)) == f"{campaign.pk} paused"
    assert run("resume", str(campaign.pk)) == f"{campaign.pk} running"
    assert "3 messages not sent" in run("cancel", str(campaign.pk))
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.CANCELLED
    assert set(Message.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
        "cancelled"
    }


def test_start_with_a_missing_param_is_a_clear_error() -> None:
    campaign = make_campaign(lists=[make_contact_list()], param_mapping={"body": {}})
    with pytest.raises(CommandError, match="not mapped"):
        run("start", str(campaign.pk))


def test_start_at_schedules() -> None:
    contact_list = make_contact_list()
    make_contact(phone="+447700900001", name="S", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    summary = json.loads(run("start", str(campaign.pk), "--at", "2099-01-01T09:00:00+00:00"))
    assert summary["status"] == "scheduled"
    with pytest.raises(CommandError, match="not an ISO date-time"):
        run("start", str(campaign.pk), "--at", "tomorrow")
