"""Every transition of a ``delivery.Message``: the one module that writes ``delivery_message``.

A message moves ``pending → sending → sent → delivered → read``, or ends ``failed``,
``dead`` (retries exhausted, with a dead letter), ``skipped`` or ``cancelled``; ``unknown``
holds a send that may have reached Meta until evidence or policy settles it. Several
writers touch the same rows at once — senders on many hosts, the webhook applier, the
reconciler, support, a person cancelling — so each transition below is one set-based
statement whose ``WHERE`` is the guard that keeps it right against the others (the row is
still in the state this writer expects, or the new status ranks above the current one).

Status names come from ``MessageStatus``; the SQL is built from those constants (never from
input) when the module loads. Everything else in the project calls these functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection, transaction

from campaigns.audience.opt_outs import contacts_opt_out
from campaigns.models import CampaignStatus
from delivery.models import OPEN_STATUSES, STATUS_RANK, Message, MessageKind, MessageStatus
from whatsblast.core.db import array_literal, array_text, jsonb_value

S = MessageStatus


def _in(statuses: Sequence[str]) -> str:
    """``'a', 'b'`` for an ``IN (…)`` list of status constants."""
    return ", ".join(f"'{s}'" for s in statuses)


# --- what the transitions carry -----------------------------------------------------------


@dataclass(frozen=True)
class ClaimedMessage:
    """A row this worker now owns (status ``sending``, lease taken)."""

    id: int
    to: str
    params: dict[str, Any]
    attempt: int
    pair_limit_hits: int
    contact_id: int | None
    # The template version the row is sent in (a campaign in many languages has several).
    template_id: int | None = None


@dataclass(frozen=True)
class Settlement:
    """A claimed row's next state after its send (``delivery.engine.settle`` decides it)."""

    message_id: int
    status: str
    attempt: int
    pair_limit_hits: int
    next_attempt_at: datetime | None = None
    wamid: str | None = None
    wa_id: str | None = None
    error_code: int | None = None
    error_title: str | None = None
    error_details: str | None = None
    history_entry: dict[str, Any] | None = None
    # A send Meta accepted with ``message_status: held_for_quality_assessment`` (pacing).
    held_for_quality_assessment: bool = False
    # Where the send went when not simply /messages (delivery.engine.routes).
    route: str | None = None


# Not frozen, as webhooks.payloads.StatusUpdate: one is built per message of every applied
# batch, and a frozen dataclass's __init__ costs 2.5x.
@dataclass(slots=True)
class MessageUpdate:
    """Everything a batch of status callbacks learned about one message (webhooks)."""

    message_id: int
    status: str | None  # the highest-ranked status received; None if none applies
    wamid: str | None  # to record when the row has none (matched by callback data)
    sent_at: datetime | None
    delivered_at: datetime | None
    read_at: datetime | None
    failed_at: datetime | None
    error_code: int | None
    error_title: str | None
    error_details: str | None
    conversation_id: str | None
    pricing_category: str | None
    billable: bool | None
    pricing_model: str | None = None
    pricing_type: str | None = None


@dataclass(frozen=True)
class NewlyFailed:
    """A message a failed status callback has just moved to ``failed`` (for its effects)."""

    message_id: int
    contact_id: int | None
    campaign_id: int | None
    template_id: int | None
    phone_number_id: int
    error_code: int | None
    error_title: str


def _claimed(rows: list[tuple[Any, ...]]) -> list[ClaimedMessage]:
    return [ClaimedMessage(id_, to, jsonb_value(params), *rest) for id_, to, params, *rest in rows]


def _fetch(sql: str, args: Any) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


def _run(sql: str, args: Any) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return int(cursor.rowcount)


# Every writer of many rows that waits on row locks takes them in id order (the applier's
# ``statuses_lock``, the sender's settlements, a cancel, a retry, a requeue, the
# reconciler): two such writers touching the same rows then queue behind each other and
# never deadlock. Left to an UPDATE's scan or join order they did: PostgreSQL aborted one
# of them (a cancel from the CLI once, a batch's record before that). Writers that skip
# locked rows (the claim, the held release, the unknown settle) never wait, so they need
# no order. The statements below lock by id first, in a CTE or with ``_LOCK_SQL``.
_LOCK_SQL = """
SELECT id FROM delivery_message WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE
"""


def _run_locked(sql: str, args: Any, *, ids: Sequence[int], fetch: bool = False) -> Any:
    """``sql`` in a transaction that first locks the rows ``ids`` in id order."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_SQL, [list(ids)])
        cursor.execute(sql, args)
        return list(cursor.fetchall()) if fetch else int(cursor.rowcount)


def _json_rows(rows: Sequence[Sequence[Any]]) -> str:
    """Rows as one JSON array for ``jsonb_array_elements``."""
    return json.dumps(rows, separators=(",", ":"))


# Remembered: a batch's timestamps are a few whole seconds (Meta stamps seconds), and looking
# one up costs a twelfth of formatting it again (0.05 against 0.63 µs). Equal datetimes in
# other zones share an entry; they are the same instant, which is all timestamptz keeps.
@lru_cache(maxsize=4096)
def _iso(value: datetime | None) -> str | None:
    """ISO 8601 for the JSON rows: turned to text here, not by a ``default=`` hook, which the
    encoder calls only after failing on the value (twice as slow over a batch)."""
    return None if value is None else value.isoformat()


# --- creation ------------------------------------------------------------------------------

# One row per contact of the campaign's audience (``audience_expr`` over ``c``, from
# delivery.campaigns.audience: a contact in two lists is one recipient), sent to its
# phone, or to its user id when it has no phone (Meta's `recipient`; the phone wins when
# both are known, as Meta recommends). A contact the campaign skips (``skip_reason_expr``:
# opted out, a marketing template to a US user, ...; delivery.campaigns.skips) becomes a
# `skipped` row with its reason, so the campaign's report accounts for everyone; the
# LATERAL evaluates the reason once a row. ON CONFLICT on the (campaign, to) unique index
# makes a second launch a no-op. The params expression, the number each row is sent from
# (one, or a pool's pick), the joins that find each row's first due time and that time
# come from the launch (campaign params rendered in SQL, sender pools, send windows, a
# canary's hold, an A/B test's arm: ``arm_join`` adds ``ab.arm`` over ``c`` and ``skip``).
_CAMPAIGN_INSERT_SQL = f"""
INSERT INTO delivery_message
       (kind, campaign_id, contact_id, phone_number_id, template_id, "to", params, text,
        status, skip_reason, attempt, pair_limit_hits, next_attempt_at, wa_id,
        last_error_title, last_error_details, error_history, created_at,
        conversation_id, pricing_category, request_sha256, variant)
