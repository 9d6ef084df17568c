"""The engine's Prometheus exporter: Redis counters and database gauges, read at scrape time.

Nothing is held in this process: every scrape reads the counters the workers wrote to
Redis (``delivery.metrics``, ``webhooks.metrics``, ``delivery.engagement.clicks``), the RQ
queues, each number's bucket state, and the PostgreSQL aggregates of ``queries``. Any web
process on any host therefore answers the same, and a restart loses nothing. A source that
fails is reported by ``whatsblast_collector_up{source=...} 0`` and its metrics are left out
of that scrape.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import redis
import rq
from django.conf import settings
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from campaigns.models import TIER_LIMITS
from delivery import metrics as send_metrics
from delivery.engagement.clicks import CLICK_OUTCOMES, CLICKS_KEY
from delivery.engine.ratelimit import TokenBucket
from webhooks import metrics as webhook_metrics
from whatsblast.core.redis import get_redis
from whatsblast.observability.queries import (
    DatabaseSnapshot,
    EventsSnapshot,
    JourneysSnapshot,
    database_snapshot,
    events_snapshot,
    journeys_snapshot,
)
from whatsblast.observability.readiness import describe_error, workers_alive

logger = logging.getLogger(__name__)

QUALITY_SCORES = {"GREEN": 3, "YELLOW": 2, "RED": 1, "UNKNOWN": 0}
JOB_STATES = ("queued", "started", "scheduled", "deferred", "failed")
IN_DOUBT_STATUSES = ("sending", "unknown")
TRAFFIC = ("campaign", "transactional")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _hash(raw: dict[Any, Any]) -> dict[str, float]:
    return {_text(k): float(v) for k, v in raw.items()}


class EngineCollector:
    """A prometheus_client custom collector; register it once per registry."""

    def describe(self) -> list[Metric]:
        # Nothing to declare up front: registering must not run a scrape.
        return []

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        up = GaugeMetricFamily(
            "whatsblast_collector_up", "1 when the source answered this scrape", labels=["source"]
        )
        snapshot: DatabaseSnapshot | None = None
        try:
            snapshot = database_snapshot()
        except Exception as exc:
            logger.warning("metrics: database aggregates failed: %s", describe_error(exc))
        up.add_metric(["postgres"], 1 if snapshot else 0)
        if snapshot is not None:
            yield from database_metrics(snapshot)
        if snapshot is not None:
            # PostgreSQL answered: the events' queries run apart, so a subscription far
            # behind can fail only its own gauges (source "events").
            events: EventsSnapshot | None = None
            try:
                events = events_snapshot()
            except Exception as exc:
                logger.warning("metrics: event gauges failed: %s", describe_error(exc))
            up.add_metric(["events"], 0 if events is None else 1)
            if events is not None:
                yield from events_metrics(events)
            journeys: JourneysSnapshot | None = None
            try:
                journeys = journeys_snapshot()
            except Exception as exc:
                logger.warning("metrics: journey gauges failed: %s", describe_error(exc))
            up.add_metric(["journeys"], 0 if journeys is None else 1)
            if journeys is not None:
                yield from journeys_metrics(journeys)
        try:
            families = list(redis_metrics(get_redis(), snapshot))
        except (redis.RedisError, OSError) as exc:
            logger.warning("metrics: Redis read failed: %s", describe_error(exc))
            families = []
        up.add_metric(["redis"], 1 if families else 0)
        yield from families
        yield up
        yield GaugeMetricFamily(
            "whatsblast_collector_duration_seconds",
            "Time this scrape spent reading Redis and PostgreSQL",
            value=time.monotonic() - started,
        )


def database_metrics(snap: DatabaseSnapshot) -> Iterator[Metric]:
    pending = GaugeMetricFamily(
        "whatsblast_campaign_pending_messages",
        "Pending messages of each running campaign (due now or scheduled for a retry)",
        labels=["campaign_id", "phone_number_id"],
    )
    for backlog in snap.campaigns:
        pending.add_metric([str(backlog.campaign_id), backlog.phone_number_id], backlog.pending)
    yield pending
    by_class = GaugeMetricFamily(
        "whatsblast_messages_pending",
        "Pending messages by traffic class (campaigns: running ones only)",
        labels=["traffic"],
    )
    by_class.add_metric(["campaign"], sum(b.pending for b in snap.campaigns))
    by_class.add_metric(["transactional"], snap.transactional_pending)
    yield by_class
    oldest = GaugeMetricFamily(
        "whatsblast_oldest_pending_age_seconds",
        "How long the oldest due pending message has waited since it became due (0: none)",
        labels=["traffic"],
    )
    campaign_ages = [b.oldest_due_age_s for b in snap.campaigns if b.oldest_due_age_s is not None]
    oldest.add_metric(["campaign"], max(campaign_ages, default=0.0))
    oldest.add_metric(["transactional"], snap.transactional_oldest_due_age_s or 0.0)
    yield oldest
    yield from _in_doubt_metrics(snap)
    dead = GaugeMetricFamily(
        "whatsblast_dead_letters_open",
        "Dead letters waiting for support to requeue or discard",
        labels=["phone_number_id"],
    )
    for pnid, count in sorted(snap.dead_letters_open.items()):
        dead.add_metric([pnid], count)
    yield dead
    yield GaugeMetricFamily(
        "whatsblast_webhook_events_pending",
        "Stored callback events not applied yet",
        value=snap.webhook_events_pending,
    )
    yield GaugeMetricFamily(
        "whatsblast_webhook_apply_lag_seconds",
        "Age of the oldest stored callback event not applied yet (0: none)",
        value=snap.webhook_oldest_pending_age_s,
    )
    yield GaugeMetricFamily(
        "whatsblast_webhook_unmatched_waiting",
        "Status callbacks that matched no message yet and are still retried",
        value=snap.webhook_unmatched_waiting,
    )
    yield from _number_metrics(snap)


def events_metrics(snap: EventsSnapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "whatsblast_event_subscriptions_paused",
        "Event subscriptions paused (by hand, or after failing for EVENTS_PAUSE_AFTER_S)",
        value=snap.paused,
    )
    backlog = GaugeMetricFamily(
        "whatsblast_events_backlog",
        "Events waiting for each subscription (after its cursor, of its types)",
        labels=["subscription", "subscription_id"],
    )
    for row in snap.subscriptions:
        backlog.add_metric([row.name, str(row.subscription_id)], row.backlog)
    yield backlog
    yield GaugeMetricFamily(
        "whatsblast_events_oldest_waiting_seconds",
        "Age of the oldest event an active subscription has not taken yet, or not routed "
        "yet (0: none)",
        value=snap.oldest_waiting_s,
    )


def journeys_metrics(snap: JourneysSnapshot) -> Iterator[Metric]:
    active = GaugeMetricFamily(
        "whatsblast_journey_instances", "People in each live journey", labels=["journey"]
    )
    due = GaugeMetricFamily(
        "whatsblast_journey_due",
        "Steps of each live journey due and not fired yet (the sweep takes them within "
        "about a second)",
        labels=["journey"],
    )
    for row in snap.journeys:
        active.add_metric([row.name], row.active)
        due.add_metric([row.name], row.due)
    yield active
    yield due
    yield GaugeMetricFamily(
        "whatsblast_journey_due_oldest_seconds",
        "How long the oldest due step of any live journey has waited to fire (0: none)",
        value=snap.oldest_due_s,
    )
    yield GaugeMetricFamily(
        "whatsblast_events_in_unrouted",
        "Events in through the API (and replies) not applied to the journeys yet",
        value=snap.events_unrouted,
    )
    yield GaugeMetricFamily(
        "whatsblast_events_in_oldest_unrouted_seconds",
        "Age of the oldest event in not applied to the journeys yet (0: none)",
        value=max(snap.events_oldest_unrouted_s or 0.0, 0.0),
    )


def _in_doubt_metrics(snap: DatabaseSnapshot) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        "whatsblast_messages_in_doubt",
        "Messages in sending (claimed) or unknown (ambiguous send being reconciled)",
        labels=["status"],
    )
    stuck = GaugeMetricFamily(
        "whatsblast_messages_stuck",
        "In-doubt messages past the point the reconciler should have moved them "
        "(sending: past SEND_LEASE_SECONDS; unknown: past UNKNOWN_SETTLE_SECONDS)",
        labels=["status"],
    )
    age = GaugeMetricFamily(
        "whatsblast_messages_in_doubt_oldest_age_seconds",
        "Age of the oldest claim among in-doubt messages (0: none)",
        labels=["status"],
    )
    for status in IN_DOUBT_STATUSES:
        row = snap.in_doubt.get(status)
        count.add_metric([status], row.count if row else 0)
        stuck.add_metric([status], row.stuck if row else 0)
        age.add_metric([status], row.oldest_age_s if row else 0.0)
    yield from (count, stuck, age)


def _number_metrics(snap: DatabaseSnapshot) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "whatsblast_number_info",
        "Each business number with its quality rating and its portfolio's messaging tier",
        labels=["phone_number_id", "display_phone_number", "waba_id", "quality", "tier"],
    )
    quality = GaugeMetricFamily(
        "whatsblast_number_quality_score",
        "Quality rating as a number: GREEN 3, YELLOW 2, RED 1, UNKNOWN 0",
        labels=["phone_number_id"],
    )
    configured = GaugeMetricFamily(
        "whatsblast_number_configured_rate",
        "The number's configured throughput (msg/s)",
        labels=["phone_number_id"],
    )
    target = GaugeMetricFamily(
        "whatsblast_number_campaign_rate_target",
        "The campaign share of the number's rate (msg/s): rate x (1 - transactional reserve)",
        labels=["phone_number_id"],
    )
    limits = GaugeMetricFamily(
        "whatsblast_account_messaging_limit",
        "Unique users the portfolio may message in 24 h (+Inf: unlimited)",
        labels=["waba_id", "tier"],
    )
    seen_accounts: set[str] = set()
    for n in snap.numbers:
        info.add_metric(
            [
                n.phone_number_id,
                n.display_phone_number,
                n.waba_id,
                n.quality_rating,
                n.messaging_limit_tier,
            ],
            1,
        )
        quality.add_metric([n.phone_number_id], QUALITY_SCORES.get(n.quality_rating, 0))
        configured.add_metric([n.phone_number_id], n.rate_per_second)
        target.add_metric([n.phone_number_id], n.rate_per_second * (1 - n.transactional_reserve))
        if n.waba_id not in seen_accounts:
            seen_accounts.add(n.waba_id)
            limit = TIER_LIMITS.get(n.messaging_limit_tier, 250)
            limits.add_metric(
                [n.waba_id, n.messaging_limit_tier], math.inf if limit is None else limit
            )
    yield from (info, quality, configured, target, limits)


def redis_metrics(conn: redis.Redis, snap: DatabaseSnapshot | None) -> Iterator[Metric]:
    """Counters, RQ queues and workers, and (with the number list) bucket state."""
    pipe = conn.pipeline(transaction=False)
    keys = (*send_metrics.KEYS, *webhook_metrics.KEYS, CLICKS_KEY)
    for key in keys:
        pipe.hgetall(key)
    raw = dict(zip(keys, (_hash(h) for h in pipe.execute()), strict=True))
    known = [n.phone_number_id for n in snap.numbers] if snap is not None else []
    yield from _send_counters(raw, known)
    yield from _webhook_counters(raw[webhook_metrics.WEBHOOKS_KEY])
    yield _click_counter(raw[CLICKS_KEY])
    yield from _queue_metrics(conn)
    if snap is not None:
        yield from _bucket_metrics(conn, snap)


# Error codes an alert takes the rate of: every known number exports them from 0, so the
# first burst counts. A series that first appears at 74 has no increase for rate() to see
# (Prometheus only sees increases between samples), and a number's first throttling would
# stay below the alert however hard Meta refused it.
ALERTED_ERROR_CODES = ("130429",)


def _send_counters(raw: dict[str, dict[str, float]], known: list[str]) -> Iterator[Metric]:
    sends = CounterMetricFamily(
        "whatsblast_sends",
        "Send attempts by number, traffic class and outcome",
        labels=["phone_number_id", "traffic", "outcome"],
    )
    for field, value in sorted(raw[send_metrics.SENDS_KEY].items()):
        sends.add_metric(field.rsplit("|", 2), value)
    yield sends
    errors = CounterMetricFamily(
        "whatsblast_send_errors",
        "Failed sends by number and Meta error code (http_<status> or transport without one)",
        labels=["phone_number_id", "code"],
    )
    counted = {f"{pnid}|{code}": 0.0 for pnid in known for code in ALERTED_ERROR_CODES}
    counted.update(raw[send_metrics.ERRORS_KEY])
    for field, value in sorted(counted.items()):
        errors.add_metric(field.rsplit("|", 1), value)
    yield errors
    wait = CounterMetricFamily(
        "whatsblast_token_wait_seconds",
        "Seconds senders spent short of tokens from the number's bucket",
        labels=["phone_number_id", "traffic"],
    )
    for field, value in sorted(raw[send_metrics.TOKEN_WAIT_KEY].items()):
        wait.add_metric(field.rsplit("|", 1), value)
    yield wait
    yield _latency_histogram(raw[send_metrics.LATENCY_KEY])
    created = CounterMetricFamily(
        "whatsblast_dead_letters_created",
        "Messages whose retries ran out and became dead letters",
        labels=["phone_number_id"],
    )
    for pnid, value in sorted(raw[send_metrics.DEAD_LETTERS_KEY].items()):
        created.add_metric([pnid], value)
    yield created


def _latency_histogram(raw: dict[str, float]) -> Metric:
    histogram = HistogramMetricFamily(
        "whatsblast_cloud_api_latency_seconds",
        "Cloud API send latency by number (every answered or failed call)",
        labels=["phone_number_id"],
    )
    per_number: dict[str, dict[str, float]] = {}
    for field, value in raw.items():
        pnid, part = field.rsplit("|", 1)
        per_number.setdefault(pnid, {})[part] = value
    bounds = [*(repr(b) for b in send_metrics.LATENCY_BUCKETS), "+Inf"]
    for pnid, parts in sorted(per_number.items()):
        running, buckets = 0.0, []
        for index, bound in enumerate(bounds):
            running += parts.get(str(index), 0.0)
            buckets.append((bound, running))
        histogram.add_metric([pnid], buckets, sum_value=parts.get("sum", 0.0))
    return histogram


def _webhook_counters(raw: dict[str, float]) -> Iterator[Metric]:
    received = CounterMetricFamily(
        "whatsblast_webhook_events_received",
        "Webhook POSTs: stored, duplicate (redelivered), rejected (malformed), forbidden",
        labels=["result"],
    )
    for result in webhook_metrics.WEBHOOK_RECEIPTS:
        received.add_metric([result], raw.get(f"received|{result}", 0.0))
    yield received
    applied = CounterMetricFamily(
        "whatsblast_webhook_events_applied",
        "Stored events the applier finished: processed, rejected, failed",
        labels=["result"],
    )
    for result in ("processed", "rejected", "failed"):
        applied.add_metric([result], raw.get(f"applied|{result}", 0.0))
    yield applied
    for name, field, doc in (
        ("whatsblast_webhook_statuses", "statuses", "Status callbacks read by the applier"),
        (
            "whatsblast_webhook_message_updates",
            "message_updates",
            "Messages moved forward by status callbacks",
        ),
        (
            "whatsblast_webhook_unmatched_statuses",
            "unmatched",
            "Status callbacks that matched no message when first applied",
        ),
    ):
        yield CounterMetricFamily(name, doc, value=raw.get(field, 0.0))


def _click_counter(raw: dict[str, float]) -> Metric:
    """Requests for tracked links by outcome (``delivery.engagement.clicks``), every outcome
    from 0 so that the first of each has an increase for rate() to see."""
    clicks = CounterMetricFamily(
        "whatsblast_clicks",
        "Tracked-link requests: stored (a person's click, redirected), preview (a link-preview"
        " fetcher or HEAD, stored apart), expired, unknown, forged (fallback page, nothing"
        " stored), unavailable (503: not stored in time or past the admission limit)",
        labels=["outcome"],
    )
    for outcome in CLICK_OUTCOMES:
        clicks.add_metric([outcome], raw.get(outcome, 0.0))
    return clicks


def _queue_metrics(conn: redis.Redis) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "whatsblast_rq_jobs", "RQ jobs by queue and state", labels=["queue", "state"]
    )
    names = tuple(settings.RQ_QUEUE_NAMES)
    pipe = conn.pipeline(transaction=False)
    for name in names:
        queue = rq.Queue(name, connection=conn)
        pipe.llen(queue.key)
        for registry in (
            queue.started_job_registry,
            queue.scheduled_job_registry,
            queue.deferred_job_registry,
            queue.failed_job_registry,
        ):
            pipe.zcard(registry.key)
    counts = iter(pipe.execute())
    for name in names:
        for state in JOB_STATES:
            jobs.add_metric([name, state], next(counts))
    yield jobs
    workers = GaugeMetricFamily(
        "whatsblast_rq_workers",
        "Workers listening on each queue with a recent heartbeat",
        labels=["queue"],
    )
    alive = workers_alive(conn, queues=names, max_age_s=settings.READYZ_WORKER_MAX_AGE_SECONDS)
    for name, count in alive.items():
        workers.add_metric([name], count)
    yield workers


def _bucket_metrics(conn: redis.Redis, snap: DatabaseSnapshot) -> Iterator[Metric]:
    effective = GaugeMetricFamily(
        "whatsblast_number_effective_rate",
        "The rate the number's bucket grants now (msg/s): lower than configured after 130429",
        labels=["phone_number_id"],
    )
    paused = GaugeMetricFamily(
        "whatsblast_number_pause_remaining_seconds",
        "Seconds left in the number's throttling pause (0: sending)",
        labels=["phone_number_id"],
    )
    buckets = [
        TokenBucket(n.phone_number_id, rate=max(1, n.rate_per_second), reserve=0.0, conn=conn)
        for n in snap.numbers
    ]
    pipe = conn.pipeline(transaction=False)
    pipe.time()
    for bucket in buckets:
        pipe.get(bucket.adaptive_key)
        pipe.get(bucket.pause_key)
    seconds, micros, *values = _flatten_time(pipe.execute())
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    for index, (bucket, number) in enumerate(zip(buckets, snap.numbers, strict=True)):
        adaptive, paused_until = values[2 * index], values[2 * index + 1]
        rate = float(number.rate_per_second)
        if adaptive is not None and 0 < float(adaptive) < rate:
            rate = float(adaptive)
        effective.add_metric([bucket.phone_number_id], rate)
        remaining = max(0, int(paused_until or 0) - now_ms) / 1000.0
        paused.add_metric([bucket.phone_number_id], remaining)
    yield from (effective, paused)


def _flatten_time(results: list[Any]) -> list[Any]:
    (seconds, micros), *rest = results
    return [seconds, micros, *rest]
