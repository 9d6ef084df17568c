"""The events worker's loop: route what committed, deliver what is due, prune now and then.

It runs as its own process (``manage.py events``), beside the senders: nothing on the
send path waits for it, and it holds no lock a sender takes (the outbox rows it deletes
were written by committed transactions; routing serialises only routers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from delivery.events.deliverer import (
    BatchOutcome,
    subscription_deliver_next,
    subscriptions_wake_idle,
)
from delivery.events.router import ROUTE_BATCH, events_prune, events_route

logger = logging.getLogger(__name__)

# A pass that found no full batch waits until this long after it began before the next:
# at a steady flow one pass (route, wake, one batch per subscription) every half second
# costs a few statements, where looping at once spent a tenth of a core on empty checks
# beside the senders. A full batch means a backlog: the next pass starts at once.
PASS_PACE_S = 0.5
PRUNE_EVERY_S = 60.0


@dataclass
class WorkerTotals:
    routed: int = 0
    delivered: int = 0
    failed_batches: int = 0
    dead_lettered: int = 0
    full_batches: int = 0
    outcomes: list[BatchOutcome] = field(default_factory=list)


def events_pass(totals: WorkerTotals | None = None, *, max_batches: int = 50) -> WorkerTotals:
    """One pass: route everything committed, then deliver up to ``max_batches`` batches."""
    totals = totals or WorkerTotals()
    routed = 0
    while True:
        moved = events_route()
        routed += moved
        if moved < ROUTE_BATCH:  # all there was (a full batch: more may wait)
            break
    if routed:
        totals.routed += routed
        subscriptions_wake_idle()
    for _ in range(max_batches):
        outcome = subscription_deliver_next()
        if outcome is None:
            break
        if outcome.delivered:
            totals.delivered += outcome.events
            totals.full_batches += outcome.events >= settings.EVENTS_BATCH_SIZE
        else:
            totals.failed_batches += 1
        totals.dead_lettered += outcome.dead_lettered
    return totals


def events_loop(*, running: Callable[[], bool]) -> None:
    last_prune = 0.0
    while running():
        started = time.monotonic()
        try:
            totals = events_pass()
            if time.monotonic() - last_prune > PRUNE_EVERY_S:
                events_prune()
                last_prune = time.monotonic()
        except DatabaseError as exc:
            # PostgreSQL away: nothing was lost (the outbox and cursors are in it); wait.
            logger.warning("events worker: database unavailable (%s); retrying", exc)
            close_old_connections()
            time.sleep(1.0)
            continue
        if totals.full_batches == 0:
            time.sleep(max(0.0, started + PASS_PACE_S - time.monotonic()))