SELECT '{MessageKind.CAMPAIGN}', %(campaign_id)s, c.id, {{number_expr}}, {{template_expr}},
       COALESCE(c.phone, c.user_id), {{params_expr}}, '',
       CASE WHEN skip.reason = '' THEN '{S.PENDING}' ELSE '{S.SKIPPED}' END,
       skip.reason,
       0, 0, {{next_attempt_expr}}, '', '', '', '[]'::jsonb, now(), '', '', '',
       {{variant_expr}}
  FROM campaigns_contact AS c
  CROSS JOIN LATERAL (SELECT {{skip_reason_expr}} AS reason) AS skip
  {{arm_join}}
  {{schedule_joins}}
 WHERE {{audience_expr}}
ON CONFLICT DO NOTHING
"""  # noqa: S608 - built from constants; the launch's fragments carry only placeholders


def campaign_messages_create(
    *,
    params_expr: str,
    next_attempt_expr: str,
    schedule_joins: str,
    skip_reason_expr: str,
    audience_expr: str,
    args: dict[str, Any],
    number_expr: str = "%(phone_number_id)s",
    template_expr: str = "%(template_id)s",
    arm_join: str = "",
    variant_expr: str = "NULL",
) -> int:
    """Insert the campaign's recipients as messages in one statement; return how many.

    ``args`` holds ``campaign_id``, ``phone_number_id``, ``template_id`` and whatever the
    fragments' own placeholders name (the audience's among them); ``audience_expr`` is who
    the campaign is addressed to and ``skip_reason_expr`` a row's skip reason, both over the
    contact alias ``c`` ('' for a row that goes out); ``number_expr`` picks each row's
    number (over ``c``) for a campaign with a sender pool, ``template_expr`` each row's
    template version for a campaign in many languages; ``arm_join`` and ``variant_expr``
    each row's A/B arm (delivery.campaigns.ab_launch).
    """
    sql = _CAMPAIGN_INSERT_SQL.format(
        params_expr=params_expr,
        number_expr=number_expr,
        template_expr=template_expr,
        next_attempt_expr=next_attempt_expr,
        schedule_joins=schedule_joins,
        skip_reason_expr=skip_reason_expr,
        audience_expr=audience_expr,
        arm_join=arm_join,
        variant_expr=variant_expr,
    )
    return _run(sql, args)


def transactional_message_insert(message: Message) -> Message:
    """Store a transactional message the API built (an Idempotency-Key race raises
    ``IntegrityError`` on the unique index; the caller answers with the winner's row)."""
    if message.kind != MessageKind.TRANSACTIONAL or message.status != S.PENDING:
        raise ValueError("only a pending transactional message is stored this way")
    message.save(force_insert=True)
    return message


@dataclass(frozen=True)
class JourneyMessage:
    """A message a journey's step makes (journeys.sends): a template through the step's
    campaign, or, inside the person's 24-hour window, a free-form text (``kind``
    transactional, no campaign) with its reply buttons in ``params``."""

    kind: str
    campaign_id: int | None
    contact_id: int
    phone_number_id: int
    template_id: int | None
    to: str
    params: dict[str, Any]
    text: str
    journey_instance_id: int
    journey_step: str
    due_at: datetime


# A batch of a journey's sends in one statement, pending and due at their time. ON CONFLICT
# DO NOTHING on the unique (journey_instance_id, journey_step): a step that fired before
# (a sweep's transaction is the only writer, but a retry after a crash must stay harmless)
# inserts nothing and returns nothing, so the caller knows it made no second message.
_JOURNEY_INSERT_SQL = f"""
INSERT INTO delivery_message
       (kind, campaign_id, contact_id, phone_number_id, template_id, "to", params, text,
        status, skip_reason, attempt, pair_limit_hits, next_attempt_at, wa_id,
        last_error_title, last_error_details, error_history, created_at,
        conversation_id, pricing_category, request_sha256, journey_instance_id, journey_step)
SELECT r->>0, (r->>1)::bigint, (r->>2)::bigint, (r->>3)::bigint, (r->>4)::bigint, r->>5,
       r->6, r->>7, '{S.PENDING}', '', 0, 0, (r->>10)::timestamptz, '', '', '', '[]'::jsonb,
       now(), '', '', '', (r->>8)::bigint, r->>9
  FROM jsonb_array_elements(%s::jsonb) AS j(r)
ON CONFLICT DO NOTHING
RETURNING id, journey_instance_id, journey_step
"""  # noqa: S608 - built from constants


def journey_messages_insert(rows: Sequence[JourneyMessage]) -> dict[tuple[int, str], int]:
    """Store a journey's sends; the message id of each (instance, step) inserted."""
    if not rows:
        return {}
    payload = _json_rows(
        [
            (
                r.kind, r.campaign_id, r.contact_id, r.phone_number_id, r.template_id, r.to,
                r.params, r.text, r.journey_instance_id, r.journey_step, _iso(r.due_at),
            )
            for r in rows
        ]
    )  # fmt: skip
    return {(int(i), str(step)): int(m) for m, i, step in _fetch(_JOURNEY_INSERT_SQL, [payload])}


# An instance that left its journey (an exit event, an opt-out, an archived journey): its
# messages still waiting to go are skipped, with the reason. Through the unique
# (journey_instance_id, journey_step) index; locked in id order first (see ``_LOCK_SQL``).
_JOURNEY_SKIP_SQL = f"""
WITH skipped AS (
    SELECT id FROM delivery_message
     WHERE journey_instance_id = ANY(%s::bigint[]) AND send_status = '{S.PENDING}'
     ORDER BY id
       FOR UPDATE
)
UPDATE delivery_message AS m SET status = '{S.SKIPPED}', skip_reason = %s
  FROM skipped k
 WHERE m.id = k.id AND m.status = '{S.PENDING}'
"""  # noqa: S608


def journey_pending_skip(*, instance_ids: Sequence[int], reason: str) -> int:
    """Skip the unsent messages of instances that left their journey; how many."""
    if not instance_ids:
        return 0
    return _run(_JOURNEY_SKIP_SQL, [list(instance_ids), reason[:200]])


# --- claim ---------------------------------------------------------------------------------

# SKIP LOCKED lets any number of workers on any number of hosts claim from the same
# campaign at once without waiting on each other's row locks: each sees only rows nobody
# else is claiming. The inner SELECT walks the partial index message_pending_claim_idx
# (only pending rows, by campaign, number, next_attempt_at: a number's sender claims its
# own rows of each campaign it serves), so the claim costs the same whether the
# campaign has a thousand rows or ten million. The outer UPDATE flips the rows to
# `sending` with a lease timestamp in the same statement: a worker that dies after this
# leaves rows the reconciler finds by their old `claimed_at`.
_CLAIM_CAMPAIGN_SQL = f"""
UPDATE delivery_message AS m
   SET status = '{S.SENDING}', claimed_at = now()
 WHERE m.id IN (
        SELECT id
          FROM delivery_message
         WHERE campaign_id = %(campaign_id)s
           AND (%(phone_number_id)s::bigint IS NULL OR phone_number_id = %(phone_number_id)s)
           AND send_status = '{S.PENDING}'
           AND next_attempt_at <= now()
         ORDER BY next_attempt_at
         LIMIT %(limit)s
           FOR UPDATE SKIP LOCKED)
RETURNING m.id, m."to", m.params, m.attempt, m.pair_limit_hits, m.contact_id, m.template_id
"""  # noqa: S608

# One transactional message by id; the status guard makes a duplicate job a no-op.
_CLAIM_ONE_SQL = f"""
UPDATE delivery_message
   SET status = '{S.SENDING}', claimed_at = now()
 WHERE id = %(message_id)s AND status = '{S.PENDING}'
RETURNING id, "to", params, attempt, pair_limit_hits, contact_id, template_id
"""  # noqa: S608

# Transactional messages that are due, with their attempt (the queue mark is per attempt).
# The partial index message_pending_txn_idx holds only pending transactional rows.
_DUE_TRANSACTIONAL_SQL = f"""
SELECT id, attempt FROM delivery_message
 WHERE kind = '{MessageKind.TRANSACTIONAL}' AND send_status = '{S.PENDING}'
   AND next_attempt_at <= now()
 ORDER BY next_attempt_at
 LIMIT %(limit)s
"""  # noqa: S608


def claim_campaign_batch(
    *, campaign_id: int, limit: int, phone_number_id: int | None = None
) -> list[ClaimedMessage]:
    """Claim up to ``limit`` due rows of the campaign (those of one number when given)."""
    if limit <= 0:
        return []
    args = {"campaign_id": campaign_id, "limit": limit, "phone_number_id": phone_number_id}
    return _claimed(_fetch(_CLAIM_CAMPAIGN_SQL, args))


def claim_message(*, message_id: int) -> ClaimedMessage | None:
    rows = _claimed(_fetch(_CLAIM_ONE_SQL, {"message_id": message_id}))
    return rows[0] if rows else None


def due_transactional(*, limit: int = 1000) -> list[tuple[int, int]]:
    """(id, attempt) of transactional messages due now, oldest first."""
    return [(int(i), int(a)) for i, a in _fetch(_DUE_TRANSACTIONAL_SQL, {"limit": limit})]


# Claimed rows that will not be sent at all (the frequency cap): skipped with the reason,
# their claim cleared. The status guard leaves alone a row something else moved meanwhile.
_CLAIMED_SKIP_SQL = f"""
UPDATE delivery_message
   SET status = '{S.SKIPPED}', skip_reason = %s, claimed_at = NULL
 WHERE id = ANY(%s::bigint[]) AND status = '{S.SENDING}'
"""  # noqa: S608


def claimed_skip(*, ids: Sequence[int], reason: str) -> int:
    """Skip claimed rows with ``reason``; how many were."""
    if not ids:
        return 0
    return int(_run_locked(_CLAIMED_SKIP_SQL, [reason[:200], list(ids)], ids=ids))


# --- release: claimed rows go back untouched ---------------------------------------------

# Rows this worker claimed but will not send now: back to pending without spending an
# attempt. With a time (a closed send window, a messaging limit with no room) the row is
# due again then; without one it keeps its due time. The guard `status = 'sending'` leaves
# alone a row something else already moved (the reconciler took an expired lease).
#
# A row of a campaign cancelled while it was claimed is cancelled here, not put back: the
# cancel only saw pending rows, and a pending row of a cancelled campaign would wait forever.
_RELEASE_SQL = f"""
UPDATE delivery_message AS m
   SET status = CASE WHEN EXISTS (SELECT 1 FROM campaigns_campaign c
                                   WHERE c.id = m.campaign_id
                                     AND c.status = '{CampaignStatus.CANCELLED}')
                     THEN '{S.CANCELLED}' ELSE '{S.PENDING}' END,
       claimed_at = NULL,
       next_attempt_at = coalesce(u.at, m.next_attempt_at)
  FROM unnest(%s::bigint[], %s::timestamptz[]) AS u(id, at)
 WHERE m.id = u.id AND m.status = '{S.SENDING}'
"""  # noqa: S608


def release_messages(*, ids: Sequence[int], at: datetime | Sequence[datetime] | None = None) -> int:
    """Give claimed rows back; due at ``at`` (one time, or one per row) when given."""
    if not ids:
        return 0
    times: list[datetime | None]
    if at is None or isinstance(at, datetime):
        times = [at] * len(ids)
    else:
        times = list(at)
        if len(times) != len(ids):
            raise ValueError("release_messages: one time per row")
    return int(_run_locked(_RELEASE_SQL, [list(ids), times], ids=ids))


# --- record: a batch of send results ------------------------------------------------------

# Every settled row of a batch in one statement. The guard `m.status = 'sending'` (or
# 'unknown' for a success) is what makes this safe against the other writers of the row:
# a status webhook that already moved the message forward, or the reconciler that took
# over an expired lease. Their state wins; this one only fills in the wamid.
#
# A retry (back to pending) of a row whose campaign was cancelled meanwhile is cancelled.
# A success records, with its wamid, whether Meta holds it for quality assessment (one
# more array in the same statement: the batch stays one round trip however it is made up).
_SETTLE_SQL = f"""
UPDATE delivery_message AS m
   SET status = CASE WHEN u.status = '{S.PENDING}'
                      AND EXISTS (SELECT 1 FROM campaigns_campaign c
                                   WHERE c.id = m.campaign_id
                                     AND c.status = '{CampaignStatus.CANCELLED}')
                     THEN '{S.CANCELLED}' ELSE u.status END,
       attempt = u.attempt,
       pair_limit_hits = u.pair_limit_hits,
       next_attempt_at = coalesce(u.next_attempt_at, m.next_attempt_at),
       claimed_at = CASE WHEN u.status = '{S.UNKNOWN}' THEN now()
                         WHEN u.status = '{S.PENDING}' THEN NULL
                         ELSE m.claimed_at END,
       wamid = coalesce(m.wamid, u.wamid),
       wa_id = coalesce(u.wa_id, m.wa_id),
       held_for_quality_assessment = CASE WHEN u.status = '{S.SENT}' THEN u.held
                                          ELSE m.held_for_quality_assessment END,
       sent_at = CASE WHEN u.status = '{S.SENT}' THEN coalesce(m.sent_at, now())
                      ELSE m.sent_at END,
       failed_at = CASE WHEN u.status IN ('{S.FAILED}', '{S.DEAD}') THEN now()
                        ELSE m.failed_at END,
       last_error_code = CASE WHEN u.status = '{S.SENT}' THEN m.last_error_code ELSE u.code END,
       last_error_title = coalesce(u.title, m.last_error_title),
       last_error_details = coalesce(u.details, m.last_error_details),
       error_history = CASE WHEN u.entry IS NULL THEN m.error_history
                            ELSE m.error_history || jsonb_build_array(u.entry) END,
       send_route = coalesce(u.route, m.send_route)
  FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::timestamptz[],
              %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[],
              %s::boolean[], %s::text[])
       AS u(id, status, attempt, pair_limit_hits, next_attempt_at,
            wamid, wa_id, code, title, details, entry, held, route)
 WHERE m.id = u.id
   AND (m.status = '{S.SENDING}' OR (m.status = '{S.UNKNOWN}' AND u.status = '{S.SENT}'))
RETURNING m.id
"""  # noqa: S608

# A success whose row a webhook already moved on (delivered before the response was
# recorded): keep the newer status, still remember the wamid, whether Meta held it, and
# the attempt that sent it (left out, a message sent at the first try read "0 attempts"
# whenever its callback beat the sender's flush, which at speed is most of them).
_LATE_SUCCESS_SQL = """
UPDATE delivery_message AS m
   SET wamid = coalesce(m.wamid, u.wamid),
       wa_id = coalesce(nullif(m.wa_id, ''), u.wa_id),
       held_for_quality_assessment = m.held_for_quality_assessment OR u.held,
       sent_at = coalesce(m.sent_at, now()),
       attempt = greatest(m.attempt, u.attempt),
       send_route = coalesce(u.route, m.send_route)
  FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::boolean[], %s::int[], %s::text[])
       AS u(id, wamid, wa_id, held, attempt, route)
 WHERE m.id = u.id
"""

# Exhausted retries become dead letters, carrying what support needs to decide.
_DEAD_LETTER_SQL = f"""
INSERT INTO delivery_deadletter
       (message_id, campaign_id, phone_number_id, error_code, error_title,
        payload, attempts, status, created_at, note)
SELECT m.id, m.campaign_id, m.phone_number_id, m.last_error_code, m.last_error_title,
       jsonb_build_object('to', m."to", 'params', m.params, 'template_id', m.template_id,
                          'text', m.text),
       m.error_history, 'open', now(), ''
  FROM delivery_message AS m
 WHERE m.id = ANY(%s) AND m.status = '{S.DEAD}'
ON CONFLICT (message_id) WHERE status = 'open' DO NOTHING
"""  # noqa: S608


# Written on the contact a send's 131050 opted out (shown on the customer page).
SEND_OPT_OUT_REASON = "a send was refused: the user stopped marketing messages (131050)"


def settlements_record(
    settlements: Sequence[Settlement], *, opted_out_contact_ids: Sequence[int] = ()
) -> int:
    """Write a batch of settlements; return how many rows took them.

    In the same transaction: dead rows get their dead letters, and the contacts Meta said
    stopped marketing messages (131050) are opted out.
    """
    if not settlements and not opted_out_contact_ids:
        return 0
    columns: list[list[object]] = [[] for _ in range(13)]
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
            s.held_for_quality_assessment,
            s.route,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    dead_ids = [s.message_id for s in settlements if s.status == S.DEAD]
    sent = [s for s in settlements if s.status == S.SENT]
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
                [
                    [s.message_id for s in late],
                    [s.wamid for s in late],
                    [s.wa_id for s in late],
                    [s.held_for_quality_assessment for s in late],
                    [s.attempt for s in late],
                    [s.route for s in late],
                ],
            )
        if dead_ids:
            cursor.execute(_DEAD_LETTER_SQL, [dead_ids])
        if opted_out_contact_ids:
            contacts_opt_out(contact_ids=opted_out_contact_ids, reason=SEND_OPT_OUT_REASON)
    return len(updated)


