"""Support's decisions on dead letters: requeue (fresh attempts) or discard, both audited.

Both take many entries at once (the admin's bulk actions select thousands) and cost a few
statements whatever their number. Each entry is decided once: entries another agent
already requeued or discarded are skipped, not decided twice, and every decision writes a
``SupportAction`` row naming who, what, when and why, and an admin ``LogEntry`` (the
entry's History page, the home page's Recent actions).

A requeue is due now or at a time support chooses; its fresh attempts are spaced by the
engine's retry backoff like any send's. Failed messages that never reached the dead
letters (a permanent error, a failure Meta reported later) can be requeued too, with the
same guards, each refusal named (``message_failed_requeue``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Max, Model
from django.db.models.functions import TruncDate
from django.utils import timezone

from delivery.cloud.client import SendRequest, build_message_body
from delivery.engine import dispatch
from delivery.messages import dead_requeue, failed_requeue
from delivery.models import DeadLetter, DeadLetterStatus, Message, MessageKind, MessageStatus
from whatsblast.core import queues

logger = logging.getLogger(__name__)

NOTE_MAX_LENGTH = 2000
# How far ahead a requeue may be due: past this a requeue is a campaign of its own.
REQUEUE_AT_MAX_DAYS = 30
# A chosen time this little in the past (the form was open a moment) means "now".
REQUEUE_AT_GRACE = timedelta(minutes=2)
# The outcome recorded in the message's history: the page finds the requeue by it.
REQUEUED_OUTCOME = "requeued by support"

# Open entries and what a requeue needs to know about each, locked so that two agents
# deciding the same entries at once queue behind each other; the second finds them no
# longer open and skips them. Locked in id order, as every writer here does.
_LOCK_OPEN_SQL = """
SELECT d.id, d.message_id, m.kind, m.campaign_id
  FROM delivery_deadletter AS d
  JOIN delivery_message AS m ON m.id = d.message_id
 WHERE d.id = ANY(%s) AND d.status = 'open'
 ORDER BY d.id
   FOR UPDATE OF d
"""

# Their campaigns' states, held until the commit: a cancel running at the same moment
# (it locks the campaign FOR UPDATE) waits, so no row becomes pending in a campaign that
# was just cancelled.
_CAMPAIGNS_LOCK_SQL = """
SELECT id, status FROM campaigns_campaign WHERE id = ANY(%s) ORDER BY id FOR SHARE
"""

_RESOLVE_SQL = """
UPDATE delivery_deadletter
   SET status = %(status)s, resolved_at = now(), resolved_by_id = %(user_id)s, note = %(note)s
 WHERE id = ANY(%(ids)s)
"""

# A completed campaign no longer has a sender; its requeued rows need it running again.
# Paused campaigns stay paused: their rows wait for the resume.
_CAMPAIGNS_REOPEN_SQL = """
UPDATE campaigns_campaign
   SET status = 'running', completed_at = NULL, status_reason = '', updated_at = now()
 WHERE id = ANY(%s) AND status = 'completed'
"""

_AUDIT_SQL = """
INSERT INTO delivery_supportaction (dead_letter_id, action, user_id, username, note, created_at)
SELECT id, %(action)s, %(user_id)s, %(username)s, %(note)s, now()
  FROM unnest(%(ids)s::bigint[]) AS id
