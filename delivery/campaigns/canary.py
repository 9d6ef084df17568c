"""Canary launches: send to the first N recipients, hold the rest, judge, then continue.

A campaign with ``canary_size`` N launches as usual (one row per recipient), except that
every row after the first N sendable recipients (by contact id) is inserted *held*: its
``next_attempt_at`` is ``HOLD_AT``, a date no claim ever reaches. Nothing in the engine
needs to know about canaries: the claim takes due rows, so only the canary goes out;
retries, throttling, windows and the reconciler treat canary rows like any other; a
campaign with held rows never counts as finished; cancelling cancels held rows too.

The maintenance tick (``canaries_check``) then judges each campaign in ``testing``:

* every canary row has left the open states, and each sent one has a delivery report
  (delivered, read, failed) or was sent at least ``CANARY_SETTLE_SECONDS`` ago (a failure
  Meta reports by webhook has had time to arrive): the failure rate, failed plus dead
  over sent, decides ``passed`` or ``failed``;
* earlier, as soon as the failures already exceed the threshold over the whole canary
  (they can only grow), the canary fails without waiting.

``passed`` releases the held rows, ``RELEASE_BATCH`` per tick (far ahead of any number's
rate, and never a long statement in the tick). ``failed`` pauses the campaign with the
reason; resuming it (an operator decides the failures were acceptable) releases the held
rows the same way, so the canary's verdict can be overridden but never bypassed by
accident.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, CanaryState
from delivery.campaigns.audience import Audience
from delivery.campaigns.skips import SkipRules
from delivery.messages import held_release

logger = logging.getLogger(__name__)

# Far beyond any real schedule, yet a date Python can read back (PostgreSQL's 'infinity'
# would break every ORM read of the row).
HOLD_AT = datetime(9999, 1, 1, tzinfo=UTC)


def held_for_canary(at: datetime) -> bool:
    """Whether a row due at ``at`` is one the canary holds (not a real time to show)."""
    return at >= HOLD_AT


# How long a sent canary message may go without a delivery report before it counts as
# not failed: Meta reports most deliveries and undeliverable numbers within seconds.
CANARY_SETTLE_SECONDS = 60.0
# Held rows released per campaign per tick: about 0.65 s of UPDATE on a million-row
# campaign (20,000 took 1.3 s), ten seconds of sending at 1,000 msg/s, so the release
# keeps far ahead of the sender without stalling the tick.
RELEASE_BATCH = 10_000


# --- launch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CanaryHold:
    """What the launch INSERT needs to hold every row after the canary."""

    boundary_contact_id: int | None  # the canary's last contact; None: no hold

    @property
    def active(self) -> bool:
        return self.boundary_contact_id is not None

    def wrap(self, next_attempt_expr: str, alias: str = "c") -> str:
        if not self.active:
            return next_attempt_expr
        return (
            f"CASE WHEN {alias}.id <= %(canary_boundary)s THEN {next_attempt_expr} "
            "ELSE %(canary_hold_at)s END"
        )

    @property
    def params(self) -> dict[str, Any]:
        if not self.active:
            return {}
        return {"canary_boundary": self.boundary_contact_id, "canary_hold_at": HOLD_AT}


# The N-th sendable recipient by contact id: the same audience and the same skip rules as
# the launch INSERT (``{sendable}``: delivery.campaigns.skips). Top-N over the audience:
# one pass, no full sort.
_BOUNDARY_SQL = """
SELECT c.id
  FROM campaigns_contact AS c
 WHERE {sendable}
   AND {audience}
 ORDER BY c.id
 LIMIT 1 OFFSET %(offset)s
