"""The demo's terminal bar: the real pace from the first seconds, the admin's words, and
a simulator set up so the support pages have failures and dead letters to show."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from delivery.campaigns.progress import CampaignProgress
from whatsblast.management.commands.demo import (
    DEMO_DEAD,
    DEMO_UNDELIVERABLE,
    Command,
    _demo_phone,
    _progress_line,
)


def progress(**counts: int) -> CampaignProgress:
    now = timezone.now()
    full = {"pending": 0, "sent": 0, "delivered": 0, "read": 0, "failed": 0, "dead": 0, **counts}
    remaining = full["pending"]
    return CampaignProgress(
        campaign_id=1,
        name="demo",
        status="running",
        total=sum(full.values()),
        counts=full,
        remaining=remaining,
        sent_last_minute=2_000,
        rate_per_second=round(2_000 / 60, 2),
        eta_seconds=None,
        measured_at=now,
    )


def test_ten_seconds_in_the_bar_shows_the_rate_since_the_start_and_an_honest_eta() -> None:
    p = progress(pending=18_000, sent=1_000, delivered=600, read=400)
    line = _progress_line(p, p.measured_at - timedelta(seconds=10))
    assert "200 msg/s" in line and "ETA 90s" in line
    # The admin's words: sent counts delivered and read ones, delivered counts read ones.
    assert "sent 2000 delivered 1000 read 400 failed 0" in line


def test_the_demo_simulator_fails_a_few_recipients_for_good_and_some_until_dead(
    tmp_path: Path,
) -> None:
    config = json.loads(Command._sim_config(tmp_path, 20_000).read_text())["config"]
    fails = config["fail_recipients"]
    assert {fails[_demo_phone(i)] for i in DEMO_UNDELIVERABLE} == {131026}
    assert {fails[_demo_phone(i)] for i in DEMO_DEAD} == {131000}
    assert _demo_phone(7) == "+5511900000007"  # what "+55 11 900000007" in the file becomes