"""


@dataclass
class DeadLetterDecision:
    """What a requeue or discard did."""

    done: int = 0
    # Already requeued or discarded by someone else (or gone) by the time of the decision.
    skipped_resolved: int = 0
    # Their campaign was cancelled: sending now would contradict the cancel.
    skipped_cancelled: int = 0
    campaigns_kicked: list[int] = field(default_factory=list)
    transactional_queued: int = 0

    def summary(self, verb: str) -> str:
        parts = [f"{self.done} dead letter(s) {verb}"]
        if self.skipped_resolved:
            parts.append(f"{self.skipped_resolved} skipped: no longer open")
        if self.skipped_cancelled:
            parts.append(f"{self.skipped_cancelled} skipped: campaign cancelled")
        return "; ".join(parts) + "."


def dead_letter_requeue(
    *,
    dead_letters: Iterable[DeadLetter | int],
    user: AbstractBaseUser | AnonymousUser,
    note: str = "",
    at: datetime | None = None,
) -> DeadLetterDecision:
    """Give the entries' messages fresh attempts, due now or ``at``, and get them sent.

    Each message goes back to ``pending`` with ``attempt`` 0, due at ``at`` (now when
    None), its last send's identity and times cleared; its entry becomes ``requeued``
    (resolved by ``user``). The engine's backoff spaces the fresh attempts. After the
    commit, campaigns with requeued rows are kicked (a completed one is running again
    first) and transactional messages are queued (for their due time). Entries of a
    cancelled campaign are skipped.
    """
    note = _note_clean(note)
    due = requeue_due_clean(at)
    ids = _ids(dead_letters)
    decision = DeadLetterDecision()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_OPEN_SQL, [ids])
        rows = cursor.fetchall()
        decision.skipped_resolved = len(ids) - len(rows)
        cursor.execute(_CAMPAIGNS_LOCK_SQL, [sorted({r[3] for r in rows if r[3] is not None})])
        campaign_status = dict(cursor.fetchall())
        live = [r for r in rows if campaign_status.get(r[3]) != "cancelled"]
        decision.skipped_cancelled = len(rows) - len(live)
        if not live:
            return decision
        entry_ids = [r[0] for r in live]
        campaign_ids = sorted({r[3] for r in live if r[3] is not None})
        transactional_ids = [r[1] for r in live if r[2] == MessageKind.TRANSACTIONAL]
        _resolve(cursor, entry_ids, status="requeued", user=user, note=note)
        dead_requeue(ids=[r[1] for r in live], entry=_requeue_entry(user, note, due), at=due)
        _history_log(user, DeadLetter, entry_ids, _requeue_words(due, note))
        running = _campaigns_reopen(cursor, campaign_ids, campaign_status)
        decision.done = len(entry_ids)
        decision.transactional_queued = len(transactional_ids)
        decision.campaigns_kicked = running
        delay_s = _delay_s(due)
        queues.after_commit(
            lambda: _dispatch(running, transactional_ids, delay_s), what="requeued dead letters"
        )
    logger.info("%s requeued %s dead letter(s)", _username(user), decision.done)
    return decision


def requeue_due_clean(at: datetime | None) -> datetime | None:
    """The due time of a requeue: None (now) for no time or one a moment ago; refused when
    long past or more than ``REQUEUE_AT_MAX_DAYS`` ahead."""
    if at is None:
        return None
    now = timezone.now()
    if at < now - REQUEUE_AT_GRACE:
        raise ValidationError("That time has passed: choose a later one, or requeue now.")
    if at > now + timedelta(days=REQUEUE_AT_MAX_DAYS):
        raise ValidationError(f"Choose a time within the next {REQUEUE_AT_MAX_DAYS} days.")
    return at if at > now else None


def _requeue_entry(
    user: AbstractBaseUser | AnonymousUser, note: str, due: datetime | None
) -> dict[str, Any]:
    """The requeue's line in the message's history: who, when, due when, why."""
    now = timezone.now()
    return {
        "at": now.isoformat(),
        "attempt": 0,
        "outcome": REQUEUED_OUTCOME,
        "by": _username(user),
        "due_at": (due or now).isoformat(),
        "title": f"requeued by {_username(user)}" + (f": {note}" if note else ""),
    }


def _requeue_words(due: datetime | None, note: str) -> str:
    """The History page's line for a requeue."""
    when = (
        "due now"
        if due is None
        else f"due {timezone.localtime(due):%Y-%m-%d %H:%M %Z}"  # the server's zone, named
    )
    return f"Requeued with fresh attempts, {when}." + (f" Note: {note}" if note else "")


def _campaigns_reopen(cursor: Any, campaign_ids: list[int], status: dict[int, str]) -> list[int]:
    """Completed campaigns running again for their requeued rows; the ones to kick.
    Paused campaigns are not kicked: their rows wait for the resume."""
    cursor.execute(_CAMPAIGNS_REOPEN_SQL, [campaign_ids])
    return [c for c in campaign_ids if status[c] in ("running", "completed")]


def _delay_s(due: datetime | None) -> float:
    return 0.0 if due is None else max(0.0, (due - timezone.now()).total_seconds())


def _history_log(
    user: AbstractBaseUser | AnonymousUser, model: type[Model], ids: list[int], words: str
) -> None:
    """One admin ``LogEntry`` per object (its History page, the home page's Recent
    actions), in the decision's transaction. A decision made by no one (a script) has no
    user for the log: its ``SupportAction`` rows and the message history still say it."""
    if not user.is_authenticated or not ids:
        return
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=model._default_manager.filter(pk__in=ids).order_by("pk"),
        action_flag=CHANGE,
        change_message=words,
    )


