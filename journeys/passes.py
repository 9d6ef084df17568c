"""The journeys' pass: route the stored events, fire the due steps, check the entries that
are checked, launch the recurring runs that are due.

The maintenance tick runs it every second with a short budget; when the budget runs out
with work left (100,000 waits due at once, a burst of events) it queues its own job to go
on, and events stored through the API queue one too (debounced, one per interval), so an
order event's first message leaves within about a second. Every part finds its work in
PostgreSQL and is safe to run on several workers at once (one router at a time by an
advisory lock, sweeps sharing rows with SKIP LOCKED, entry checks skipping a journey
another holds, a recurring run unique per time): a lost job or a lost Redis costs a
second, never a step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis

from journeys.entries import entries_check
from journeys.recurring import recurring_runs
from journeys.routing import events_route
from journeys.sweep import journeys_sweep
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

DEBOUNCE_KEY = "wb:journeys-pass"
DEBOUNCE_MS = 200


def journeys_pass(
    *,
    budget_s: float | None = None,
    now: datetime | None = None,
    step_aside: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """One pass (see the module's docstring). With a budget, or when ``step_aside`` says
    more urgent work waits (an OTP, a number's slot), it stops between batches and queues
    a job to go on with the rest."""
    started = time.monotonic()
    half = None if budget_s is None else budget_s / 2
    routed = events_route(now=now, budget_s=half, step_aside=step_aside)
    swept = journeys_sweep(now=now, budget_s=_left(budget_s, started), step_aside=step_aside)
    entries = entries_check(now=now)
    # Entries just made may be due at once (a segment's newcomers): fire them now.
    if entries.entered:
        swept_more = journeys_sweep(
            now=now, budget_s=_left(budget_s, started), step_aside=step_aside
        )
        swept.instances += swept_more.instances
        swept.sent += swept_more.sent
        swept.left_over = swept.left_over or swept_more.left_over
    runs = recurring_runs(now=now)
    more = routed.left_over or swept.left_over
    if more:
        pass_schedule()
    return {
        "events": routed.as_dict(),
        "swept": swept.as_dict(),
        "entries": entries.as_dict(),
        "runs": runs.as_dict(),
        "continued": more,
    }


def _left(budget_s: float | None, started: float) -> float | None:
    if budget_s is None:
        return None
    return max(0.05, budget_s - (time.monotonic() - started))


def journeys_drain(
    *, budget_s: float = 60.0, step_aside: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """The job: a pass until nothing is left, the budget is spent, or more urgent jobs
    wait for this worker (then a job of its own goes on after them)."""
    try:
        get_redis().delete(DEBOUNCE_KEY)
    except redis.RedisError:
        pass
    return journeys_pass(budget_s=budget_s, now=None, step_aside=step_aside)


def pass_schedule() -> bool:
    """Queue the journeys' job unless one was queued within the debounce interval."""
    try:
        if not get_redis().set(DEBOUNCE_KEY, b"1", nx=True, px=DEBOUNCE_MS):
            return False
        queues.enqueue(queues.JOURNEYS_PASS)
    except redis.RedisError as exc:
        logger.warning("journeys pass not queued (%s); the tick will run it", exc)
        return False
    return True
