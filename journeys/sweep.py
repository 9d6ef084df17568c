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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

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


@dataclass
class SweepReport:
    batches: int = 0
    instances: int = 0
    steps: int = 0
    sent: int = 0
    left: int = 0
    migrated: int = 0
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
        if not journeys:
            return report
        taken = _batch(journeys, now or timezone.now(), batch, report)
        if taken < batch:
            return report
        out_of_time = budget_s is not None and time.monotonic() - started > budget_s
        if out_of_time or (step_aside is not None and step_aside()):
            report.left_over = True
            return report


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