def dead_letter_discard(
    *, dead_letters: Iterable[DeadLetter | int], user: AbstractBaseUser | AnonymousUser, note: str
) -> DeadLetterDecision:
    """Close the entries for good: their messages stay dead. The note says why (required)."""
    note = _note_clean(note)
    if not note:
        raise ValidationError("Say why these dead letters are discarded: a note is required.")
    ids = _ids(dead_letters)
    decision = DeadLetterDecision()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_OPEN_SQL, [ids])
        entry_ids = [r[0] for r in cursor.fetchall()]
        decision.skipped_resolved = len(ids) - len(entry_ids)
        if entry_ids:
            _resolve(cursor, entry_ids, status="discarded", user=user, note=note)
            _history_log(
                user, DeadLetter, entry_ids, f"Discarded: the message stays dead. Note: {note}"
            )
        decision.done = len(entry_ids)
    logger.info("%s discarded %s dead letter(s)", _username(user), decision.done)
    return decision


def dead_letter_request(*, message: Message) -> dict[str, Any]:
    """The request the engine sends for ``message``: method, URL and JSON body.

    Built by the same function as the real send; the access token goes in a header the
    client adds, so it is in neither the URL nor the body shown here.
    """
    number = message.phone_number
    template = message.template
    request = SendRequest(
        base_url=str(number.api_base_url or settings.WHATSAPP_API_BASE_URL),
        phone_number_id=number.phone_number_id,
        access_token="",
        to=message.to,
        callback_data=message.callback_data,
        template_name=template.name if template else None,
        language=template.language if template else None,
        params=message.params or None,
        text=message.text or None,
    )
    try:
        body: dict[str, Any] | str = build_message_body(request)
    except (ValueError, KeyError, TypeError) as exc:
        body = f"cannot be rendered: {exc}"
    url = (
        f"{request.base_url.rstrip('/')}/{settings.WHATSAPP_API_VERSION}/"
        f"{request.phone_number_id}/messages"
    )
    return {"method": "POST", "url": url, "body": body}


def _resolve(
    cursor: Any, ids: list[int], *, status: str, user: AbstractBaseUser | AnonymousUser, note: str
) -> None:
    user_id = user.pk if user.is_authenticated else None
    cursor.execute(_RESOLVE_SQL, {"status": status, "user_id": user_id, "note": note, "ids": ids})
    cursor.execute(
        _AUDIT_SQL,
        {
            "action": status,
            "user_id": user_id,
            "username": _username(user),
            "note": note,
            "ids": ids,
        },
    )


def _dispatch(campaign_ids: list[int], transactional_ids: list[int], delay_s: float = 0.0) -> None:
    # A campaign's rows due later are claimed when due: the tick gives a running
    # campaign's number a sender whenever it has due work.
    for campaign_id in campaign_ids:
        dispatch.campaign_kick(campaign_id=campaign_id)
    # Not through dispatch.transactional_enqueue: its once-per-attempt mark for attempt 0
    # still stands for minutes after the original send, and would swallow this fresh one.
    for message_id in transactional_ids:
        dispatch.transactional_enqueue_again(message_id=message_id, attempt=0, delay_s=delay_s)


def _ids(dead_letters: Iterable[DeadLetter | int]) -> list[int]:
    return sorted({d if isinstance(d, int) else d.pk for d in dead_letters})


def _note_clean(note: str) -> str:
    note = (note or "").strip()
    if len(note) > NOTE_MAX_LENGTH:
        raise ValidationError(f"The note is too long: at most {NOTE_MAX_LENGTH} characters.")
    return note


def _username(user: AbstractBaseUser | AnonymousUser) -> str:
    return str(user.get_username()) if user.is_authenticated else "system"


# --- failed messages that never reached the dead letters ---------------------------------------

# The messages and what the guards need, locked in id order (as the webhook applier and
# the senders lock them) so that a callback or a second agent queues behind this decision
# and the status read here is the one the requeue's own guard (status = 'failed') sees.
_LOCK_MESSAGES_SQL = """
SELECT m.id, m.status, m.kind, m.campaign_id, m.last_error_code,
       c.opted_out_at IS NOT NULL AS opted_out
  FROM delivery_message AS m
  LEFT JOIN campaigns_contact AS c ON c.id = m.contact_id
 WHERE m.id = ANY(%s)
 ORDER BY m.id
   FOR UPDATE OF m
"""

# 131050: the user stopped marketing messages; sending again would ignore them.
OPTED_OUT_CODE = 131050