def transactional_fail(*, message_id: int, reason: str) -> int:
    """A transactional send the configuration cannot make (bad token, missing template):
    failed now, rather than holding an OTP until someone repairs the number."""
    return _run(
        f"UPDATE delivery_message SET status = '{S.FAILED}', failed_at = now(), "  # noqa: S608
        f"last_error_title = %s, claimed_at = NULL WHERE id = %s AND status IN "
        f"('{S.PENDING}', '{S.SENDING}')",
        [reason[:500], message_id],
    )


# --- reconcile: rows in doubt --------------------------------------------------------------

# A `sending` row whose lease expired belonged to a worker that died: its send may or may
# not have reached Meta, so it becomes `unknown`, exactly like a timeout.
_EXPIRE_LEASES_SQL = f"""
WITH expired AS (
    SELECT id FROM delivery_message
     WHERE send_status = '{S.SENDING}'
       AND claimed_at < now() - make_interval(secs => %(lease)s)
     ORDER BY id
       FOR UPDATE
)
UPDATE delivery_message AS m
   SET status = '{S.UNKNOWN}', claimed_at = now(),
       error_history = m.error_history || jsonb_build_array(%(entry)s::jsonb)
  FROM expired e
 WHERE m.id = e.id AND m.status = '{S.SENDING}'
   AND m.claimed_at < now() - make_interval(secs => %(lease)s)
RETURNING m.id
"""  # noqa: S608

