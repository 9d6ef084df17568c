"""Canary launches against the simulator: the first N go out, the rest wait for the verdict."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Count
from django.test import override_settings
from django.utils import timezone

from campaigns.models import CampaignStatus, CanaryState
from delivery.campaigns import canary
from delivery.campaigns.canary import HOLD_AT, CanaryTally, canary_judge
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.lifecycle import campaign_resume
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def settle_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # No webhooks reach these tests: sent rows stay `sent`, so judge them without waiting.
    monkeypatch.setattr(canary, "CANARY_SETTLE_SECONDS", 0.0)


def statuses(campaign) -> dict[str, int]:
    rows = Message.objects.filter(campaign=campaign).values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in rows}


def held(campaign) -> int:
    return Message.objects.filter(campaign=campaign, next_attempt_at=HOLD_AT).count()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_passing_canary_releases_everyone_else() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(
            sim, number, recipients=100, canary_size=20, canary_max_failure_rate=0.1
        )
        campaign_start(campaign=campaign)
        campaign.refresh_from_db()
        assert campaign.canary_state == CanaryState.TESTING
        assert held(campaign) == 80

        work_burst()
        assert statuses(campaign) == {"sent": 20, "pending": 80}
        assert sim.stats()["per_number"][number.phone_number_id]["accepted"] == 20

        report = maintenance_tick()
        campaign.refresh_from_db()
        assert report["canaries"] == {"passed": [campaign.pk], "failed": [], "released": 80}
        assert campaign.canary_state == CanaryState.PASSED and held(campaign) == 0

        work_burst()
        maintenance_tick()
        campaign.refresh_from_db()
        assert statuses(campaign) == {"sent": 100}
        assert campaign.status == CampaignStatus.COMPLETED
        assert sim.duplicates() == {}


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_failing_canary_pauses_the_campaign_and_sends_nobody_else() -> None:
    with running_simulator(permanent_fraction=0.5, permanent_code=131026, seed=7) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(
            sim, number, recipients=100, canary_size=20, canary_max_failure_rate=0.1
        )
        campaign_start(campaign=campaign)
        work_burst()
        maintenance_tick()
        campaign.refresh_from_db()

        assert campaign.status == CampaignStatus.PAUSED
        assert campaign.canary_state == CanaryState.FAILED
        assert campaign.status_reason.startswith("Canary failed:")
        assert "131026" in campaign.status_reason and "80 recipients held" in campaign.status_reason
        states = statuses(campaign)
        assert states["pending"] == 80 and held(campaign) == 80
        assert states.get("failed", 0) > 2  # over 10 % of 20
        assert sim.stats()["requests"] == 20

        # More ticks change nothing: the held rows stay held while paused.
        maintenance_tick()
        work_burst()
        assert held(campaign) == 80


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_resuming_after_a_failed_canary_sends_to_the_held_recipients() -> None:
    with running_simulator(permanent_fraction=0.5, seed=3) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=60, canary_size=10)
        campaign_start(campaign=campaign)
        work_burst()
        maintenance_tick()
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.PAUSED

        campaign_resume(campaign=campaign)
        maintenance_tick()  # releases the held rows and kicks the senders
        work_burst()
        maintenance_tick()
        campaign.refresh_from_db()
        assert held(campaign) == 0
        assert set(statuses(campaign)) <= {"sent", "failed"}
        assert sum(statuses(campaign).values()) == 60
        assert campaign.status == CampaignStatus.COMPLETED


def test_an_audience_that_fits_in_the_canary_launches_without_one() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=5, canary_size=5)
        campaign_start(campaign=campaign)
        campaign.refresh_from_db()
        assert campaign.canary_state == CanaryState.NONE and held(campaign) == 0


def tally(*, open: int = 0, sent: int = 0, failed: int = 0) -> CanaryTally:
    return CanaryTally(open, sent, failed, unreported=0, last_unreported_at=None, held=100)


@pytest.mark.django_db
def test_the_verdict_waits_for_delivery_reports_but_fails_as_soon_as_it_cannot_pass() -> None:
    campaign = make_campaign(canary_size=20, canary_max_failure_rate=0.1)
    now = timezone.now()

    def judge(t: CanaryTally) -> str:
        return canary_judge(campaign=campaign, tally=t, now=now, settle_seconds=60).state

    # Still sending: no verdict, unless the failures already exceed 10 % of the canary.
    assert judge(tally(open=15, sent=5, failed=2)) == CanaryState.TESTING
    assert judge(tally(open=15, sent=5, failed=3)) == CanaryState.FAILED
    # All sent, some just now without a report yet: wait for the reports.
    recent = CanaryTally(0, 20, 1, 4, now - timedelta(seconds=5), 100)
    assert judge(recent) == CanaryState.TESTING
    settled = CanaryTally(0, 20, 1, 4, now - timedelta(seconds=61), 100)
    assert judge(settled) == CanaryState.PASSED
    assert judge(tally(sent=20, failed=2)) == CanaryState.PASSED  # exactly 10 %


def test_a_windowed_canary_waits_for_its_window_and_the_rest_for_the_verdict() -> None:
    from datetime import UTC, datetime, time

    from delivery.campaigns.canary import canary_release

    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(
            sim,
            number,
            recipients=30,
            canary_size=10,
            window_start=time(9),
            window_end=time(18),
            time_zone="America/Sao_Paulo",
        )
        night = datetime(2026, 3, 2, 2, 0, tzinfo=UTC)  # 23:00 in Sao Paulo: closed
        campaign_start(campaign=campaign, now=night)
        opening = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # 09:00 local
        due = Message.objects.filter(campaign=campaign).values_list("next_attempt_at", flat=True)
        assert sorted(set(due)) == [opening, HOLD_AT]
        assert list(due).count(opening) == 10

        assert canary_release(campaign_id=campaign.pk) == 20
        assert held(campaign) == 0