"""


def canary_hold(*, campaign: Campaign, audience: Audience, skips: SkipRules) -> CanaryHold:
    """The hold for the launch: none without a canary, or when the audience fits in it."""
    if campaign.canary_size <= 0:
        return CanaryHold(None)
    sql = _BOUNDARY_SQL.format(sendable=skips.sendable_sql("c"), audience=audience.condition)
    args = {**audience.params, **skips.params}
    with connection.cursor() as cursor:
        cursor.execute(sql, {**args, "offset": campaign.canary_size - 1})
        row = cursor.fetchone()
    if row is None:
        return CanaryHold(None)
    # Is there anyone after the boundary? If not, the canary is the whole campaign.
    with connection.cursor() as cursor:
        cursor.execute(sql, {**args, "offset": campaign.canary_size})
        if cursor.fetchone() is None:
            return CanaryHold(None)
    return CanaryHold(int(row[0]))


# --- judging -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CanaryTally:
    open: int  # canary rows still pending (not held), sending or unknown
    sent: int  # handed to Meta or failed: sent, delivered, read, failed, dead
    failed: int  # failed or dead
    unreported: int  # sent without a delivery report yet
    last_unreported_at: datetime | None
    held: int
    # Of ``open``: rows waiting on a retry after a temporary error, and the earliest of
    # their next attempts; rows handed to the sender or in doubt (sending, unknown).
    retrying: int = 0
    next_retry_at: datetime | None = None
    in_flight: int = 0

    @property
    def size(self) -> int:
        return self.open + self.sent

    @property
    def failure_rate(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "open": self.open,
            "sent": self.sent,
            "failed": self.failed,
            "unreported": self.unreported,
            "held": self.held,
            "failure_rate": round(self.failure_rate, 4),
            "size": self.size,
            "retrying": self.retrying,
            "next_retry_at": self.next_retry_at.isoformat() if self.next_retry_at else None,
            "in_flight": self.in_flight,
            "reports_due_by": self.reports_due_by.isoformat() if self.reports_due_by else None,
        }

    @property
    def reports_due_by(self) -> datetime | None:
        """When the last sent row without a delivery report stops being waited for."""
        if not self.unreported or self.last_unreported_at is None:
            return None
        return self.last_unreported_at + timedelta(seconds=CANARY_SETTLE_SECONDS)


# While a canary is testing only canary rows have left `pending`, so the per-status counts
# are the canary's; pending rows split into canary (due before HOLD_AT) and held. Each
# count walks an index: (campaign, send_status) for the statuses, the partial pending index
# (campaign, next_attempt_at) for the two pending ranges.
_TALLY_SQL = """
SELECT
  (SELECT count(*) FROM delivery_message
    WHERE campaign_id = %(id)s AND send_status = 'pending' AND next_attempt_at < %(hold)s),
  (SELECT count(*) FROM delivery_message
    WHERE campaign_id = %(id)s AND send_status = 'pending' AND next_attempt_at >= %(hold)s),
  r.retrying, r.next_retry_at,
  s.open, s.sent, s.failed, s.unreported, s.last_unreported_at
FROM (
  SELECT count(*) FILTER (WHERE send_status IN ('sending', 'unknown')) AS open,
         count(*) FILTER (WHERE send_status IN ('sent', 'failed', 'dead')) AS sent,
         count(*) FILTER (WHERE send_status IN ('failed', 'dead')) AS failed,
         -- No receipt yet: only `status` tells sent from delivered or read.
         count(*) FILTER (WHERE status = 'sent') AS unreported,
         max(sent_at) FILTER (WHERE status = 'sent') AS last_unreported_at
    FROM delivery_message
   WHERE campaign_id = %(id)s
     AND send_status IN ('sending', 'unknown', 'sent', 'failed', 'dead')
) AS s, (
  -- Canary rows back in pending after a temporary error: what the canary waits on.
  SELECT count(*) AS retrying, min(next_attempt_at) AS next_retry_at
    FROM delivery_message
   WHERE campaign_id = %(id)s AND send_status = 'pending' AND next_attempt_at < %(hold)s
     AND attempt > 0
) AS r
"""

# The most frequent failures of the canary, for the reason a person reads.
_TOP_FAILURES_SQL = """
SELECT last_error_code, max(last_error_title), count(*)
  FROM delivery_message
 WHERE campaign_id = %s AND send_status IN ('failed', 'dead')
 GROUP BY last_error_code
 ORDER BY count(*) DESC
 LIMIT 3