# Unknown rows past the evidence window, by policy. The join picks each campaign's
# policy; transactional rows (no campaign) always fail. SKIP LOCKED: a row the applier is
# settling right now is left to it.
_SETTLE_UNKNOWN_SQL = f"""
WITH doubtful AS (
    SELECT m.id,
           CASE WHEN c.ambiguous_policy = 'resend' THEN '{S.PENDING}' ELSE '{S.FAILED}' END
             AS verdict
      FROM delivery_message m
      LEFT JOIN campaigns_campaign c ON c.id = m.campaign_id
     WHERE m.send_status = '{S.UNKNOWN}'
       AND m.claimed_at < now() - make_interval(secs => %(window)s)
     FOR UPDATE OF m SKIP LOCKED
)
UPDATE delivery_message AS m
   SET status = d.verdict,
       claimed_at = NULL,
       next_attempt_at = now(),
       failed_at = CASE WHEN d.verdict = '{S.FAILED}' THEN now() ELSE m.failed_at END,
       last_error_title = CASE WHEN d.verdict = '{S.FAILED}'
                               THEN 'No evidence the send reached Meta'
                               ELSE m.last_error_title END,
       error_history = m.error_history || jsonb_build_array(jsonb_build_object(
           'at', now(), 'outcome', 'ambiguous settled: ' || d.verdict))
  FROM doubtful d
 WHERE m.id = d.id AND m.status = '{S.UNKNOWN}'
RETURNING m.id, d.verdict
"""  # noqa: S608


