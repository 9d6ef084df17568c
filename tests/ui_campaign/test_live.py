"""The live page's figures: rate series, chart, ETA basis, and the shared short cache."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from campaigns.models import CampaignStatus
from delivery.campaigns.progress import campaign_send_rate_series, series_span
from tests.factories import make_campaign, make_message
from whatsblast.admin.campaign_live import campaign_live, campaign_live_forget
from whatsblast.admin.charts import rate_chart_svg

pytestmark = pytest.mark.django_db


def test_the_chart_spans_the_run_of_a_young_campaign_and_the_last_15_minutes_after() -> None:
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert series_span(started_at=now - timedelta(seconds=10), now=now) == (
        timedelta(minutes=1),
        1,
    )
    assert series_span(started_at=now - timedelta(minutes=5), now=now) == (
        timedelta(minutes=5),
        5,
    )
    assert series_span(started_at=now - timedelta(hours=3), now=now) == (
        timedelta(minutes=15),
        10,
    )
    assert series_span(started_at=None, now=now) == (timedelta(minutes=15), 10)


def test_the_series_counts_sends_per_bucket_with_zeros_between() -> None:
    campaign = make_campaign()
    now = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
    for seconds_ago in (1, 2, 3, 4, 25):  # four in the last bucket, one 25 s before
        make_message(campaign=campaign, status="sent", sent_at=now - timedelta(seconds=seconds_ago))
    make_message(campaign=campaign, status="pending")
    series = campaign_send_rate_series(
        campaign=campaign, now=now, window=timedelta(minutes=1), bucket_s=10
    )
    assert len(series) == 7  # 11:59:00 .. 12:00:00
    rates = {at.strftime("%H:%M:%S"): rate for at, rate in series}
    assert rates["11:59:50"] == 0.4 and rates["11:59:30"] == 0.1
    assert sum(rates.values()) == pytest.approx(0.5)


def test_the_chart_draws_the_rate_and_the_target() -> None:
    start = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    series = [(start + timedelta(seconds=i), float(i)) for i in range(61)]
    svg = rate_chart_svg(series=series, target=64.0, window_s=60)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count(",") >= 61 and "target 64.0/s" in svg and ">100/s<" in svg
    assert ">-60 s<" in svg and ">now<" in svg
    assert "wb-target" not in rate_chart_svg(series=series, target=None, window_s=60)


def test_eta_at_the_recent_rate_and_done_when_nothing_remains() -> None:
    campaign = make_campaign(
        status=CampaignStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=20)
    )
    for _ in range(40):
        make_message(campaign=campaign, status="sent", sent_at=timezone.now())
    for _ in range(10):
        make_message(campaign=campaign, status="pending")
    live = campaign_live(campaign=campaign, use_cache=False)
    # 40 sent in the 20 s since the start: 2/s, not 40 over a minute.
    assert live["rate_per_second"] == pytest.approx(2.0, rel=0.05)
    assert live["eta"]["basis"] == "current rate"
    assert live["eta"]["seconds"] == pytest.approx(5, abs=1)

    done = make_campaign(status=CampaignStatus.COMPLETED)
    make_message(campaign=done, status="delivered")
    assert campaign_live(campaign=done, use_cache=False)["eta"]["basis"] == "done"


def test_a_running_campaign_with_nothing_sent_yet_estimates_at_the_target() -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING, started_at=timezone.now())
    for _ in range(128):
        make_message(campaign=campaign, status="pending")
    live = campaign_live(campaign=campaign, use_cache=False)
    assert live["eta"] == {**live["eta"], "basis": "target rate", "seconds": 2}  # 128 at 64/s


def test_viewers_share_one_answer_until_it_is_forgotten() -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING, started_at=timezone.now())
    make_message(campaign=campaign, status="pending")
    assert campaign_live(campaign=campaign)["total"] == 1
    make_message(campaign=campaign, status="pending")
    assert campaign_live(campaign=campaign)["total"] == 1  # cached for the poll interval
    campaign_live_forget(campaign_id=campaign.pk)
    assert campaign_live(campaign=campaign)["total"] == 2
