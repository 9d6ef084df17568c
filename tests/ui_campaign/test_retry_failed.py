"""Retry failed: only failures another attempt can fix get one, and the campaign picks them up."""

from __future__ import annotations

from datetime import timedelta

import django_rq
import pytest
from django.test import override_settings
from django.utils import timezone

from campaigns.models import CampaignStatus
from campaigns.state import LifecycleError
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.retry import (
    RETRYABLE_CODES,
    campaign_retry_failed,
    campaign_retryable_count,
)
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact, make_message
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_retryable_codes_are_the_engines_own_retries() -> None:
    assert {131000, 131016, 133004, 130429, 131056, 131049} <= set(RETRYABLE_CODES)
    assert not {131026, 131050, 131047, 132000, 132012, 190} & set(RETRYABLE_CODES)


def test_only_retryable_failures_get_a_fresh_attempt() -> None:
    campaign = make_campaign(status=CampaignStatus.COMPLETED, completed_at=timezone.now())
    long_ago = timezone.now() - timedelta(hours=2)

    def failed(code, **fields):
        fields.setdefault("failed_at", long_ago)
        return make_message(
            campaign=campaign, status="failed", last_error_code=code, attempt=3, **fields
        )

    transient = failed(131000, wamid="wamid.old", sent_at=long_ago)
    no_evidence = failed(None, last_error_title="No evidence the send reached Meta")
    capped = failed(131049)
    throttled = failed(130429)
    undeliverable = failed(131026)
    stopped = failed(131050)
    gone = make_contact(opted_out_at=timezone.now())
    opted_out_since = failed(131000, contact=gone, to=gone.phone)
    dead = make_message(campaign=campaign, status="dead", last_error_code=131000)
    sent = make_message(campaign=campaign, status="sent")
    assert campaign_retryable_count(campaign=campaign) == 4

    report = campaign_retry_failed(campaign=campaign, actor="ana")

    assert report.retried == 4 and report.status == CampaignStatus.RUNNING
    for message in (transient, no_evidence, capped, throttled):
        message.refresh_from_db()
        assert (message.status, message.attempt, message.wamid) == ("pending", 0, None)
        assert message.error_history[-1]["outcome"] == "retry requested"
        assert message.error_history[-1]["by"] == "ana"
    for message in (undeliverable, stopped, opted_out_since):
        message.refresh_from_db()
        assert message.status == "failed"
    dead.refresh_from_db()
    sent.refresh_from_db()
    assert (dead.status, sent.status) == ("dead", "sent")
    # The marketing cap: not before 24 h after the failure.
    assert capped.next_attempt_at == long_ago + timedelta(hours=24)
    assert transient.next_attempt_at <= timezone.now()
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING and campaign.completed_at is None
    assert django_rq.get_queue("campaigns").count == 1  # the kick
    assert campaign_retryable_count(campaign=campaign) == 0


def test_a_draft_or_cancelled_campaign_has_nothing_to_retry() -> None:
    for status in (CampaignStatus.DRAFT, CampaignStatus.CANCELLED):
        with pytest.raises(LifecycleError):
            campaign_retry_failed(campaign=make_campaign(status=status))


def test_a_paused_campaign_keeps_retried_rows_until_resumed() -> None:
    campaign = make_campaign(status=CampaignStatus.PAUSED)
    make_message(campaign=campaign, status="failed", last_error_code=131016)
    assert campaign_retry_failed(campaign=campaign).retried == 1
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.PAUSED
    assert django_rq.get_queue("campaigns").count == 0


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_retried_recipients_are_sent_again_and_the_campaign_completes() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=10)
        campaign_start(campaign=campaign)
        work_burst()
        maintenance_tick()
        # Meta accepted three, then reported them failed (service unavailable).
        ids = list(Message.objects.filter(campaign=campaign).values_list("pk", flat=True)[:3])
        Message.objects.filter(pk__in=ids).update(
            status="failed", last_error_code=131016, failed_at=timezone.now()
        )
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED

        assert campaign_retry_failed(campaign=campaign).retried == 3
        work_burst()
        maintenance_tick()

        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED
        assert set(Message.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
            "sent"
        }
        assert sim.stats()["per_number"][number.phone_number_id]["accepted"] == 13
        assert not Message.objects.filter(pk__in=ids, wamid__isnull=True).exists()
