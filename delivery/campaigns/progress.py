"""Reads for campaigns that span relations or aggregate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Max, Q
from django.utils import timezone

from campaigns.models import Campaign
from delivery.models import OPEN_STATUSES, Message, MessageStatus

RATE_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class CampaignProgress:
    campaign_id: int
    name: str
    status: str
    total: int
    counts: dict[str, int]
    # Messages still to settle: pending, sending, or unknown (being reconciled).
    remaining: int
    sent_last_minute: int
    rate_per_second: float
    eta_seconds: float | None
    measured_at: datetime
    # Sends Meta answered ``held_for_quality_assessment`` (template pacing), whatever
    # became of them since (most are delivered later; some dropped with 132015).
    held_for_quality_assessment: int = 0
    # ``sent_last_minute`` counts the sends from here: a minute ago, or the campaign's
    # start or last resume when later (``rate_window_start``).
    rate_since: datetime | None = None

    @property
    def eta(self) -> datetime | None:
        if self.eta_seconds is None:
            return None
        return self.measured_at + timedelta(seconds=self.eta_seconds)

    def as_dict(self) -> dict[str, Any]:
        eta = self.eta
        return {
            "campaign_id": self.campaign_id,
            "name": self.name,
            "status": self.status,
            "total": self.total,
            "counts": self.counts,
            "remaining": self.remaining,
            "sent_last_minute": self.sent_last_minute,
            "rate_per_second": self.rate_per_second,
            "eta_seconds": self.eta_seconds,
            "eta": eta.isoformat() if eta else None,
            "measured_at": self.measured_at.isoformat(),
            "held_for_quality_assessment": self.held_for_quality_assessment,
        }


def campaign_progress(*, campaign: Campaign) -> CampaignProgress:
    """Message counts by status, send rate over the last minute and the time left at that rate.

    One aggregate query over the campaign's messages (the campaign index), with a
    filtered count per status. The rate counts messages Meta accepted (``sent_at``) in the
    last minute; the ETA is the open messages at that rate, ``None`` while nothing is moving.

    The sends Meta held for quality assessment are one more filtered count of the same
    scan, free here; the status counters the triggers keep (``status_counts``) leave them
    out, as they are a fact of the send response, not a status, and only this page and
    ``campaign status`` show them: counting them there would cost every write statement.
    """
    now = timezone.now()
    since = rate_window_start(campaign=campaign, now=now)
    aggregates: dict[str, Any] = {
        status: Count("id", filter=Q(status=status)) for status in MessageStatus.values
    }
    aggregates["sent_last_minute"] = Count("id", filter=Q(sent_at__gte=since))
    aggregates["held"] = Count("id", filter=Q(held_for_quality_assessment=True))
    row = Message.objects.filter(campaign=campaign).aggregate(**aggregates)
    sent_last_minute = row.pop("sent_last_minute")
    held = int(row.pop("held"))
    counts = {status: int(row[status]) for status in MessageStatus.values}
    remaining = sum(counts[s] for s in OPEN_STATUSES)
    rate = sent_last_minute / max(MIN_RATE_WINDOW_S, (now - since).total_seconds())
    return CampaignProgress(
        campaign_id=campaign.pk,
        name=campaign.name,
        status=campaign.status,
        total=sum(counts.values()),
        counts=counts,
        remaining=remaining,
        sent_last_minute=sent_last_minute,
        rate_per_second=round(rate, 2),
        eta_seconds=_eta_seconds(remaining=remaining, rate=rate),
        measured_at=now,
        held_for_quality_assessment=held,
        rate_since=since,
    )


def rate_window_start(*, campaign: Campaign, now: datetime) -> datetime:
    """Where the send rate is measured from: the last minute, or since the campaign started
    or was last resumed when that is later (a resume moves ``guard_since``, as do new guard
    thresholds, which only shorten the window). The paused time is not sending time:
    counted in, a campaign resumed 24 s ago read 2.5 times slower than it sends."""
    starts = [now - RATE_WINDOW, campaign.started_at, campaign.guard_since]
    return max(t for t in starts if t is not None)


def rate_measured(*, since: datetime | None, now: datetime) -> bool:
    """Whether sends since ``since`` are a measured rate yet: under ``MIN_RATE_WINDOW_S``
    the first burst or its absence says little, and the configured rate is the better
    estimate of when the campaign ends."""
    return since is not None and (now - since).total_seconds() >= MIN_RATE_WINDOW_S


# The shortest span a rate is measured over (a campaign's first seconds are bursty).
MIN_RATE_WINDOW_S = 5.0


def recent_rate(
    *, started_at: datetime | None, sent_last_minute: int, now: datetime
) -> tuple[float, int]:
    """(messages a second, over how many seconds): over the last minute, or since the
    start when that is shorter. A campaign ten seconds old that sent 2,000 sends 200/s,
    not 33/s; and its ETA is honest from its first seconds."""
    window = RATE_WINDOW.total_seconds()
    if started_at is not None:
        window = min(window, max(MIN_RATE_WINDOW_S, (now - started_at).total_seconds()))
    return round(sent_last_minute / window, 2), round(window)


def _eta_seconds(*, remaining: int, rate: float) -> float | None:
    if not remaining:
        return 0.0
    if not rate:
        return None  # nothing moved in the window: no honest estimate
    return round(remaining / rate, 1)


# --- the campaign page -------------------------------------------------------------------------

# The send-rate chart: at most the last SERIES_WINDOW, in about SERIES_POINTS buckets of a
# whole number of seconds (15 minutes: 10 s buckets).
SERIES_WINDOW = timedelta(minutes=15)
SERIES_MIN_WINDOW = timedelta(minutes=1)
SERIES_POINTS = 90


@dataclass(frozen=True)
class FailureGroup:
    status: str  # failed or dead
    code: int | None
    title: str
    count: int


def campaign_funnel(*, counts: dict[str, int]) -> list[dict[str, Any]]:
    """Cumulative stages from per-status counts: a read message was also sent and delivered."""
    read = counts.get(MessageStatus.READ, 0)
    delivered = counts.get(MessageStatus.DELIVERED, 0) + read
    sent = counts.get(MessageStatus.SENT, 0) + delivered
    pending = sum(counts.get(s, 0) for s in OPEN_STATUSES)
    return [
        {"stage": "pending", "count": pending},
        {"stage": "sent", "count": sent},
        {"stage": "delivered", "count": delivered},
        {"stage": "read", "count": read},
    ]


def campaign_failures(*, campaign: Campaign) -> list[FailureGroup]:
    """Failed and dead messages by error code, with Meta's title, most frequent first.

    The (campaign, send_status) index reads only the failed and dead rows.
    """
    rows = (
        Message.objects.filter(
            campaign=campaign, send_status__in=(MessageStatus.FAILED, MessageStatus.DEAD)
        )
        .values("status", "last_error_code")
        .annotate(count=Count("id"), title=Max("last_error_title"))
        .order_by("-count", "status", "last_error_code")
    )
    return [
        FailureGroup(r["status"], r["last_error_code"], r["title"] or "", r["count"]) for r in rows
    ]


# Messages Meta accepted per bucket. No index covers sent_at: the campaign's rows come
# from the (campaign, send_status) index, so the cost grows with the campaign (about 0.1 s per
# 100k sent rows); the page caches the whole answer for a poll interval.
_SERIES_SQL = """
SELECT floor(extract(epoch FROM sent_at) / %(bucket)s)::bigint AS b, count(*)
  FROM delivery_message
 WHERE campaign_id = %(campaign_id)s AND sent_at >= %(since)s
 GROUP BY b
