"""campaign_progress: counts by status, rate over the last minute, ETA."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.campaigns.progress import campaign_progress
from tests.factories import make_campaign, make_message

pytestmark = pytest.mark.django_db


def test_progress_counts_rate_and_eta() -> None:
    campaign = make_campaign()
    other = make_campaign()
    now = timezone.now()
    for _ in range(6):
        make_message(campaign=campaign, status="pending")
    for _ in range(2):
        make_message(campaign=campaign, status="sending")
    for _ in range(12):
        make_message(campaign=campaign, status="sent", sent_at=now - timedelta(seconds=10))
    for _ in range(3):
        make_message(campaign=campaign, status="delivered", sent_at=now - timedelta(minutes=5))
    make_message(campaign=campaign, status="failed")
    make_message(campaign=campaign, status="unknown")
    make_message(campaign=other, status="pending", sent_at=now)

    with CaptureQueriesContext(connection) as queries:
        progress = campaign_progress(campaign=campaign)
    assert len(queries) == 1

    assert progress.total == 25
    assert progress.counts["pending"] == 6 and progress.counts["sent"] == 12
    assert progress.counts["delivered"] == 3 and progress.counts["read"] == 0
    assert progress.remaining == 9  # pending + sending + unknown
    assert progress.sent_last_minute == 12
    assert progress.rate_per_second == 0.2
    assert progress.eta_seconds == 45.0
    assert progress.eta == progress.measured_at + timedelta(seconds=45)
    data = progress.as_dict()
    assert data["counts"]["failed"] == 1 and data["eta_seconds"] == 45.0


def test_eta_unknown_while_nothing_moves_and_zero_when_done() -> None:
    stalled = make_campaign()
    make_message(campaign=stalled, status="pending")
    assert campaign_progress(campaign=stalled).eta_seconds is None
    assert campaign_progress(campaign=stalled).as_dict()["eta"] is None

    done = make_campaign()
    make_message(campaign=done, status="read", sent_at=timezone.now() - timedelta(hours=1))
    progress = campaign_progress(campaign=done)
    assert (progress.remaining, progress.eta_seconds, progress.rate_per_second) == (0, 0.0, 0.0)


def test_progress_of_a_draft_has_no_messages() -> None:
    progress = campaign_progress(campaign=make_campaign())
    assert progress.total == 0 and progress.status == "draft"
    assert set(progress.counts.values()) == {0}