@dataclass
class FailedRequeue:
    """What a requeue of failed messages did: the ids requeued, and why each other was not."""

    requeued: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    campaigns_kicked: list[int] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{len(self.requeued)} failed message(s) requeued"]
        reasons: dict[str, list[int]] = {}
        for message_id, reason in sorted(self.refused.items()):
            reasons.setdefault(reason, []).append(message_id)
        for reason, ids in reasons.items():
            shown = ", ".join(f"#{i}" for i in ids[:10]) + (" …" if len(ids) > 10 else "")
            parts.append(f"{len(ids)} not requeued ({reason}): {shown}")
        return "; ".join(parts) + "."


def message_failed_requeue(
    *,
    messages: Iterable[Message | int],
    user: AbstractBaseUser | AnonymousUser,
    note: str = "",
    at: datetime | None = None,
) -> FailedRequeue:
    """Give failed messages fresh attempts, as a dead letter's requeue does.

    Refused, each with the reason: a message no longer failed (already sent again, or
    requeued by someone else), a dead one (its dead letter is the place), a recipient who
    opted out (or whose failure was the 131050 opt-out), a cancelled campaign.
    """
    note = _note_clean(note)
    due = requeue_due_clean(at)
    ids = sorted({m if isinstance(m, int) else m.pk for m in messages})
    result = FailedRequeue()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_MESSAGES_SQL, [ids])
        rows = cursor.fetchall()
        for missing in set(ids) - {r[0] for r in rows}:
            result.refused[missing] = "no such message"
        cursor.execute(_CAMPAIGNS_LOCK_SQL, [sorted({r[3] for r in rows if r[3] is not None})])
        campaign_status = dict(cursor.fetchall())
        live = []
        for message_id, status, kind, campaign_id, code, opted_out in rows:
            reason = _failed_refusal(status, opted_out, code, campaign_status.get(campaign_id))
            if reason:
                result.refused[message_id] = reason
            else:
                live.append((message_id, kind, campaign_id))
        if not live:
            return result
        moved = set(
            failed_requeue(ids=[r[0] for r in live], entry=_requeue_entry(user, note, due), at=due)
        )
        live = [r for r in live if r[0] in moved]
        result.requeued = [r[0] for r in live]
        _history_log(user, Message, result.requeued, _requeue_words(due, note))
        campaign_ids = sorted({r[2] for r in live if r[2] is not None})
        running = _campaigns_reopen(cursor, campaign_ids, campaign_status)
        result.campaigns_kicked = running
        transactional_ids = [r[0] for r in live if r[1] == MessageKind.TRANSACTIONAL]
        delay_s = _delay_s(due)
        queues.after_commit(
            lambda: _dispatch(running, transactional_ids, delay_s), what="requeued failed messages"
        )
    logger.info("%s requeued %s failed message(s)", _username(user), len(result.requeued))
    return result


def _failed_refusal(
    status: str, opted_out: bool, code: int | None, campaign_status: str | None
) -> str:
    """Why a message cannot be requeued, or "" when it can."""
    if status == MessageStatus.DEAD:
        return "dead: requeue its dead letter"
    if status != MessageStatus.FAILED:
        if status in (MessageStatus.PENDING, MessageStatus.SENDING, MessageStatus.UNKNOWN):
            return "already being sent again"
        if status in (MessageStatus.SENT, MessageStatus.DELIVERED, MessageStatus.READ):
            return "already sent again"
        return f"not failed: {MessageStatus(status).label.lower()}"
    if opted_out or code == OPTED_OUT_CODE:
        return "the recipient opted out"
    if campaign_status == "cancelled":
        return "campaign cancelled"
    return ""


# --- what support looks at first: by error, and over time --------------------------------------

SUMMARY_DAYS = 14


def dead_letter_summary(
    *, status: str | None = DeadLetterStatus.OPEN, days: int = SUMMARY_DAYS
) -> dict[str, Any]:
    """Dead letters by error code (most first, with a title seen for each) and per day over
    the last ``days`` days: two grouped queries over the status/code and created indexes.
    ``status`` None counts every entry."""
    base = DeadLetter.objects.all() if status is None else DeadLetter.objects.filter(status=status)
    by_error = [
        {"code": r["error_code"], "title": r["title"] or "", "count": r["count"]}
        for r in base.values("error_code")
        .annotate(count=Count("id"), title=Max("error_title"))
        .order_by("-count", "error_code")[:10]
    ]
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    per_day = dict(
        base.filter(created_at__gte=start)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values_list("day")
        .annotate(count=Count("id"))
        .order_by()
    )
    series = [
        {"day": first + timedelta(days=i), "count": int(per_day.get(first + timedelta(days=i), 0))}
        for i in range(days)
    ]
    return {"by_error": by_error, "per_day": series, "days": days}
