"""Settling rows in doubt, and keeping every running campaign moving.

A row in ``sending`` whose lease expired belonged to a worker that died: its send may or
may not have reached Meta, so it becomes ``unknown`` exactly like a timeout. An ``unknown``
row is settled by webhook evidence (a status callback carrying its id moves it forward,
see webhooks) or, after ``UNKNOWN_SETTLE_SECONDS`` without evidence, by its campaign's
policy: resend (at least once) or fail (at most once). Transactional rows fail: a stale
OTP is worse than none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

_EXPIRE_LEASES_SQL = """
UPDATE delivery_message
   SET status = 'unknown', claimed_at = now(),
       error_history = error_history || jsonb_build_array(%(entry)s::jsonb)
 WHERE status = 'sending' AND claimed_at < now() - make_interval(secs => %(lease)s)
RETURNING id
"""

# Unknown rows past the evidence window, by policy. The join picks each campaign's
# policy; transactional rows (no campaign) always fail.
_SETTLE_UNKNOWN_SQL = """
WITH doubtful AS (
    SELECT m.id,
           CASE WHEN c.ambiguous_policy = 'resend' THEN 'pending' ELSE 'failed' END AS verdict
      FROM delivery_message m
      LEFT JOIN campaigns_campaign c ON c.id = m.campaign_id
     WHERE m.status = 'unknown' AND m.claimed_at < now() - make_interval(secs => %(window)s)
     FOR UPDATE OF m SKIP LOCKED
)
UPDATE delivery_message AS m
   SET status = d.verdict,
       claimed_at = NULL,
       next_attempt_at = now(),
       failed_at = CASE WHEN d.verdict = 'failed' THEN now() ELSE m.failed_at END,
       last_error_title = CASE WHEN d.verdict = 'failed'
                               THEN 'No evidence the send reached Meta'
                               ELSE m.last_error_title END,
       error_history = m.error_history || jsonb_build_array(jsonb_build_object(
           'at', now(), 'outcome', 'ambiguous settled: ' || d.verdict))
  FROM doubtful d
 WHERE m.id = d.id AND m.status = 'unknown'
RETURNING m.id, d.verdict
"""


@dataclass(frozen=True)
class ReconcileReport:
    leases_expired: int
    resent: int
    failed: int
    completed_campaigns: list[int]


def reconcile() -> ReconcileReport:
    entry = json.dumps({"at": timezone.now().isoformat(), "outcome": "lease expired"})
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_EXPIRE_LEASES_SQL, {"entry": entry, "lease": settings.SEND_LEASE_SECONDS})
        expired = cursor.rowcount
        cursor.execute(_SETTLE_UNKNOWN_SQL, {"window": settings.UNKNOWN_SETTLE_SECONDS})
        verdicts = [row[1] for row in cursor.fetchall()]
    from campaigns.lifecycle import campaigns_complete_finished

    completed = campaigns_complete_finished()
    return ReconcileReport(
        leases_expired=expired,
        resent=verdicts.count("pending"),
        failed=verdicts.count("failed"),
        completed_campaigns=completed,
    )
