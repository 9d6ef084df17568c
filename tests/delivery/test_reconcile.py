"""The reconciler: expired leases become unknown; unknown rows settle by evidence or policy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from campaigns.models import AmbiguousSendPolicy, CampaignStatus
from delivery.campaigns.launch import campaign_start
from delivery.engine.reconcile import reconcile
from delivery.messages import claim_campaign_batch
from delivery.models import Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def campaign_with(n: int, **fields):
    contact_list = make_contact_list()
    for i in range(n):
        make_contact(phone=f"+4420{i:08d}", name=f"R{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list], **fields)
    campaign_start(campaign=campaign)
    return campaign


def age(ids, seconds: int) -> None:
    Message.objects.filter(pk__in=ids).update(
        claimed_at=timezone.now() - timedelta(seconds=seconds)
    )


@override_settings(SEND_LEASE_SECONDS=60, UNKNOWN_SETTLE_SECONDS=300)
def test_an_expired_lease_becomes_unknown_and_a_fresh_one_is_left_alone() -> None:
    campaign = campaign_with(2)
    old, fresh = claim_campaign_batch(campaign_id=campaign.pk, limit=2)
    age([old.id], 61)
    report = reconcile()
    assert report.leases_expired == 1
    assert Message.objects.get(pk=old.id).status == MessageStatus.UNKNOWN
    assert Message.objects.get(pk=fresh.id).status == MessageStatus.SENDING
    assert Message.objects.get(pk=old.id).error_history[-1]["outcome"] == "lease expired"


@override_settings(UNKNOWN_SETTLE_SECONDS=300)
def test_unknown_without_evidence_is_resent_under_the_resend_policy() -> None:
    campaign = campaign_with(1, ambiguous_policy=AmbiguousSendPolicy.RESEND)
    [row] = claim_campaign_batch(campaign_id=campaign.pk, limit=1)
    Message.objects.filter(pk=row.id).update(status=MessageStatus.UNKNOWN)
    age([row.id], 299)
    assert reconcile().resent == 0  # still inside the evidence window
    age([row.id], 301)
    assert reconcile().resent == 1
    message = Message.objects.get(pk=row.id)
    assert message.status == MessageStatus.PENDING
    assert message.claimed_at is None


@override_settings(UNKNOWN_SETTLE_SECONDS=300)
def test_unknown_without_evidence_fails_under_the_at_most_once_policy() -> None:
    campaign = campaign_with(1, ambiguous_policy=AmbiguousSendPolicy.FAIL)
    [row] = claim_campaign_batch(campaign_id=campaign.pk, limit=1)
    Message.objects.filter(pk=row.id).update(status=MessageStatus.UNKNOWN)
    age([row.id], 301)
    assert reconcile().failed == 1
    message = Message.objects.get(pk=row.id)
    assert message.status == MessageStatus.FAILED
    assert message.last_error_title == "No evidence the send reached Meta"


def test_a_campaign_with_nothing_open_completes() -> None:
    campaign = campaign_with(2)
    Message.objects.filter(campaign=campaign).update(status=MessageStatus.SENT)
    assert reconcile().completed_campaigns == [campaign.pk]
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.COMPLETED
    assert campaign.completed_at is not None


def test_a_campaign_with_unknown_rows_does_not_complete() -> None:
    campaign = campaign_with(2)
    Message.objects.filter(campaign=campaign).update(status=MessageStatus.SENT)
    Message.objects.filter(campaign=campaign).filter(
        pk=Message.objects.filter(campaign=campaign).first().pk
    ).update(status=MessageStatus.UNKNOWN, claimed_at=timezone.now())
    assert reconcile().completed_campaigns == []
