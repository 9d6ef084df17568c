"""The sweep: instances whose time has come, claimed and moved on, a batch a transaction.

A waiting step is its instance's row with ``due_at``; the sweep claims due rows of live
journeys with ``FOR NO KEY UPDATE SKIP LOCKED`` (any number of sweeps on any number of
workers share the work without waiting on each other; the lock does not block the history
rows' foreign-key checks), advances them (journeys.advance) and writes everything in the
same transaction: a step's message, the instance's new place and its history commit
together or not at all. A worker killed mid-batch leaves the rows due, to the next sweep;
nothing of a batch depends on Redis. The senders are woken after the commit (and by the
tick in any case).

The claim walks ``journey_instance_due_idx`` (active instances by journey and due time),
so its cost follows the due rows, not the instances waiting for later.

A journey whose messages already wait on its number (``JOURNEYS_SEND_AHEAD_SECONDS`` of the
number's campaign rate, due and not sent) is left out of the claim until they have gone:
100,000 people due at once leave at the number's rate either way, and sweeping them all at
once only piled their messages up ahead of it while the sweep took the CPU an OTP needed
(bench/journeys.py: transactional p99 4.3x a plain campaign's beside that sweep). Their
rows stay due, in order, and are taken as the number drains them; the lateness limit
still applies.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from delivery.engine.dispatch import campaign_kick, transactional_enqueue
from journeys.advance import advance
from journeys.migrate import instances_migrate
from journeys.running import RunningJourney, running_journeys
from journeys.work import INSTANCE_COLUMNS, Work, instances_from
from whatsblast.core import queues

# Instances a transaction takes: a few hundred milliseconds of work, short enough that an
# event for one of them (journeys.routing waits on its lock) is not held long.
SWEEP_BATCH = 500

_CLAIM_SQL = f"""
SELECT {INSTANCE_COLUMNS}
  FROM journeys_journeyinstance
 WHERE state = 'active' AND journey_id = ANY(%(journeys)s) AND due_at <= %(now)s
 ORDER BY due_at
 LIMIT %(limit)s
   FOR NO KEY UPDATE SKIP LOCKED
"""  # noqa: S608 - constants only


# Journeys with at least ``cap`` of their messages due and unsent: each count stops at its
# cap (on message_pending_claim_idx, by step campaign), so it costs what the cap allows.
_PACED_SQL = """
SELECT paced.journey
  FROM unnest(%(journeys)s::bigint[], %(caps)s::int[]) AS paced(journey, cap)
 WHERE (SELECT count(*) FROM (
            SELECT 1 FROM delivery_message AS m
              JOIN journeys_journeystepcampaign AS sc ON sc.campaign_id = m.campaign_id
             WHERE sc.journey_id = paced.journey AND m.send_status = 'pending'
               AND m.next_attempt_at <= statement_timestamp()
             LIMIT paced.cap) AS waiting) >= paced.cap
"""


@dataclass
class SweepReport:
    batches: int = 0
    instances: int = 0
    steps: int = 0
    sent: int = 0
    left: int = 0
    migrated: int = 0
    # Journeys left out of a claim because their number had enough of their messages.
    paced: set[int] = field(default_factory=set)
    left_over: bool = False
    by_type: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "batches": self.batches,
            "instances": self.instances,
            "steps": self.steps,
            "sent": self.sent,
            "left": self.left,
            "migrated": self.migrated,
            "paced": sorted(self.paced),
        }


def journeys_sweep(
    *,
    now: datetime | None = None,
    batch: int = SWEEP_BATCH,
    budget_s: float | None = None,
    step_aside: Callable[[], bool] | None = None,
) -> SweepReport:
    """Advance every due instance of a live journey (until the budget is spent, or
    ``step_aside`` says more urgent work waits for this worker; ``report.left_over`` says
    the sweep stopped with due rows left).

    ``now`` is the journeys' clock (tests move it; the messages a step makes are due by
    the database's own).
    """
    report = SweepReport()
    started = time.monotonic()
    while True:
        journeys = running_journeys()
        paced = journeys_paced(journeys)
        report.paced |= paced
        journeys = {i: j for i, j in journeys.items() if i not in paced}
        if not journeys:
            return report
        taken = _batch(journeys, now or timezone.now(), batch, report)
        if taken < batch:
            return report
        out_of_time = budget_s is not None and time.monotonic() - started > budget_s
        if out_of_time or (step_aside is not None and step_aside()):
            report.left_over = True
            return report


def journeys_paced(journeys: dict[int, RunningJourney]) -> set[int]:
    """The journeys whose number has ``JOURNEYS_SEND_AHEAD_SECONDS`` of their messages due
    and unsent (at its campaign rate): their due rows wait for the number."""
    ahead_s = float(settings.JOURNEYS_SEND_AHEAD_SECONDS)
    sending = {i: j for i, j in journeys.items() if j.step_campaigns}
    if not sending or ahead_s <= 0:
        return set()
    ids = sorted(sending)
    caps = [_cap(sending[i], ahead_s) for i in ids]
    with connection.cursor() as cursor:
        cursor.execute(_PACED_SQL, {"journeys": ids, "caps": caps})
        return {int(row[0]) for row in cursor.fetchall()}


def _cap(journey: RunningJourney, ahead_s: float) -> int:
    number = journey.journey.phone_number
    share = float(number.rate_per_second) * (1.0 - float(number.transactional_reserve))
    return max(1, math.ceil(share * ahead_s))


def _batch(
    journeys: dict[int, RunningJourney], now: datetime, limit: int, report: SweepReport
) -> int:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL, {"journeys": sorted(journeys), "now": now, "limit": limit})
            instances = instances_from(cursor.fetchall())
        if not instances:
            return 0
        if any(i.version > journeys[i.journey_id].version for i in instances):
            # An edit committed after the journeys were read: read them again.
            journeys = running_journeys(ids={i.journey_id for i in instances})
        work = Work(now=now)
        for journey_id in {i.journey_id for i in instances}:
            mine = [i for i in instances if i.journey_id == journey_id]
            if journey_id in journeys:
                report.migrated += instances_migrate(mine, journeys[journey_id], work)
        advanced = advance(instances, journeys, work)
        work.flush()
        _wake_after_commit(work)
    report.batches += 1
    report.instances += len(instances)
    report.steps += advanced.steps
    report.sent += work.inserted
    report.left += advanced.left
    for kind, n in advanced.by_type.items():
        report.by_type[kind] = report.by_type.get(kind, 0) + n
    return len(instances)


def _wake_after_commit(work: Work) -> None:
    """The step campaigns' senders and the free-form sends, once the batch is committed."""
    campaigns = sorted(work.campaigns_sent)
    freeform = list(work.freeform_ids)

    def wake() -> None:
        for campaign_id in campaigns:
            campaign_kick(campaign_id=campaign_id)
        for message_id in freeform:
            transactional_enqueue(message_id=message_id, attempt=0)

    if campaigns or freeform:
        queues.after_commit(wake, what="journey sends")
