"""Support's decisions on dead letters: requeue (fresh attempts) or discard, both audited.

Both take many entries at once (the admin's bulk actions select thousands) and cost a few
statements whatever their number. Each entry is decided once: entries another agent
already requeued or discarded are skipped, not decided twice, and every decision writes a
``SupportAction`` row naming who, what, when and why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Max
from django.db.models.functions import TruncDate
from django.utils import timezone

from delivery.cloud.client import SendRequest, build_message_body
from delivery.engine import dispatch
from delivery.messages import dead_requeue
from delivery.models import DeadLetter, DeadLetterStatus, Message, MessageKind
from whatsblast.core import queues

logger = logging.getLogger(__name__)

NOTE_MAX_LENGTH = 2000

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
) -> DeadLetterDecision:
    """Give the entries' messages fresh attempts, now, and get them sent.

    Each message goes back to ``pending`` with ``attempt`` 0 and ``next_attempt_at`` now;
    its entry becomes ``requeued`` (resolved by ``user``). After the commit, campaigns
    with requeued rows are kicked (a completed one is running again first) and
    transactional messages are queued. Entries of a cancelled campaign are skipped.
    """
    note = _note_clean(note)
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
        entry = {
            "at": timezone.now().isoformat(),
            "attempt": 0,
            "outcome": "requeued by support",
            "title": f"requeued by {_username(user)}" + (f": {note}" if note else ""),
        }
        dead_requeue(ids=[r[1] for r in live], entry=entry)
        cursor.execute(_CAMPAIGNS_REOPEN_SQL, [campaign_ids])
        # Paused campaigns are not kicked: their rows wait for the resume.
        running = [c for c in campaign_ids if campaign_status[c] in ("running", "completed")]
        decision.done = len(entry_ids)
        decision.transactional_queued = len(transactional_ids)
        decision.campaigns_kicked = running
        queues.after_commit(
            lambda: _dispatch(running, transactional_ids), what="requeued dead letters"
        )
    logger.info("%s requeued %s dead letter(s)", _username(user), decision.done)
    return decision


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


def _dispatch(campaign_ids: list[int], transactional_ids: list[int]) -> None:
    for campaign_id in campaign_ids:
        dispatch.campaign_kick(campaign_id=campaign_id)
    # Not through dispatch.transactional_enqueue: its once-per-attempt mark for attempt 0
    # still stands for minutes after the original send, and would swallow this fresh one.
    for message_id in transactional_ids:
        dispatch.transactional_enqueue_again(message_id=message_id, attempt=0)


def _ids(dead_letters: Iterable[DeadLetter | int]) -> list[int]:
    return sorted({d if isinstance(d, int) else d.pk for d in dead_letters})


def _note_clean(note: str) -> str:
    note = (note or "").strip()
    if len(note) > NOTE_MAX_LENGTH:
        raise ValidationError(f"The note is too long: at most {NOTE_MAX_LENGTH} characters.")
    return note


def _username(user: AbstractBaseUser | AnonymousUser) -> str:
    return str(user.get_username()) if user.is_authenticated else "system"


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