"""


def series_span(*, started_at: datetime | None, now: datetime) -> tuple[timedelta, int]:
    """(window, bucket seconds) for the chart: the last 15 minutes, or since the start
    (at least a minute) for a younger campaign, so a short run is not a spike at the edge."""
    window = SERIES_WINDOW
    if started_at is not None:
        window = min(SERIES_WINDOW, max(SERIES_MIN_WINDOW, now - started_at))
    wanted = window.total_seconds() / SERIES_POINTS
    bucket_s = next((b for b in (1, 2, 5, 10, 30, 60) if b >= wanted), 60)
    return window, bucket_s


def campaign_send_rate_series(
    *, campaign: Campaign, now: datetime, window: timedelta, bucket_s: int
) -> list[tuple[datetime, float]]:
    """(bucket start, messages a second) for every bucket of the window, zeros included."""
    first = int(now.timestamp() - window.total_seconds()) // bucket_s
    last = int(now.timestamp()) // bucket_s
    with connection.cursor() as cursor:
        cursor.execute(
            _SERIES_SQL,
            {
                "bucket": bucket_s,
                "campaign_id": campaign.pk,
                "since": datetime.fromtimestamp(first * bucket_s, tz=UTC),
            },
        )
        counts = dict(cursor.fetchall())
    return [
        (datetime.fromtimestamp(b * bucket_s, tz=UTC), counts.get(b, 0) / bucket_s)
        for b in range(first, last + 1)
    ]


def campaign_billing(*, campaign: Campaign) -> list[dict[str, Any]]:
    """Billable messages and the conversations they opened, by Meta's pricing category.

    Meta reports pricing per message (``pricing.category``, ``billable``) and, before
    v24 or in free entry-point windows, the conversation it opened. A campaign messages
    each recipient once and a conversation belongs to one user, so its billable messages
    with a conversation id are its conversations: a plain count, not a DISTINCT (which
    sorts every id, the most expensive figure on the page).
    """
    rows = (
        Message.objects.filter(campaign=campaign)
        .exclude(pricing_category="")
        .values("pricing_category")
        .annotate(
            billable_messages=Count("id", filter=Q(billable=True)),
            conversations=Count("id", filter=~Q(conversation_id="") & Q(billable=True)),
        )
        .order_by("pricing_category")
    )
    return [
        {
            "category": r["pricing_category"],
            "billable_messages": r["billable_messages"],
            "conversations": r["conversations"],
        }
        for r in rows
    ]


def campaign_skips(*, campaign: Campaign) -> list[dict[str, Any]]:
    """The campaign's skipped recipients by reason (opted out, a US user, ...), largest first:
    each skipped row carries the reason the launch gave it (delivery.campaigns.skips)."""
    rows = (
        Message.objects.filter(campaign=campaign, send_status=MessageStatus.SKIPPED)
        .values("skip_reason")
        .annotate(messages=Count("id"))
        .order_by("-messages", "skip_reason")
    )
    return [{"reason": r["skip_reason"] or "(no reason)", "messages": r["messages"]} for r in rows]


# A campaign in many languages, by the version each row was sent in: the outcomes of
# OUTCOMES counted per language in one pass over the campaign's rows.
_BY_LANGUAGE_SQL = """
SELECT t.language,
       count(*),
       count(*) FILTER (WHERE m.status = ANY(%(sent)s)),
       count(*) FILTER (WHERE m.status = ANY(%(delivered)s)),
       count(*) FILTER (WHERE m.status = ANY(%(read)s)),
       count(*) FILTER (WHERE m.status = ANY(%(failed)s)),
       count(*) FILTER (WHERE m.status = ANY(%(skipped)s))
  FROM delivery_message AS m
  JOIN campaigns_template AS t ON t.id = m.template_id
 WHERE m.campaign_id = %(campaign_id)s
 GROUP BY t.language
 ORDER BY count(*) DESC, t.language
