"""Launching and changing a campaign's course need campaigns.launch_campaign; looking needs
the view permission; every action is a POST with a CSRF token."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from delivery.models import Message
from tests.factories import make_campaign, make_message
from tests.ui_campaign.conftest import MAPPING, staff_client

pytestmark = pytest.mark.django_db

ACTIONS = ("launch", "pause", "resume", "cancel", "retry_failed")


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:campaigns_campaign_{name}", args=args)


@pytest.fixture
def campaign(setup) -> Campaign:
    return make_campaign(
        phone_number=setup["number"],
        template=setup["template"],
        lists=[setup["list"]],
        param_mapping=MAPPING,
    )


@pytest.mark.parametrize("action", ACTIONS)
def test_without_the_launch_permission_every_action_is_refused(
    viewer: Client, campaign: Campaign, action: str
) -> None:
    status = CampaignStatus.DRAFT if action == "launch" else CampaignStatus.RUNNING
    if action == "resume":
        status = CampaignStatus.PAUSED
    Campaign.objects.filter(pk=campaign.pk).update(status=status)
    failed = make_message(campaign=campaign, status="failed", last_error_code=131000)

    response = viewer.post(url(action, campaign.pk), {"when": "now"})

    assert response.status_code == 403
    campaign.refresh_from_db()
    assert (campaign.status, campaign.status_reason) == (status, "")
    assert Message.objects.get(pk=failed.pk).status == "failed"


def test_the_launch_form_is_not_offered_without_the_permission(
    viewer: Client, campaign: Campaign
) -> None:
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    page = viewer.get(url("change", campaign.pk)).content.decode()
    assert 'id="wb-live"' in page
    assert url("pause", campaign.pk) not in page and url("cancel", campaign.pk) not in page


def test_pause_resume_and_cancel_with_the_permission(marketer: Client, campaign: Campaign) -> None:
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    pending = make_message(campaign=campaign, status="pending")

    assert marketer.post(url("pause", campaign.pk)).status_code == 302
    campaign.refresh_from_db()
    assert (campaign.status, campaign.status_reason) == ("paused", "paused by mara")
    marketer.post(url("resume", campaign.pk))
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    response = marketer.post(url("cancel", campaign.pk), follow=True)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.CANCELLED
    assert Message.objects.get(pk=pending.pk).status == "cancelled"
    assert "1 unsent message(s) cancelled" in response.content.decode()


def test_an_action_that_does_not_apply_says_so(marketer: Client, campaign: Campaign) -> None:
    response = marketer.post(url("resume", campaign.pk), follow=True)
    assert "cannot be resumed" in response.content.decode()


def test_actions_are_posts(marketer: Client, campaign: Campaign) -> None:
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    for action in ACTIONS:
        assert marketer.get(url(action, campaign.pk)).status_code == 405
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


def test_actions_need_the_csrf_token(django_user_model, campaign: Campaign) -> None:
    user = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    assert client.post(url("pause", campaign.pk)).status_code == 403
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


def test_looking_needs_the_view_permission(django_user_model, campaign: Campaign) -> None:
    stranger = staff_client(django_user_model, "sam")  # staff, no campaign permission
    for name in ("live", "export", "preflight", "change"):
        assert stranger.get(url(name, campaign.pk)).status_code == 403, name
    assert stranger.get(url("preview"), {"template": campaign.template_id}).status_code == 403
    anonymous = Client().get(url("live", campaign.pk))
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]


def test_support_role_sees_but_cannot_launch(django_user_model, campaign: Campaign) -> None:
    from whatsblast.auth.roles import SUPPORT, role_grant, roles_sync

    roles_sync()
    django_user_model.objects.create_user("sue", password="pw")
    role_grant(username="sue", role=SUPPORT)
    client = Client()
    client.force_login(django_user_model.objects.get(username="sue"))
    assert client.get(url("preflight", campaign.pk)).status_code == 200
    assert client.post(url("launch", campaign.pk), {"when": "now"}).status_code == 403


def test_creating_needs_the_add_permission(django_user_model) -> None:
    looker = staff_client(django_user_model, "lou", "view_campaign")
    assert looker.get(url("add")).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_resuming_a_paused_schedule_launches_in_the_background(
    marketer: Client, campaign: Campaign
) -> None:
    import django_rq

    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.PAUSED)
    response = marketer.post(url("resume", campaign.pk), follow=True)
    assert "is launching" in response.content.decode()
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DRAFT and campaign.status_reason.startswith(
        "Launch queued by mara"
    )
    assert campaign.messages.count() == 0  # not inside the request
    assert django_rq.get_queue("maintenance").count == 1