def leases_expire(*, lease_s: float, entry: dict[str, Any]) -> int:
    """Rows held past their lease become ``unknown``; return how many."""
    return len(_fetch(_EXPIRE_LEASES_SQL, {"entry": json.dumps(entry), "lease": lease_s}))


def unknown_settle(*, window_s: float) -> tuple[int, int]:
    """Settle ``unknown`` rows with no evidence after ``window_s``: (resent, failed)."""
    verdicts = [row[1] for row in _fetch(_SETTLE_UNKNOWN_SQL, {"window": window_s})]
    return verdicts.count(S.PENDING), verdicts.count(S.FAILED)


# --- campaigns: cancel, retry, canary release, opt-outs ---------------------------------------

# Locked in id order first (see ``_LOCK_SQL``). Left to the UPDATE's scan order, a cancel
# during a send deadlocked with the sender recording a batch: the UPDATE re-checks a row
# another transaction changed by locking it first, and keeps that lock even when the row
# no longer matches, so it could hold a batch row the sender was about to lock while
# waiting for one the sender already held.
_CANCEL_SQL = f"""
WITH doomed AS (
    SELECT id FROM delivery_message
     WHERE campaign_id = %s AND send_status = '{S.PENDING}'
     ORDER BY id
       FOR UPDATE
)
UPDATE delivery_message AS m SET status = '{S.CANCELLED}'
  FROM doomed d
 WHERE m.id = d.id AND m.status = '{S.PENDING}'
"""  # noqa: S608


def campaign_pending_cancel(*, campaign_id: int) -> int:
    """Every row of the campaign not yet handed to Meta becomes ``cancelled``.

    Rows in flight (``sending``) finish on their own: their send may already have left.
    """
    return _run(_CANCEL_SQL, [campaign_id])


# A fresh attempt for failed rows whose failure another attempt can fix: attempt counters
# back to zero, the last send's identity and times cleared (its wamid and whether Meta
# held it, so the new send records its own), the history kept and extended. The
# (campaign, send_status) index finds the failed rows; the contact check drops anyone who
# opted out since. 131049 waits out Meta's 24 h from its failure.
_RETRYABLE_WHERE = f"""
 WHERE m.campaign_id = %(campaign_id)s AND m.send_status = '{S.FAILED}'
   AND (m.last_error_code IS NULL OR m.last_error_code = ANY(%(codes)s))
   AND NOT EXISTS (SELECT 1 FROM campaigns_contact c
                    WHERE c.id = m.contact_id AND c.opted_out_at IS NOT NULL)
"""  # noqa: S608

_RETRY_SQL = f"""
WITH retried AS (
    SELECT m.id FROM delivery_message AS m {_RETRYABLE_WHERE} ORDER BY m.id FOR UPDATE OF m
)
UPDATE delivery_message AS m
   SET status = '{S.PENDING}', attempt = 0, pair_limit_hits = 0, claimed_at = NULL,
       next_attempt_at = CASE
           WHEN m.last_error_code = %(user_cap_code)s
           THEN greatest(now(), m.failed_at + make_interval(secs => %(user_cap_wait)s))
           ELSE now() END,
       wamid = NULL, sent_at = NULL, delivered_at = NULL, read_at = NULL, failed_at = NULL,
       held_for_quality_assessment = false,
       error_history = m.error_history || jsonb_build_array(%(entry)s::jsonb)
  FROM retried r
 WHERE m.id = r.id AND m.status = '{S.FAILED}'
"""  # noqa: S608

_RETRYABLE_COUNT_SQL = f"SELECT count(*) FROM delivery_message AS m {_RETRYABLE_WHERE}"  # noqa: S608