"""
LANGUAGE_COLUMNS = ("audience", "sent", "delivered", "read", "failed", "skipped")


def campaign_by_language(*, campaign: Campaign) -> list[dict[str, Any]]:
    """A campaign's outcomes per language it was sent in ([] for a one-language campaign).

    Skipped rows count under the campaign's own template (they have no language of theirs).
    """
    if not campaign.languages:
        return []
    params: dict[str, Any] = {name: list(OUTCOMES[name]) for name in LANGUAGE_COLUMNS[1:]}
    with connection.cursor() as cursor:
        cursor.execute(_BY_LANGUAGE_SQL, {**params, "campaign_id": campaign.pk})
        rows = cursor.fetchall()
    return [
        {"language": language, **dict(zip(LANGUAGE_COLUMNS, map(int, counts), strict=True))}
        for language, *counts in rows
    ]


# Where a campaign's sends went (delivery.engine.routes), and of those sent through the
# Marketing Messages API, how many Meta delivered through Cloud API instead (the account
# not onboarded, product_policy CLOUD_API_FALLBACK): priced ``marketing``, not
# ``marketing_lite``, in their status callbacks.
_ROUTES_SQL = """
SELECT m.send_route,
       count(*),
       count(*) FILTER (WHERE m.pricing_category = 'marketing'
                          AND m.send_route IN ('marketing_messages',
                                               'rerouted_to_marketing_messages'))
  FROM delivery_message AS m
 WHERE m.campaign_id = %s
   AND m.wamid IS NOT NULL
 GROUP BY m.send_route
