"""RQ jobs of the campaigns app: thin wrappers around its services."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import close_old_connections

from whatsblast import queues
from whatsblast.redis import get_redis

# Meta allows 200 (5,000 for an active WABA) management calls an hour per WABA; a sync
# costs one call per 100 templates, so every 15 minutes is a handful of calls an hour.
TEMPLATE_SYNC_INTERVAL_S = 15 * 60
_SYNC_DUE_KEY = "wb:template-sync:due"


def template_sync_all_job() -> list[dict[str, Any]]:
    """Sync every account's template catalogue from Meta; one report per account."""
    from campaigns.templates_sync import templates_sync_all

    close_old_connections()
    return [report.as_dict() for report in templates_sync_all()]


def template_sync_schedule() -> bool:
    """Enqueue the catalogue sync unless one was enqueued within the interval.

    Every maintenance tick (every second or two, from any number of tickers) asks; the
    Redis key, set only if absent and expiring after the interval, lets one through.
    ``TEMPLATE_SYNC_INTERVAL_SECONDS = 0`` in the settings turns the periodic sync off.
    """
    interval = int(getattr(settings, "TEMPLATE_SYNC_INTERVAL_SECONDS", TEMPLATE_SYNC_INTERVAL_S))
    if interval <= 0 or not get_redis().set(_SYNC_DUE_KEY, 1, nx=True, ex=interval):
        return False
    from delivery.dispatch import MAINTENANCE_QUEUE

    queues.get_queue(MAINTENANCE_QUEUE).enqueue(template_sync_all_job)
    return True


def contacts_import_job(upload_id: int) -> dict[str, Any]:
    """Import an uploaded contact file (campaigns.upload); the page polls its progress."""
    from campaigns.upload import contact_upload_run

    close_old_connections()
    upload = contact_upload_run(upload_id=upload_id)
    if upload is None:
        return {"upload": upload_id, "skipped": "not queued"}
    return {"upload": upload_id, "status": upload.status, "rows": upload.rows_read}


def contacts_import_enqueue(*, upload_id: int) -> None:
    from delivery.dispatch import MAINTENANCE_QUEUE

    queues.get_queue(MAINTENANCE_QUEUE).enqueue(contacts_import_job, upload_id)
