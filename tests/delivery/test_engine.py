"""The engine end to end against the simulator over real HTTP, on real Postgres and Redis."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from campaigns.models import CampaignStatus, PhoneNumber
from campaigns.state import campaign_pause
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.lifecycle import campaign_resume
from delivery.engine.reconcile import reconcile
from delivery.models import DeadLetter, Message, MessageStatus
from tests.engine_support import (
    campaign_on,
    max_per_second,
    number_on,
    reset_client,
    running_simulator,
    work_burst,
)

pytestmark = pytest.mark.django_db(transaction=True)


def statuses(campaign) -> dict[str, int]:
    from django.db.models import Count

    rows = Message.objects.filter(campaign=campaign).values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in rows}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=2.0)
def test_a_campaign_completes_with_every_recipient_sent_exactly_once_within_the_rate() -> None:
    with running_simulator(latency_ms=50, jitter_ms=20) as sim:
        number = number_on(sim, rate=100, reserve=0.2)  # campaign share: 80/s
        campaign = campaign_on(sim, number, recipients=400)
        campaign_start(campaign=campaign)
        work_burst()
        campaign.refresh_from_db()
        assert statuses(campaign) == {"sent": 400}
        assert campaign.status == CampaignStatus.COMPLETED
        assert sim.duplicates() == {}
        assert sim.stats()["per_number"][number.phone_number_id]["accepted"] == 400
        histogram = sim.histogram(number.phone_number_id)
        # The campaign log holds every 1.02 s window to the share; a few sends may reach the
        # simulator a little later than granted and fall into the next calendar second.
        assert max_per_second(histogram) <= 80 + 5
        assert sum(histogram.values()) == 400
        # Every row knows its wamid: a status webhook can find it either way.
        assert not Message.objects.filter(campaign=campaign, wamid__isnull=True).exists()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_throttling_pauses_the_number_and_loses_nothing() -> None:
    with running_simulator(latency_ms=10) as sim:
        number = number_on(sim, rate=60, reserve=0.0)
        # Meta grants less than configured: the simulator enforces 30/s on this number.
        sim.add_number(
            phone_number_id=number.phone_number_id, access_token="sim-token", rate=30, burst=5
        )
        campaign = campaign_on(sim, number, recipients=120)
        campaign_start(campaign=campaign)
        from whatsblast.tick import maintenance_tick

        # Bounded by time, not by rounds: a throttled row waits out its backoff, and a round
        # with nothing due takes no time at all.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            work_burst()
            reconcile()
            maintenance_tick()
            if statuses(campaign).get("sent") == 120:
                break
            time.sleep(0.2)
        assert statuses(campaign) == {"sent": 120}
        stats = sim.stats()
        assert stats["requests"] > stats["accepted"] == 120  # some were refused with 130429
        number.refresh_from_db()
        assert number.effective_rate is not None and number.effective_rate < 60
        assert sim.duplicates() == {}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_pair_limit_reschedules_only_its_recipient() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=10)
        unlucky = "+5511900000003"
        sim.configure(fail_recipients={unlucky: 131056})
        campaign_start(campaign=campaign)
        work_burst()
        counts = statuses(campaign)
        assert counts.get("sent") == 9
        message = Message.objects.get(campaign=campaign, to=unlucky)
        assert message.status == MessageStatus.PENDING
        assert message.pair_limit_hits >= 1 and message.attempt == 0


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_5xx_is_retried_with_backoff_then_dead_lettered() -> None:
    from django.utils import timezone

    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=3, max_attempts=3)
        sim.configure(mode="all_5xx")
        campaign_start(campaign=campaign)
        for _ in range(3):
            work_burst()
            # Skip the backoff wait instead of sleeping through it.
            Message.objects.filter(campaign=campaign, status="pending").update(
                next_attempt_at=timezone.now()
            )
            from delivery.engine.dispatch import campaign_kick

            campaign_kick(campaign_id=campaign.pk)
        work_burst()
        assert statuses(campaign) == {"dead": 3}
        letters = DeadLetter.objects.filter(campaign=campaign)
        assert letters.count() == 3
        assert all(len(letter.attempts) == 3 for letter in letters)
        campaign.refresh_from_db()
        reconcile()
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED


@override_settings(
    CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_READ_TIMEOUT=0.5, UNKNOWN_SETTLE_SECONDS=1
)
def test_read_timeouts_end_unknown_and_are_settled_by_evidence_not_resent() -> None:
    reset_client()  # pick up the short read timeout
    with running_simulator(timeout_fraction=1.0, timeout_hold_s=2.0) as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=5)
        campaign_start(campaign=campaign)
        work_burst()
        assert statuses(campaign) == {"unknown": 5}
        # Webhook evidence (a `sent` status carrying our id) arrives for three of them.
        from delivery.messages import MessageUpdate, status_updates_apply

        proven = list(
            Message.objects.filter(campaign=campaign)
            .order_by("id")
            .values_list("id", flat=True)[:3]
        )
        status_updates_apply(
            [MessageUpdate(message_id, "sent", None, *([None] * 10)) for message_id in proven]
        )
        import time

        time.sleep(1.1)
        report = reconcile()
        # The two without evidence follow the campaign's policy (resend by default).
        assert report.resent == 2
        assert Message.objects.filter(pk__in=proven, status="sent").count() == 3
        # Nothing was sent twice blindly: one request per recipient reached the simulator.
        assert sim.stats()["requests"] == 5
    reset_client()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_pause_stops_sending_and_resume_finishes_without_duplicates() -> None:
    with running_simulator(latency_ms=20) as sim:
        number = number_on(sim, rate=40, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=120)
        campaign_start(campaign=campaign)
        campaign_pause(campaign=campaign)
        work_burst()
        assert statuses(campaign).get("sent", 0) < 120
        sent_while_paused = sim.stats()["accepted"]
        work_burst()
        assert sim.stats()["accepted"] == sent_while_paused
        campaign_resume(campaign=campaign)
        work_burst()
        assert statuses(campaign) == {"sent": 120}
        assert sim.duplicates() == {}
        assert sim.stats()["accepted"] == 120


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_revoked_token_pauses_the_campaign_and_releases_its_rows() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=20)
        PhoneNumber.objects.filter(pk=number.pk).update(access_token="revoked")
        campaign_start(campaign=campaign)
        work_burst()
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.PAUSED
        assert "190" in campaign.status_reason
        assert statuses(campaign) == {"pending": 20}
        assert Message.objects.filter(campaign=campaign, attempt=0).count() == 20


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=2.0)
def test_the_messaging_limit_holds_the_campaign_visibly_instead_of_failing_rows() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=200, reserve=0.0, tier="TIER_250")
        campaign = campaign_on(sim, number, recipients=300)
        campaign_start(campaign=campaign)
        work_burst()
        assert statuses(campaign) == {"sent": 250, "pending": 50}
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.RUNNING
        assert campaign.status_reason.startswith("Waiting for the messaging limit (TIER_250)")
        assert sim.stats()["accepted"] == 250
