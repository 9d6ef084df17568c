"""Writing a batch of send results: a few statements per batch, never one per message."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.db import connection, transaction

from delivery.models import MessageStatus
from delivery.settle import Settlement

# Every settled row of a batch in one statement. The guard `m.status = 'sending'` (or
# 'unknown' for a success) is what makes this safe against the other writers of the row:
# a status webhook that already moved the message forward, or the reconciler that took
# over an expired lease. Their state wins; this one only fills in the wamid.
_SETTLE_SQL = """
UPDATE delivery_message AS m
   SET status = u.status,
       attempt = u.attempt,
       pair_limit_hits = u.pair_limit_hits,
       next_attempt_at = coalesce(u.next_attempt_at, m.next_attempt_at),
       claimed_at = CASE WHEN u.status = 'unknown' THEN now()
                         WHEN u.status = 'pending' THEN NULL
                         ELSE m.claimed_at END,
       wamid = coalesce(m.wamid, u.wamid),
       wa_id = coalesce(u.wa_id, m.wa_id),
       sent_at = CASE WHEN u.status = 'sent' THEN coalesce(m.sent_at, now()) ELSE m.sent_at END,
       failed_at = CASE WHEN u.status IN ('failed', 'dead') THEN now() ELSE m.failed_at END,
       last_error_code = CASE WHEN u.status = 'sent' THEN m.last_error_code ELSE u.code END,
       last_error_title = coalesce(u.title, m.last_error_title),
       last_error_details = coalesce(u.details, m.last_error_details),
       error_history = CASE WHEN u.entry IS NULL THEN m.error_history
                            ELSE m.error_history || jsonb_build_array(u.entry) END
  FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::timestamptz[],
              %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[])
       AS u(id, status, attempt, pair_limit_hits, next_attempt_at,
            wamid, wa_id, code, title, details, entry)
 WHERE m.id = u.id
   AND (m.status = 'sending' OR (m.status = 'unknown' AND u.status = 'sent'))
RETURNING m.id
"""

# A success whose row a webhook already moved on (delivered before the response was
# recorded): keep the newer status, still remember the wamid.
_LATE_SUCCESS_SQL = """
UPDATE delivery_message AS m
   SET wamid = coalesce(m.wamid, u.wamid),
       wa_id = coalesce(nullif(m.wa_id, ''), u.wa_id),
       sent_at = coalesce(m.sent_at, now())
  FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS u(id, wamid, wa_id)
 WHERE m.id = u.id
"""

# Exhausted retries become dead letters, carrying what support needs to decide.
_DEAD_LETTER_SQL = """
INSERT INTO delivery_deadletter
       (message_id, campaign_id, phone_number_id, error_code, error_title,
        payload, attempts, status, created_at, note)
SELECT m.id, m.campaign_id, m.phone_number_id, m.last_error_code, m.last_error_title,
       jsonb_build_object('to', m."to", 'params', m.params, 'template_id', m.template_id,
                          'text', m.text),
       m.error_history, 'open', now(), ''
  FROM delivery_message AS m
 WHERE m.id = ANY(%s) AND m.status = 'dead'
ON CONFLICT (message_id) WHERE status = 'open' DO NOTHING
"""

# The batch's rows, locked in id order before the UPDATE: the webhook applier locks the
# rows it writes in id order too (webhooks.statuses.statuses_resolve), so the two queue
# behind each other. Left to the UPDATE's join order they deadlocked, and PostgreSQL's
# victim was now and then this transaction: the send job died with the batch unrecorded.
_LOCK_SQL = """
SELECT id FROM delivery_message WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE
"""

_OPT_OUT_SQL = """
UPDATE campaigns_contact SET opted_out_at = now(), updated_at = now()
 WHERE id = ANY(%s) AND opted_out_at IS NULL
"""


def settlements_record(
    settlements: Sequence[Settlement], *, opted_out_contact_ids: Sequence[int] = ()
) -> int:
    """Write a batch of settlements; return how many rows took them."""
    if not settlements and not opted_out_contact_ids:
        return 0
    columns: list[list[object]] = [[] for _ in range(11)]
    for s in settlements:
        values = (
            s.message_id,
            s.status,
            s.attempt,
            s.pair_limit_hits,
            s.next_attempt_at,
            s.wamid,
            s.wa_id,
            s.error_code,
            s.error_title,
            s.error_details,
            json.dumps(s.history_entry) if s.history_entry is not None else None,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    dead_ids = [s.message_id for s in settlements if s.status == MessageStatus.DEAD]
    sent = [s for s in settlements if s.status == MessageStatus.SENT]
    with transaction.atomic(), connection.cursor() as cursor:
        updated: set[int] = set()
        if settlements:
            cursor.execute(_LOCK_SQL, [columns[0]])
            cursor.execute(_SETTLE_SQL, columns)
            updated = {row[0] for row in cursor.fetchall()}
        late = [s for s in sent if s.message_id not in updated]
        if late:
            cursor.execute(
                _LATE_SUCCESS_SQL,
                [[s.message_id for s in late], [s.wamid for s in late], [s.wa_id for s in late]],
            )
        if dead_ids:
            cursor.execute(_DEAD_LETTER_SQL, [dead_ids])
        if opted_out_contact_ids:
            cursor.execute(_OPT_OUT_SQL, [list(opted_out_contact_ids)])
    return len(updated)
