"""What the live campaign page shows, as one JSON-ready dict, cached and shared.

The page polls every ``POLL_SECONDS``. Every figure is an aggregate over the campaign's
messages, so a page left open on a ten-million-row campaign, or ten people watching the
same launch, must not repeat them all every two seconds: the answer is kept in Redis and
shared by every viewer, for ``CACHE_SECONDS`` or ``CACHE_COST_FACTOR`` times what it cost
to compute, whichever is longer. A small campaign refreshes at the poll rate; building
the page for a million messages (1.2 to 3 s measured) then costs the database at most a
third of one core however many people watch, and the page refreshes every few seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import redis
from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import AbState, Campaign, CampaignStatus, CanaryState
from campaigns.windows.campaign import campaign_window
from delivery.campaigns.canary import canary_tally
from delivery.campaigns.guard import guard_summary
from delivery.campaigns.launch_queue import launch_queued
from delivery.campaigns.pricing import (
    CHARGED_LABEL,
    campaign_costs,
    cost_total,
    rate_card_currency,
)
from delivery.campaigns.progress import (
    campaign_failures,
    campaign_funnel,
    campaign_progress,
    campaign_send_rate_series,
    held_for_quality_text,
    rate_measured,
    recent_rate,
    series_span,
)
from delivery.campaigns.retry import campaign_retryable_count
from delivery.campaigns.schedule import campaign_share_rate, campaign_window_eta
from webhooks.selectors import campaign_reply_counts
from whatsblast.admin.charts import rate_chart_svg
from whatsblast.core.redis import get_redis
from whatsblast.figures import campaign_figures, figures_as_dicts, percent_of

POLL_SECONDS = 2
CACHE_SECONDS = 1.5
CACHE_COST_FACTOR = 3


def _cache_key(campaign_id: int, version: str = "") -> str:
    return f"wb:campaign-live:{campaign_id}:{version}"


def _version(campaign: Campaign) -> str:
    # Every change of the campaign's own state (a launch, a pause, a refusal) moves
    # updated_at: the cached answer of the state before is never served after it.
    return f"{campaign.updated_at.timestamp():.6f}" if campaign.updated_at else ""


def campaign_live(*, campaign: Campaign, use_cache: bool = True) -> dict[str, Any]:
    """Progress, funnel, failures, rate series and chart, replies, billing, ETA.

    Cached in Redis for a few seconds (many people polling one big campaign cost one build);
    without Redis every poll builds its own answer.
    """
    conn = get_redis()
    if use_cache:
        try:
            cached = conn.get(_cache_key(campaign.pk, _version(campaign)))
        except redis.RedisError:
            cached = None
        if cached is not None:
            return dict(json.loads(cached))
    started = time.monotonic()
    with one_snapshot():
        data = _build(campaign, timezone.now())
    keep_s = max(CACHE_SECONDS, CACHE_COST_FACTOR * (time.monotonic() - started))
    try:
        key = _cache_key(campaign.pk, _version(campaign))
        conn.set(key, json.dumps(data), px=int(keep_s * 1000))
    except redis.RedisError:
        pass  # the next poll builds again
    return data


def campaign_live_forget(*, campaign_id: int) -> None:
    """Drop the cached answer: after a pause or a retry the next poll shows it at once."""
    campaign = Campaign.objects.filter(pk=campaign_id).only("updated_at").first()
    if campaign is None:
        return
    try:
        get_redis().delete(_cache_key(campaign_id, _version(campaign)))
    except redis.RedisError:
        pass  # nothing cached can outlive the outage: a set would have failed too


@contextmanager
def one_snapshot() -> Iterator[None]:
    """Every query inside reads the database as of one moment (REPEATABLE READ), so the
    page's figures agree with each other: read one after another under READ COMMITTED,
    the billable messages counted a few hundred ms after Sent included messages sent in
    between (Sent 976 against 997 billable, the second after a pause). Inside a
    transaction already (a test's), that one's snapshot is used as it is."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Must be the transaction's first statement: it fixes the snapshot at the next.
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _build(campaign: Campaign, now: datetime) -> dict[str, Any]:
    progress = campaign_progress(campaign=campaign)
    target = (
        campaign_share_rate(campaign=campaign)
        if campaign.status in (CampaignStatus.RUNNING, CampaignStatus.PAUSED)
        else None
    )
    # A finished campaign's chart shows its run, up to the moment it finished.
    end = campaign.completed_at if campaign.completed_at and campaign.started_at else now
    window, bucket_s = series_span(started_at=campaign.started_at, now=end)
    series = campaign_send_rate_series(campaign=campaign, now=end, window=window, bucket_s=bucket_s)
    replies = campaign_reply_counts(campaign_ids=[campaign.pk]).get(campaign.pk, {})
    rate, rate_window = recent_rate(
        started_at=progress.rate_since, sent_last_minute=progress.sent_last_minute, now=now
    )
    measured = rate_measured(since=progress.rate_since, now=now)
    done = progress.total - progress.remaining
    status = campaign.status
    if status == CampaignStatus.DRAFT and launch_queued(campaign):
        status = "launching"
    return {
        "campaign_id": campaign.pk,
        "status": status,
        "status_display": _status_display(status),
        "status_reason": campaign.status_reason,
        "measured_at": now.isoformat(),
        "scheduled_at": campaign.scheduled_at.isoformat() if campaign.scheduled_at else None,
        "total": progress.total,
        "done": done,
        "remaining": progress.remaining,
        "percent": percent_of(done, progress.total) or 0.0,
        "counts": progress.counts,
        "held_for_quality_assessment": progress.held_for_quality_assessment,
        "held_for_quality_text": held_for_quality_text(progress.held_for_quality_assessment),
        "funnel": campaign_funnel(counts=progress.counts),
        "figures": figures_as_dicts(
            campaign_figures(campaign_id=campaign.pk, status_counts=progress.counts)
        ),
        "failures": [f.__dict__ for f in campaign_failures(campaign=campaign)],
        "retryable": campaign_retryable_count(campaign=campaign),
        "rate_per_second": rate,
        "rate_window_seconds": rate_window,
        "target_per_second": round(target, 2) if target else None,
        "series_window_seconds": int(window.total_seconds()),
        "series_bucket_seconds": bucket_s,
        "chart_svg": rate_chart_svg(
            series=series,
            target=target,
            window_s=window.total_seconds(),
            end_label="now" if end is now else "end",
        ),
        "replies": replies.get("replies", 0),
        "opt_outs": replies.get("opt_outs", 0),
        **_costs(campaign),
        "eta": _eta(campaign, status, progress.remaining, rate if measured else 0.0, target, now),
        "canary": _canary(campaign),
        "guard": guard_summary(campaign=campaign),
    }


def _costs(campaign: Campaign) -> dict[str, Any]:
    """The cost by category and pricing type, and in all, as every page writes it."""
    lines = campaign_costs(campaign=campaign)
    return {
        "costs": [line.as_dict() for line in lines],
        "cost": cost_total(lines, card_currency=rate_card_currency()).as_dict(),
        "charged_label": CHARGED_LABEL,
    }


def _status_display(status: str) -> str:
    if status == "launching":
        return "Launching"
    return str(CampaignStatus(status).label)


def _eta(
    campaign: Campaign,
    status: str,
    remaining: int,
    rate: float,
    target: float | None,
    now: datetime,
) -> dict[str, Any] | None:
    """When the remaining messages will have gone out, and on what basis.

    Only a completed campaign is done: a cancelled one stopped, a scheduled one has not
    started, a launching one is still creating its messages (none remain because none
    exist yet).
    """
    if status == CampaignStatus.CANCELLED:
        return {"seconds": None, "at": None, "basis": "cancelled"}
    if status == CampaignStatus.SCHEDULED:
        starts = campaign.scheduled_at.isoformat() if campaign.scheduled_at else None
        return {"seconds": None, "at": starts, "basis": "scheduled"}
    if status in ("launching", CampaignStatus.DRAFT):
        return {"seconds": None, "at": None, "basis": "launching"}
    if not remaining:
        if status in (CampaignStatus.COMPLETED, CampaignStatus.RUNNING):
            return {"seconds": 0, "at": now.isoformat(), "basis": "done"}
        return None
    if campaign.status != CampaignStatus.RUNNING:
        return None
    if campaign.canary_state == CanaryState.TESTING:
        return {"seconds": None, "at": None, "basis": "after the canary"}
    if campaign.ab_state in (AbState.TESTING, AbState.WAITING_PICK) and (
        campaign.ab_test_percent < 100
    ):
        # The rest waits for the winner: no rate can say when that is.
        return {"seconds": None, "at": None, "basis": "after the A/B test's winner"}
    if campaign_window(campaign) is not None:
        finishes = campaign_window_eta(campaign=campaign, now=now).finishes_at
        if finishes is None:
            return None
        seconds = (finishes - now).total_seconds()
        return {"seconds": round(seconds), "at": finishes.isoformat(), "basis": "send windows"}
    speed, basis = (rate, "current rate") if rate else (target or 0.0, "target rate")
    if not speed:
        return None
    seconds = remaining / speed
    at = now.timestamp() + seconds
    return {
        "seconds": round(seconds),
        "at": datetime.fromtimestamp(at, tz=now.tzinfo).isoformat(),
        "basis": basis,
    }


def _canary(campaign: Campaign) -> dict[str, Any] | None:
    if not campaign.canary_size:
        return None
    data: dict[str, Any] = {
        "size": campaign.canary_size,
        "max_failure_rate": campaign.canary_max_failure_rate,
        "state": campaign.canary_state,
    }
    if campaign.canary_state == CanaryState.TESTING:
        data["tally"] = canary_tally(campaign_id=campaign.pk).as_dict()
    return data