def campaign_failed_retry(
    *,
    campaign_id: int,
    codes: Sequence[int],
    user_cap_code: int,
    user_cap_wait_s: float,
    entry: dict[str, Any],
) -> int:
    """Failed rows with a retryable code (or none) become pending again; return how many."""
    return _run(
        _RETRY_SQL,
        {
            "campaign_id": campaign_id,
            "codes": list(codes),
            "user_cap_code": user_cap_code,
            "user_cap_wait": user_cap_wait_s,
            "entry": json.dumps(entry),
        },
    )


def campaign_failed_retryable_count(*, campaign_id: int, codes: Sequence[int]) -> int:
    rows = _fetch(_RETRYABLE_COUNT_SQL, {"campaign_id": campaign_id, "codes": list(codes)})
    return int(rows[0][0])


# Held rows (a canary's: due at a date no claim reaches) back to due, a batch at a time.
# SKIP LOCKED: a cancel running at the same time keeps its rows. The partial pending index
# serves the inner SELECT (held rows sort last).
_HELD_RELEASE_SQL = f"""
UPDATE delivery_message AS m
   SET next_attempt_at = now()
 WHERE m.id IN (SELECT id FROM delivery_message
                 WHERE campaign_id = %(id)s AND send_status = '{S.PENDING}'
                   AND next_attempt_at >= %(hold)s
                 LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED)
"""  # noqa: S608


def held_release(*, campaign_id: int, hold_at: datetime, limit: int) -> int:
    """Make up to ``limit`` of the campaign's held rows due now; return how many."""
    return _run(_HELD_RELEASE_SQL, {"id": campaign_id, "hold": hold_at, "limit": limit})


# An A/B test's remainder (held, no arm) given the winner and made due, a batch at a time:
# its template, and its params rendered again from the winner's mapping over the row's
# contact (``params_expr`` over ``c``, as the launch renders them). As the canary's release:
# SKIP LOCKED, and the partial pending index serves the inner SELECT.
_REMAINDER_RELEASE_SQL = f"""
UPDATE delivery_message AS m
   SET template_id = %(template_id)s, params = {{params_expr}}, next_attempt_at = now()
  FROM campaigns_contact AS c
 WHERE c.id = m.contact_id
   AND m.id IN (SELECT id FROM delivery_message
                 WHERE campaign_id = %(id)s AND send_status = '{S.PENDING}'
                   AND next_attempt_at >= %(hold)s AND variant IS NULL
                 LIMIT %(limit)s
                   FOR UPDATE SKIP LOCKED)
"""  # noqa: S608


def remainder_release(
    *,
    campaign_id: int,
    hold_at: datetime,
    template_id: int,
    params_expr: str,
    params: dict[str, Any],
    limit: int,
) -> int:
    """Send up to ``limit`` of the campaign's held remainder with the winner's template and
    params (``params_expr`` over ``c``, named placeholders in ``params``); how many."""
    sql = _REMAINDER_RELEASE_SQL.format(params_expr=params_expr)
    args = {**params, "id": campaign_id, "hold": hold_at, "template_id": template_id}
    return _run(sql, {**args, "limit": limit})


def campaign_pending_skip_for_contacts(*, contact_ids: Sequence[int], reason: str) -> int:
    """Campaign rows still waiting for contacts who opted out become ``skipped``.

    Transactional messages (codes, receipts) are not marketing and still go out.
    """
    if not contact_ids:
        return 0
    return _run(_SKIP_FOR_CONTACTS_SQL, [list(contact_ids), reason[:200]])


# Locked in id order first (see ``_LOCK_SQL``).
_SKIP_FOR_CONTACTS_SQL = f"""
WITH skipped AS (
    SELECT id FROM delivery_message
     WHERE contact_id = ANY(%s) AND send_status = '{S.PENDING}'
       AND kind = '{MessageKind.CAMPAIGN}'
     ORDER BY id
       FOR UPDATE
)
UPDATE delivery_message AS m SET status = '{S.SKIPPED}', skip_reason = %s
  FROM skipped k
 WHERE m.id = k.id AND m.status = '{S.PENDING}'
"""  # noqa: S608


# --- dead letters ----------------------------------------------------------------------------

# Fresh attempts: back to pending, due now (or at the time support chose), attempt counter
# reset so the campaign's (or the transactional policy's) full retry budget applies again,
# and the engine's backoff spaces them as any first send's. The last life's identity and
# times are cleared (its wamid and whether Meta held it, sent/delivered/read/failed), as a
# retry of failed rows does: the new send records its own, so a later "read" is this send's
# and the page can tell it from the earlier one. The history keeps the earlier attempts and
# records the requeue. The status guard is the race guard: a row another writer moved
# (another agent's requeue, a cancel) is left alone. Support's dead letters come from
# `dead`; a failed row that never reached the dead letters comes from `failed`.
_REQUEUE_SQL = """
UPDATE delivery_message
   SET status = '{pending}', attempt = 0, pair_limit_hits = 0,
       next_attempt_at = greatest(now(), coalesce(%(at)s::timestamptz, now())),
       claimed_at = NULL,
       wamid = NULL, sent_at = NULL, delivered_at = NULL, read_at = NULL, failed_at = NULL,
       held_for_quality_assessment = false,
       error_history = error_history || jsonb_build_array(%(entry)s::jsonb)
 WHERE id = ANY(%(ids)s) AND status = '{from_status}'
RETURNING id
"""
_DEAD_REQUEUE_SQL = _REQUEUE_SQL.format(pending=S.PENDING, from_status=S.DEAD)
_FAILED_REQUEUE_SQL = _REQUEUE_SQL.format(pending=S.PENDING, from_status=S.FAILED)


def dead_requeue(
    *, ids: Sequence[int], entry: dict[str, Any], at: datetime | None = None
) -> list[int]:
    """Dead rows back to pending with fresh attempts, due ``at`` (now when None or past);
    the ids of the rows it moved."""
    args = {"ids": list(ids), "entry": json.dumps(entry), "at": at}
    return [int(row[0]) for row in _run_locked(_DEAD_REQUEUE_SQL, args, ids=ids, fetch=True)]


def failed_requeue(
    *, ids: Sequence[int], entry: dict[str, Any], at: datetime | None = None
) -> list[int]:
    """Failed rows (no dead letter) back to pending, as ``dead_requeue``; the ids moved."""
    args = {"ids": list(ids), "entry": json.dumps(entry), "at": at}
    return [int(row[0]) for row in _run_locked(_FAILED_REQUEUE_SQL, args, ids=ids, fetch=True)]


