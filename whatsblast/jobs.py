"""Every RQ job: ids in, one service call, a JSON-able result out. Rules live in the services.

Jobs are enqueued by name (``whatsblast.core.queues``, which also names their queue and
timeout), so the services that queue work never import this module. Database connections
are looked after around every job by the worker class (``whatsblast.rq``).
"""

from __future__ import annotations

from typing import Any

from campaigns.audience.uploads import contact_upload_run_report
from delivery.campaigns.launch import campaign_start_scheduled
from delivery.campaigns.launch_queue import (
    campaign_launch_queued,
    campaigns_launch_together_queued,
)
from delivery.campaigns.pricing import campaign_costs_refresh
from delivery.cloud.template_sync import templates_sync_all
from delivery.engine.send_service import number_slot_send, transactional_message_send
from delivery.graph_reads import numbers_graph_read_all
from journeys.passes import journeys_drain
from webhooks.applier import events_drain
from whatsblast.core import queues
from whatsblast.tick import maintenance_tick


def number_send_job(phone_number_pk: int, slot: int, token: str, passes: int = 0) -> dict[str, Any]:
    """Take one slot of a number: this worker's send loop serves it from now on."""
    return number_slot_send(phone_number_pk=phone_number_pk, slot=slot, token=token, passes=passes)


def campaign_launch_job(campaign_id: int) -> dict[str, Any]:
    """Launch a draft queued from the admin (a million recipients outlast a request)."""
    return campaign_launch_queued(campaign_id=campaign_id)


def campaigns_launch_together_job(campaign_ids: list[int]) -> dict[str, Any]:
    """Launch drafts queued together from the admin, in one commit."""
    return campaigns_launch_together_queued(campaign_ids=campaign_ids)


def campaign_start_job(campaign_id: int) -> dict[str, Any]:
    """Launch a scheduled campaign that has come due."""
    summary = campaign_start_scheduled(campaign_id=campaign_id)
    return summary.as_dict() if summary is not None else {"started": False}


def transactional_send_job(message_id: int) -> str:
    """Send one transactional message: on this worker's transactional lane (the job returns
    at once), or in place without a send service."""
    return transactional_message_send(message_id=message_id)


def maintenance_tick_job() -> dict[str, Any]:
    return maintenance_tick()


def journeys_pass_job() -> dict[str, Any]:
    """Route stored events and fire due journey steps until none is left (or a minute
    passed: then it queues itself again). Queued by the events API and by a tick whose
    short pass left work. Between batches it steps aside (a continuation queued behind) when
    transactional or campaign jobs wait, as the webhook applier does."""
    return journeys_drain(step_aside=queues.urgent_jobs_waiting)


def webhook_apply_job() -> dict[str, int]:
    """Apply stored callback events until none is pending (or the time budget is spent).

    Enqueued (debounced) after each stored POST; the tick's sweep also drains. Between
    batches it steps aside (a continuation is queued behind) when transactional or campaign
    jobs wait: a worker in a minute-long drain would hold an OTP, or a number's slot
    handed over by a stopping worker, for that minute. Returns the run's counts.
    """
    return events_drain(step_aside=queues.urgent_jobs_waiting).as_dict()


def template_sync_all_job() -> list[dict[str, Any]]:
    """Sync every account's template catalogue from Meta; one report per account."""
    return [report.as_dict() for report in templates_sync_all()]


def graph_read_all_job() -> list[dict[str, Any]]:
    """Read every number and account from Meta's Graph API."""
    return [
        {"phone_number_id": r.phone_number_id, "ok": r.ok, "changed": r.changed, "error": r.error}
        for r in numbers_graph_read_all()
    ]


def campaign_costs_refresh_job() -> list[int]:
    """Reckon the cost of the campaigns whose cost can still change, for the list."""
    return campaign_costs_refresh()


def contacts_import_job(upload_id: int) -> dict[str, Any]:
    """Import an uploaded contact file; the upload page polls its progress."""
    return contact_upload_run_report(upload_id=upload_id)