"""
ROUTE_LABELS = {
    "": "Cloud API (/messages)",
    "marketing_messages": "Marketing Messages API",
    "rerouted_to_marketing_messages": "Marketing Messages API after a 131063 on /messages",
    "rerouted_to_messages": "Cloud API after a 131055 on the Marketing Messages API",
}


def campaign_routes(*, campaign: Campaign) -> dict[str, Any]:
    """The campaign's accepted sends by route, and the Cloud API fallbacks among them;
    {} when every send went to /messages (the report then says nothing)."""
    with connection.cursor() as cursor:
        cursor.execute(_ROUTES_SQL, [campaign.pk])
        rows = cursor.fetchall()
    if all(route == "" for route, _, _ in rows):
        return {}
    return {
        "routes": [
            {"route": route, "label": ROUTE_LABELS.get(route, route), "messages": int(n)}
            for route, n, _ in sorted(rows)
        ],
        "cloud_api_fallback": sum(int(fallback) for _, _, fallback in rows),
    }


# --- one vocabulary of counts ------------------------------------------------------------------

# Every page, the Messages filter and the export count a campaign's messages with these
# words, each a set of statuses. The stages are cumulative, as a funnel is: a read message
# was also delivered, and a delivered one was sent (accepted by Meta).
OUTCOMES: dict[str, tuple[str, ...]] = {
    "audience": tuple(MessageStatus.values),
    "sent": (MessageStatus.SENT, MessageStatus.DELIVERED, MessageStatus.READ),
    "delivered": (MessageStatus.DELIVERED, MessageStatus.READ),
    "read": (MessageStatus.READ,),
    "failed": (MessageStatus.FAILED, MessageStatus.DEAD),
    "to_send": tuple(OPEN_STATUSES),
    "skipped": (MessageStatus.SKIPPED,),
    "cancelled": (MessageStatus.CANCELLED,),
}

OUTCOME_LABELS: dict[str, tuple[str, str]] = {
    "audience": ("Audience", "One message per recipient of the campaign."),
    "sent": ("Sent", "Accepted by Meta (delivered and read ones included)."),
    "delivered": ("Delivered", "Reached the phone (read ones included)."),
    "read": ("Read", "Opened by the recipient (only when read receipts are on)."),
    "failed": ("Failed", "Meta refused or could not deliver it, or retries ran out."),
    "to_send": ("To send", "Not settled yet: waiting, being sent, or being checked."),
    "skipped": ("Skipped", "Not sent on purpose: opted out, duplicate, outside policy."),
    "cancelled": ("Cancelled", "Not sent because the campaign was cancelled."),
}


# Shown only when some sends were held: Meta's template pacing, in one line.
HELD_FOR_QUALITY_LABEL = "Held for quality assessment"
HELD_FOR_QUALITY_HELP = (
    "Meta is pacing this template: it holds these sends while it gauges early feedback, "
    "then delivers them, or drops them (error 132015) if it pauses the template."
)


def held_for_quality_text(held: int) -> str:
    """The campaign page's line about held sends; "" when none were held."""
    if not held:
        return ""
    return f"{HELD_FOR_QUALITY_LABEL}: {held:,}. {HELD_FOR_QUALITY_HELP}"


def outcome_counts(*, counts: dict[str, int]) -> dict[str, int]:
    """The vocabulary's figures from per-status counts."""
    return {name: sum(counts.get(s, 0) for s in statuses) for name, statuses in OUTCOMES.items()}