# --- status callbacks ------------------------------------------------------------------------

# Rank of a message's current state. Open states (pending, sending, unknown) rank below
# `sent`: any callback is evidence the send went out, which settles an ambiguous send. So
# does `cancelled`: a row cancelled after an ambiguous attempt (put back to pending, then
# its campaign cancelled) may have reached Meta after all, and Meta's word that it was
# delivered is what the report and the bill must show. States absent here (dead, skipped)
# are final and never moved by a callback.
CURRENT_RANK: dict[str, int] = {**{s: 0 for s in OPEN_STATUSES}, S.CANCELLED: 0, **STATUS_RANK}
# Statuses a callback can move a message to; `played` (voice) and anything unknown are
# counted in the event's summary but change nothing.
APPLIED_STATUSES = frozenset(s for s, rank in STATUS_RANK.items() if rank > 0)


def statuses_lock(*, ids: Sequence[int], wamids: Sequence[str]) -> list[tuple[int, str | None]]:
    """Lock the messages these ids or wamids name, in id order; (id, wamid) of each.

    Locking in id order means two appliers (or an applier and the sender's bulk write)
    touching the same messages queue behind each other instead of deadlocking.
    """
    return _fetch(  # (bigint, text) rows as psycopg reads them
        """
            SELECT id, wamid FROM delivery_message
            WHERE id = ANY(%s::bigint[])
               OR wamid = ANY(%s::text[])
            ORDER BY id
            FOR UPDATE
            """,
        # Both as array literals: two strings to bind instead of an element-by-element
        # dump of thousands of values.
        [array_literal(str(int(i)) for i in ids), array_literal(map(array_text, wamids))],
    )


def _rank_sql(column: str) -> str:
    cases = " ".join(f"WHEN '{status}' THEN {rank}" for status, rank in CURRENT_RANK.items())
    return f"(CASE {column} {cases} END)"


_RANK_NEW = _rank_sql("u.status")
_RANK_OLD = _rank_sql("m.status")
_ADVANCES = f"{_RANK_NEW} > {_RANK_OLD}"
_FAILS = f"({_ADVANCES} AND u.status = '{S.FAILED}')"

# One statement per batch, whatever its size: a row per message is ~7x slower (a round trip
# and a commit each) and would let a late callback race an earlier one. The batch travels
# as one JSON array of rows: json.dumps builds it in C, where binding thirteen arrays
# quoted every element in Python (a third of the applier's time). It is read as jsonb:
# PostgreSQL folds the subquery into the UPDATE, so every `u.status` below is an `r->>1`
# evaluated where it stands (a dozen times a row), which on json text re-parses the row
# each time and on jsonb is a lookup: 39 µs a row against 24 µs (12,000 rows, EXPLAIN
# ANALYZE, same machine).
# - The status moves only forward: rank(new) > rank(current). Rank is NULL for final states
#   (dead, skipped), and NULL > x is never true, so they are not touched.
# - Timestamps, the wamid and the billing fields only fill blanks, so a late `delivered`
#   still records its time and pricing under a `read` without moving the status back.
#   (A wamid is offered only when no row holds it yet: see webhooks.statuses.)
# - The failure is written only when `failed` is the status being applied, and appended to
#   the row's error history, so a failed callback arriving after `delivered` changes nothing.
# - The WHERE clause lets through only rows that gain something: re-applying the same batch
#   updates no row, which keeps it idempotent and cheap.
_STATUS_UPDATE_SQL = f"""
UPDATE delivery_message AS m SET
    status = CASE WHEN {_ADVANCES} THEN u.status ELSE m.status END,
    wamid = COALESCE(m.wamid, u.wamid),
    sent_at = COALESCE(m.sent_at, u.sent_at),
    delivered_at = COALESCE(m.delivered_at, u.delivered_at),
    read_at = COALESCE(m.read_at, u.read_at),
    failed_at = CASE WHEN {_FAILS} THEN u.failed_at ELSE m.failed_at END,
    last_error_code = CASE WHEN {_FAILS} THEN u.error_code ELSE m.last_error_code END,
    last_error_title = CASE
        WHEN {_FAILS} THEN COALESCE(u.error_title, '') ELSE m.last_error_title END,
    last_error_details = CASE
        WHEN {_FAILS} THEN COALESCE(u.error_details, '') ELSE m.last_error_details END,
    error_history = CASE WHEN {_FAILS} THEN m.error_history || jsonb_build_array(
        jsonb_build_object(
            'at', u.failed_at, 'attempt', m.attempt, 'code', u.error_code,
            'title', u.error_title, 'details', u.error_details, 'outcome', 'failed_callback'))
        ELSE m.error_history END,
    conversation_id = COALESCE(NULLIF(m.conversation_id, ''), u.conversation_id, ''),
    pricing_category = COALESCE(NULLIF(m.pricing_category, ''), u.pricing_category, ''),
    billable = COALESCE(m.billable, u.billable),
    pricing_model = COALESCE(NULLIF(m.pricing_model, ''), u.pricing_model, ''),
    pricing_type = COALESCE(NULLIF(m.pricing_type, ''), u.pricing_type, '')
FROM (
    SELECT (r->>0)::bigint AS id, r->>1 AS status, r->>2 AS wamid,
           (r->>3)::timestamptz AS sent_at, (r->>4)::timestamptz AS delivered_at,
           (r->>5)::timestamptz AS read_at, (r->>6)::timestamptz AS failed_at,
           (r->>7)::integer AS error_code, r->>8 AS error_title, r->>9 AS error_details,
           r->>10 AS conversation_id, r->>11 AS pricing_category, (r->>12)::boolean AS billable,
           r->>13 AS pricing_model, r->>14 AS pricing_type
    FROM jsonb_array_elements(%s::jsonb) AS j(r)
) AS u
WHERE m.id = u.id
  AND {_RANK_OLD} IS NOT NULL
  AND (
      {_ADVANCES}
      OR (m.wamid IS NULL AND u.wamid IS NOT NULL)
      OR (m.sent_at IS NULL AND u.sent_at IS NOT NULL)
      OR (m.delivered_at IS NULL AND u.delivered_at IS NOT NULL)
      OR (m.read_at IS NULL AND u.read_at IS NOT NULL)
      OR (m.conversation_id = '' AND u.conversation_id IS NOT NULL)
      OR (m.pricing_category = '' AND u.pricing_category IS NOT NULL)
      OR (m.billable IS NULL AND u.billable IS NOT NULL)
      OR (m.pricing_type = '' AND u.pricing_type IS NOT NULL)
  )
RETURNING m.id, m.contact_id, m.campaign_id, m.template_id, m.phone_number_id,
          u.status = '{S.FAILED}' AND m.status = '{S.FAILED}' AND m.failed_at = u.failed_at
              AS newly_failed,
          m.last_error_code, m.last_error_title
"""  # noqa: S608