"""


def canary_tally(*, campaign_id: int) -> CanaryTally:
    with connection.cursor() as cursor:
        cursor.execute(_TALLY_SQL, {"id": campaign_id, "hold": HOLD_AT})
        row = cursor.fetchone()
    pending, held, retrying, next_retry_at, in_flight, sent, failed, unreported, last = row
    return CanaryTally(
        open=int(pending) + int(in_flight),
        sent=int(sent),
        failed=int(failed),
        unreported=int(unreported),
        last_unreported_at=last,
        held=int(held),
        retrying=int(retrying),
        next_retry_at=next_retry_at,
        in_flight=int(in_flight),
    )


@dataclass(frozen=True)
class CanaryVerdict:
    state: str  # testing (no verdict yet), passed or failed
    tally: CanaryTally
    reason: str = ""


def canary_judge(
    *, campaign: Campaign, tally: CanaryTally, now: datetime, settle_seconds: float
) -> CanaryVerdict:
    """Pure: the verdict on a canary given its tally (``testing`` while undecided)."""
    limit = campaign.canary_max_failure_rate
    if tally.size and tally.failed / tally.size > limit:
        # Even if every open row succeeded the rate would stay above the threshold.
        return CanaryVerdict(CanaryState.FAILED, tally)
    if tally.open or not tally.sent:
        return CanaryVerdict(CanaryState.TESTING, tally)
    settle_at = now - timedelta(seconds=settle_seconds)
    if tally.unreported and tally.last_unreported_at and tally.last_unreported_at > settle_at:
        return CanaryVerdict(CanaryState.TESTING, tally)
    if tally.failure_rate > limit:
        return CanaryVerdict(CanaryState.FAILED, tally)
    return CanaryVerdict(CanaryState.PASSED, tally)


def _failure_reason(campaign: Campaign, tally: CanaryTally) -> str:
    with connection.cursor() as cursor:
        cursor.execute(_TOP_FAILURES_SQL, [campaign.pk])
        top = ", ".join(
            f"{code if code is not None else 'no code'} {title or ''}".strip() + f" x{n}"
            for code, title, n in cursor.fetchall()
        )
    return (
        f"Canary failed: {tally.failed} of {tally.size} canary messages failed "
        f"({tally.failed / max(1, tally.size):.1%}, threshold "
        f"{campaign.canary_max_failure_rate:.1%}); {tally.held} recipients held"
        + (f". Most frequent: {top}" if top else "")
        + ". Resume to send to them anyway, or cancel."
    )


def canary_evaluate(
    *, campaign: Campaign, now: datetime | None = None, settle_seconds: float | None = None
) -> CanaryVerdict:
    """Judge a testing canary and act on the verdict: release on pass, pause on failure."""
    now = now or timezone.now()
    settle = CANARY_SETTLE_SECONDS if settle_seconds is None else settle_seconds
    tally = canary_tally(campaign_id=campaign.pk)
    verdict = canary_judge(campaign=campaign, tally=tally, now=now, settle_seconds=settle)
    if verdict.state == CanaryState.TESTING:
        return verdict
    reason = _failure_reason(campaign, tally) if verdict.state == CanaryState.FAILED else ""
    with transaction.atomic():
        # Conditional on `testing`: two ticks judging at once act once.
        won = Campaign.objects.filter(pk=campaign.pk, canary_state=CanaryState.TESTING).update(
            canary_state=verdict.state
        )
        if won and verdict.state == CanaryState.FAILED:
            Campaign.objects.filter(
                pk=campaign.pk, status__in=(CampaignStatus.RUNNING, CampaignStatus.SCHEDULED)
            ).update(status=CampaignStatus.PAUSED, status_reason=reason[:500])
    if won:
        logger.info(
            "campaign %s canary %s: %s of %s failed",
            campaign.pk,
            verdict.state,
            tally.failed,
            tally.size,
        )
    return CanaryVerdict(verdict.state, tally, reason)


# --- release -----------------------------------------------------------------------------------


def canary_release(*, campaign_id: int, limit: int = RELEASE_BATCH) -> int:
    """Make up to ``limit`` held rows of the campaign due now; return how many."""
    return held_release(campaign_id=campaign_id, hold_at=HOLD_AT, limit=limit)


@dataclass
class CanaryReport:
    passed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    released: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failed": self.failed, "released": self.released}


def canaries_check(*, now: datetime | None = None) -> CanaryReport:
    """The maintenance tick's pass: judge testing canaries, release after a verdict.

    Held rows are released for running campaigns whose canary passed, or failed and was
    resumed by a person; the tick's kick that follows starts their senders.
    """
    report = CanaryReport()
    testing = Campaign.objects.filter(
        status=CampaignStatus.RUNNING, canary_state=CanaryState.TESTING
    )
    for campaign in testing:
        verdict = canary_evaluate(campaign=campaign, now=now)
        if verdict.state == CanaryState.PASSED:
            report.passed.append(campaign.pk)
        elif verdict.state == CanaryState.FAILED:
            report.failed.append(campaign.pk)
    releasing = Campaign.objects.filter(
        status=CampaignStatus.RUNNING,
        canary_state__in=(CanaryState.PASSED, CanaryState.FAILED),
    ).values_list("pk", flat=True)
    for campaign_id in releasing:
        report.released += canary_release(campaign_id=campaign_id)
    return report
