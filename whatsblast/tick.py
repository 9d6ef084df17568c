"""The maintenance pass, every second or two: the one place that may call every app.

Each step finds its work in PostgreSQL, so after a crashed worker or a lost Redis the next
tick puts everything back in motion: leases expired and ambiguous sends settled, due
schedules launched, canaries judged and released, A/B tests decided and their winners sent
to the rest, journeys moved on (events routed, due steps fired, entries checked, recurring
runs launched), the quality guard's verdicts on running campaigns, running campaigns without a
sender given one, transactional sends re-queued, webhook events a missed enqueue left behind
applied, launches and uploads whose job was lost queued again, the campaigns' message
counters folded, the template catalogue synced on its interval, callbacks past their
retention deleted.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from campaigns.audience.uploads import contact_uploads_requeue_lost
from delivery.campaigns.ab_tests import ab_tests_check
from delivery.campaigns.canary import canaries_check
from delivery.campaigns.guard import guards_run
from delivery.campaigns.launch import schedules_due_queue
from delivery.campaigns.launch_queue import launches_requeue_lost
from delivery.campaigns.pricing import campaign_costs_refresh_schedule
from delivery.campaigns.status_counts import status_counts_fold
from delivery.cloud.template_sync import template_sync_schedule
from delivery.engine.dispatch import campaigns_due_kick, transactional_due_requeue
from delivery.engine.reconcile import reconcile
from delivery.graph_reads import graph_read_schedule
from journeys.passes import journeys_pass
from webhooks.applier import events_drain
from webhooks.retention import events_purge_schedule
from whatsblast.core import queues

# The tick must not be held up by a webhook backlog (the applier's own jobs drain that).
WEBHOOK_SWEEP_BUDGET_S = 2.0
WEBHOOK_PURGE_BUDGET_S = 1.0


def maintenance_tick() -> dict[str, Any]:
    report = reconcile()
    started = schedules_due_queue()
    # Before the kicks: rows a canary verdict releases are due now and get their senders.
    canaries = canaries_check()
    # As the canary's: an A/B winner's remainder is due now and gets its senders.
    ab_tests = ab_tests_check()
    kicked = campaigns_due_kick()
    requeued = transactional_due_requeue()
    applied = events_drain(budget_seconds=WEBHOOK_SWEEP_BUDGET_S).as_dict()
    # After the callbacks: the replies they carried end waits in this same pass. Between
    # batches it lets waiting transactional and campaign jobs by (its own job goes on
    # after them): with 100,000 steps due at once a whole budget each second held the
    # worker an OTP waited for (p99 1.3 s against 0.12 s beside a plain campaign).
    journeys = journeys_pass(
        budget_s=settings.JOURNEYS_TICK_BUDGET_SECONDS, step_aside=queues.urgent_jobs_waiting
    )
    # After the callbacks: the opt-outs and blocks they carried count at once.
    guarded = guards_run()
    purged = events_purge_schedule(budget_seconds=WEBHOOK_PURGE_BUDGET_S)
    return {
        "leases_expired": report.leases_expired,
        "unknown_resent": report.resent,
        "unknown_failed": report.failed,
        "completed": report.completed_campaigns,
        "schedules_started": started,
        "canaries": canaries.as_dict(),
        "ab_tests": ab_tests.as_dict(),
        "slots_started": kicked,
        "transactional_requeued": requeued,
        "webhooks": applied,
        # Journeys: events routed, due steps fired, entries checked, recurring runs.
        "journeys": journeys,
        "guard": guarded,
        "launches_requeued": launches_requeue_lost(),
        "uploads_requeued": contact_uploads_requeue_lost(),
        # The campaigns' message counters: the deltas the triggers appended, folded.
        "status_counts_folded": status_counts_fold(),
        # The template catalogue, at most once per TEMPLATE_SYNC_INTERVAL_SECONDS.
        "templates_sync_queued": template_sync_schedule(),
        # Numbers and accounts read from the Graph API, once per GRAPH_READ_INTERVAL_SECONDS.
        "graph_read_queued": graph_read_schedule(),
        # The campaign list's costs, at most once a minute.
        "campaign_costs_refresh_queued": campaign_costs_refresh_schedule(),
        # Stored callbacks past WEBHOOK_EVENT_RETENTION_HOURS, once a minute.
        "webhook_events_purged": purged.as_dict() if purged else None,
    }