# The UPDATE above answers one row: how many rows it changed, and the few it moved to
# failed. Returning every changed row (eight columns, tens of thousands a batch) only to
# count them cost the applier 4 % of a drain in fetching.
_STATUS_UPDATE_COUNTED_SQL = f"""
WITH changed AS ({_STATUS_UPDATE_SQL})
SELECT count(*),
       COALESCE(jsonb_agg(jsonb_build_array(
           id, contact_id, campaign_id, template_id, phone_number_id,
           last_error_code, last_error_title)) FILTER (WHERE newly_failed), '[]')
FROM changed
"""  # noqa: S608


def status_updates_apply(
    updates: Sequence[MessageUpdate], *, newly_failed: list[NewlyFailed] | None = None
) -> int:
    """Apply reduced status callbacks in one statement; return how many rows changed.

    ``newly_failed`` collects the rows this statement moved to ``failed`` (a re-applied
    callback changes no row, so its effects are not applied twice).
    """
    if not updates:
        return 0
    rows = [
        (
            u.message_id,
            u.status,
            u.wamid,
            _iso(u.sent_at),
            _iso(u.delivered_at),
            _iso(u.read_at),
            _iso(u.failed_at),
            u.error_code,
            u.error_title,
            u.error_details,
            u.conversation_id,
            u.pricing_category,
            u.billable,
            u.pricing_model,
            u.pricing_type,
        )
        for u in updates
    ]
    [(changed, failed)] = _fetch(_STATUS_UPDATE_COUNTED_SQL, [_json_rows(rows)])
    if newly_failed is not None:
        newly_failed.extend(NewlyFailed(*row) for row in jsonb_value(failed))
    return int(changed)


# --- erasure ---------------------------------------------------------------------------------

# One person erased (webhooks.erasure): their messages stay, so every count and report
# still adds up, but nothing in them names the person.
# - ``to`` becomes the erasure's placeholder, the same for all of the person's rows: a
#   campaign still holds one row per recipient (the unique (campaign, to) holds, a person
#   gets a campaign once), and reach and reports still count one person.
# - The wamid becomes ``<placeholder>.<id>``: Meta's wamids carry the recipient's number
#   (base64), so the real one must go; a placeholder rather than NULL, so a late status
#   callback (which finds the row by its ``wb:<id>`` callback data) does not write the
#   real one back (the applier fills only a NULL wamid), and the webhooks side rewrites
#   the replies' context_wamid to the same value, so a tap is still placed on its message.
# - The rendered params and the free-form text (names, codes, whatever was sent), Meta's
#   wa_id (the number), the error details (Meta's prose may quote the number) and the
#   request's Idempotency-Key and body hash (both derived from what the caller sent) are
#   cleared; the status, times, prices, error codes and titles stay.
# - The contact link is cut (the contact row is deleted next).
# - A row still pending will never go out: it becomes ``skipped`` (to a placeholder it
#   could not be sent). Rows in flight (sending, unknown) keep their status: their
#   sender or the reconciler settles them.
# Rows are found by the contact, and API sends (no contact) by their recipient among the
# API's rows (the partial api_key index), as the customer page finds them; locked in id
# order first (see ``_LOCK_SQL``).
_ANONYMISE_SQL = f"""
WITH erased AS (
    SELECT id FROM delivery_message
     WHERE contact_id = %(contact_id)s
        OR (api_key_id IS NOT NULL AND "to" = ANY(%(recipients)s::text[]))
     ORDER BY id
       FOR UPDATE
)
UPDATE delivery_message AS m
   SET "to" = %(placeholder)s,
       contact_id = NULL,
       wamid = CASE WHEN m.wamid IS NULL THEN NULL ELSE %(placeholder)s || '.' || m.id END,
       wa_id = '',
       params = '{{}}'::jsonb,
       text = '',
       last_error_details = '',
       error_history = CASE WHEN jsonb_typeof(m.error_history) = 'array' THEN (
           SELECT COALESCE(jsonb_agg(
                      CASE WHEN jsonb_typeof(h.entry) = 'object' THEN h.entry - 'details'
                           ELSE h.entry END
                      ORDER BY h.n), '[]'::jsonb)
             FROM jsonb_array_elements(m.error_history) WITH ORDINALITY AS h(entry, n)
       ) ELSE '[]'::jsonb END,
       idempotency_key = NULL,
       request_sha256 = '',
       status = CASE WHEN m.status = '{S.PENDING}' THEN '{S.SKIPPED}' ELSE m.status END,
       skip_reason = CASE WHEN m.status = '{S.PENDING}' THEN %(reason)s ELSE m.skip_reason END
  FROM erased AS e
 WHERE m.id = e.id
"""  # noqa: S608


def messages_anonymise(
    *, contact_id: int, recipients: Sequence[str], placeholder: str, reason: str
) -> int:
    """The person's messages (the contact's, and API sends to ``recipients``) kept for the
    counts with nothing that names them: ``to`` becomes ``placeholder``, a wamid
    ``<placeholder>.<id>``; pending rows are skipped for ``reason``. How many rows."""
    with transaction.atomic():
        return _run(
            _ANONYMISE_SQL,
            {
                "contact_id": contact_id,
                "recipients": list(recipients),
                "placeholder": placeholder,
                "reason": reason[:200],
            },
        )
