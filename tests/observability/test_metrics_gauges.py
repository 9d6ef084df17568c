"""The database and Redis gauges of /metrics, from rows put in place by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
import rq
from django.db import connection
from django.utils import timezone
from rq.serializers import JSONSerializer

from campaigns.models import CampaignStatus
from delivery.engine.ratelimit import TokenBucket
from delivery.models import DeadLetter, Message, MessageKind
from tests.factories import (
    make_account,
    make_campaign,
    make_message,
    make_phone_number,
    make_template,
)
from tests.observability.support import scrape
from webhooks.models import WebhookEvent
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def test_backlog_gauges_count_running_campaigns_and_transactional_rows() -> None:
    number = make_phone_number(phone_number_id="pn-backlog")
    template = make_template(account=number.account)
    running = make_campaign(phone_number=number, template=template, status=CampaignStatus.RUNNING)
    paused = make_campaign(phone_number=number, template=template, status=CampaignStatus.PAUSED)
    for _ in range(3):
        make_message(campaign=running, next_attempt_at=ago(90))
    make_message(campaign=running, next_attempt_at=timezone.now() + timedelta(hours=1))
    make_message(campaign=running, status="sent")
    make_message(campaign=paused, next_attempt_at=ago(900))  # paused: not waiting on us
    Message.objects.create(
        kind=MessageKind.TRANSACTIONAL,
        phone_number=number,
        to="+5511900000001",
        text="Your code is 1234",
        next_attempt_at=ago(12),
    )

    metrics = scrape()

    pending = metrics.value(
        "whatsblast_campaign_pending_messages",
        campaign_id=str(running.pk),
        phone_number_id="pn-backlog",
    )
    assert pending == 4  # three due, one retry scheduled later
    assert not metrics.matching("whatsblast_campaign_pending_messages", campaign_id=str(paused.pk))
    assert metrics.value("whatsblast_messages_pending", traffic="campaign") == 4
    assert metrics.value("whatsblast_messages_pending", traffic="transactional") == 1
    campaign_age = metrics.value("whatsblast_oldest_pending_age_seconds", traffic="campaign")
    assert 89 < campaign_age < 150  # the database clock: this transaction's start
    txn_age = metrics.value("whatsblast_oldest_pending_age_seconds", traffic="transactional")
    assert 11 < txn_age < 70


def test_in_doubt_rows_are_counted_and_stuck_ones_told_apart(settings) -> None:
    settings.SEND_LEASE_SECONDS = 120
    settings.UNKNOWN_SETTLE_SECONDS = 600
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    make_message(campaign=campaign, status="sending", claimed_at=ago(5))
    make_message(campaign=campaign, status="sending", claimed_at=ago(300))  # lease long gone
    make_message(campaign=campaign, status="unknown", claimed_at=ago(30))

    metrics = scrape()

    assert metrics.value("whatsblast_messages_in_doubt", status="sending") == 2
    assert metrics.value("whatsblast_messages_in_doubt", status="unknown") == 1
    assert metrics.value("whatsblast_messages_stuck", status="sending") == 1
    assert metrics.value("whatsblast_messages_stuck", status="unknown") == 0
    oldest = metrics.value("whatsblast_messages_in_doubt_oldest_age_seconds", status="sending")
    assert 299 < oldest < 360


def test_open_dead_letters_per_number() -> None:
    number = make_phone_number(phone_number_id="pn-dlq")
    campaign = make_campaign(phone_number=number)
    for status in ("open", "open", "discarded"):
        message = make_message(campaign=campaign, status="dead")
        DeadLetter.objects.create(
            message=message, campaign=campaign, phone_number=number, status=status
        )

    assert scrape().value("whatsblast_dead_letters_open", phone_number_id="pn-dlq") == 2


def test_webhook_backlog_and_apply_lag() -> None:
    for index, age in enumerate((40, 5)):
        event = WebhookEvent.objects.create(body=b"{}", body_sha256=f"{index:064d}")
        WebhookEvent.objects.filter(pk=event.pk).update(received_at=ago(age))
    WebhookEvent.objects.create(body=b"{}", body_sha256="f" * 64, status="processed")

    metrics = scrape()

    assert metrics.value("whatsblast_webhook_events_pending") == 2
    assert 39 < metrics.value("whatsblast_webhook_apply_lag_seconds") < 100


def test_numbers_report_quality_tier_rates_and_the_adaptive_rate() -> None:
    account = make_account(waba_id="waba-q", messaging_limit_tier="TIER_10K")
    make_phone_number(
        phone_number_id="pn-q",
        account=account,
        display_phone_number="+15550009999",
        rate_per_second=100,
        transactional_reserve=0.25,
        quality_rating="YELLOW",
    )
    unlimited = make_account(waba_id="waba-u", messaging_limit_tier="TIER_UNLIMITED")
    make_phone_number(phone_number_id="pn-u", account=unlimited, quality_rating="GREEN")
    bucket = TokenBucket("pn-q", rate=100, reserve=0.25)
    bucket.set_adaptive_rate(64.0)
    bucket.pause(20)

    metrics = scrape()

    info = metrics.value(
        "whatsblast_number_info",
        phone_number_id="pn-q",
        display_phone_number="+15550009999",
        waba_id="waba-q",
        quality="YELLOW",
        tier="TIER_10K",
    )
    assert info == 1
    assert metrics.value("whatsblast_number_quality_score", phone_number_id="pn-q") == 2
    assert metrics.value("whatsblast_number_quality_score", phone_number_id="pn-u") == 3
    assert metrics.value("whatsblast_number_configured_rate", phone_number_id="pn-q") == 100
    assert metrics.value("whatsblast_number_campaign_rate_target", phone_number_id="pn-q") == 75
    assert metrics.value("whatsblast_number_effective_rate", phone_number_id="pn-q") == 64
    assert metrics.value("whatsblast_number_effective_rate", phone_number_id="pn-u") == 80
    assert 18 < metrics.value("whatsblast_number_pause_remaining_seconds", phone_number_id="pn-q")
    assert metrics.value("whatsblast_number_pause_remaining_seconds", phone_number_id="pn-u") == 0
    limit = metrics.value("whatsblast_account_messaging_limit", waba_id="waba-q", tier="TIER_10K")
    assert limit == 10_000
    unlimited_value = metrics.value(
        "whatsblast_account_messaging_limit", waba_id="waba-u", tier="TIER_UNLIMITED"
    )
    assert unlimited_value == float("inf")


def test_rq_queue_depth_by_state() -> None:
    # Plain RQ queues: django-rq's would wait for a commit this test never makes.
    queue = rq.Queue("transactional", connection=get_redis(), serializer=JSONSerializer)
    for message_id in (1, 2, 3):
        queue.enqueue("whatsblast.jobs.transactional_send_job", message_id)
    rq.Queue("maintenance", connection=get_redis(), serializer=JSONSerializer).enqueue_in(
        timedelta(minutes=5), "whatsblast.jobs.maintenance_tick_job"
    )

    metrics = scrape()

    assert metrics.value("whatsblast_rq_jobs", queue="transactional", state="queued") == 3
    assert metrics.value("whatsblast_rq_jobs", queue="campaigns", state="queued") == 0
    assert metrics.value("whatsblast_rq_jobs", queue="maintenance", state="scheduled") == 1
    assert metrics.value("whatsblast_rq_workers", queue="transactional") == 0


def test_a_database_error_is_reported_and_the_redis_metrics_still_served(monkeypatch) -> None:
    from whatsblast.observability import collector

    def broken():
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    monkeypatch.setattr(collector, "database_snapshot", broken)
    metrics = scrape()
    assert metrics.value("whatsblast_collector_up", source="postgres") == 0
    assert metrics.value("whatsblast_collector_up", source="redis") == 1
    assert "whatsblast_rq_jobs" in metrics.names
    assert "whatsblast_messages_pending" not in metrics.names
