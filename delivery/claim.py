"""Claiming work: the statement whose row count proves which worker owns which message."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection

# SKIP LOCKED lets any number of workers on any number of hosts claim from the same
# campaign at once without waiting on each other's row locks: each sees only rows nobody
# else is claiming. The inner SELECT walks the partial index message_pending_claim_idx
# (only pending rows, ordered by next_attempt_at), so the claim costs the same whether the
# campaign has a thousand rows or ten million. The outer UPDATE flips the rows to
# `sending` with a lease timestamp in the same statement: a worker that dies after this
# leaves rows the reconciler finds by their old `claimed_at`.
_CLAIM_CAMPAIGN_SQL = """
UPDATE delivery_message AS m
   SET status = 'sending', claimed_at = now()
 WHERE m.id IN (
        SELECT id
          FROM delivery_message
         WHERE campaign_id = %(campaign_id)s
           AND status = 'pending'
           AND next_attempt_at <= now()
         ORDER BY next_attempt_at
         LIMIT %(limit)s
           FOR UPDATE SKIP LOCKED)
RETURNING m.id, m."to", m.params, m.attempt, m.pair_limit_hits, m.contact_id
"""

# One transactional message by id; the status guard makes a duplicate job a no-op.
_CLAIM_ONE_SQL = """
UPDATE delivery_message
   SET status = 'sending', claimed_at = now()
 WHERE id = %(message_id)s AND status = 'pending'
RETURNING id, "to", params, attempt, pair_limit_hits, contact_id
"""

# Transactional messages of a number that are due (a retry sweep picks them up).
_DUE_TRANSACTIONAL_SQL = """
SELECT id FROM delivery_message
 WHERE kind = 'transactional' AND status = 'pending' AND next_attempt_at <= now()
 ORDER BY next_attempt_at
 LIMIT %(limit)s
"""

# Give rows back untouched (campaign paused or broken, tokens refused): no attempt spent.
_RELEASE_SQL = """
UPDATE delivery_message
   SET status = 'pending', claimed_at = NULL
 WHERE id = ANY(%(ids)s) AND status = 'sending'
"""


@dataclass(frozen=True)
class ClaimedMessage:
    id: int
    to: str
    params: dict[str, Any]
    attempt: int
    pair_limit_hits: int
    contact_id: int | None


def _rows(sql: str, args: dict[str, Any]) -> list[ClaimedMessage]:
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        rows = cursor.fetchall()
    # Django's PostgreSQL backend hands jsonb to raw cursors as text (JSONField decodes it
    # in from_db_value), so decode here.
    return [
        ClaimedMessage(id_, to, json.loads(params) if isinstance(params, str) else params, *rest)
        for id_, to, params, *rest in rows
    ]


def claim_campaign_batch(*, campaign_id: int, limit: int) -> list[ClaimedMessage]:
    if limit <= 0:
        return []
    return _rows(_CLAIM_CAMPAIGN_SQL, {"campaign_id": campaign_id, "limit": limit})


def claim_message(*, message_id: int) -> ClaimedMessage | None:
    rows = _rows(_CLAIM_ONE_SQL, {"message_id": message_id})
    return rows[0] if rows else None


def due_transactional_ids(*, limit: int = 1000) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(_DUE_TRANSACTIONAL_SQL, {"limit": limit})
        return [row[0] for row in cursor.fetchall()]


def release_messages(*, ids: list[int]) -> int:
    if not ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_RELEASE_SQL, {"ids": ids})
        return cursor.rowcount
