"""Settling rows in doubt, and keeping every running campaign moving.

A row in ``sending`` whose lease expired belonged to a worker that died: its send may or
may not have reached Meta, so it becomes ``unknown`` exactly like a timeout. An ``unknown``
row is settled by webhook evidence (a status callback carrying its id moves it forward,
see webhooks) or, after ``UNKNOWN_SETTLE_SECONDS`` without evidence, by its campaign's
policy: resend (at least once) or fail (at most once). Transactional rows fail: a stale
OTP is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from delivery.engine.completion import campaigns_complete_finished
from delivery.messages import leases_expire, unknown_settle


@dataclass(frozen=True)
class ReconcileReport:
    leases_expired: int
    resent: int
    failed: int
    completed_campaigns: list[int]


def reconcile() -> ReconcileReport:
    entry = {"at": timezone.now().isoformat(), "outcome": "lease expired"}
    with transaction.atomic():
        expired = leases_expire(lease_s=settings.SEND_LEASE_SECONDS, entry=entry)
        resent, failed = unknown_settle(window_s=settings.UNKNOWN_SETTLE_SECONDS)
    completed = campaigns_complete_finished()
    return ReconcileReport(
        leases_expired=expired,
        resent=resent,
        failed=failed,
        completed_campaigns=completed,
    )
