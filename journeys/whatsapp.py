"""What WhatsApp tells the journeys, through the webhook: replies, and Meta's per-user
marketing limit.

**Replies.** Every message a known person sends becomes a ``whatsapp.reply`` event
(webhooks.inbound calls ``replies_record`` in the applier's transaction): routed with
the API's events, in order, it ends waits for a reply (the instance goes on to
``on_reply`` with what was said, for a branch on a tapped button), can be an exit event
or an entry, and counts for a branch on "replied". Its dedupe key is the message's wamid,
so Meta redelivering the callback records it once. Nothing is written while no journey
is live or paused.

**131049.** Meta refusing a journey's marketing send to a person it judges to have had
enough does not fail the step: the contact is held (delivery.marketing_holds: no marketing
step of any journey before 24 h have passed), and the message is put back, due when the
hold ends, as a retry of the same message (one message per instance and step, still):
an exit event meanwhile (a checkout) skips it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from delivery.marketing_holds import HOLD
from delivery.messages import failed_requeue
from delivery.models import Message
from journeys.definition import REPLY_EVENT
from journeys.models import HistoryKind, Journey, JourneyStatus


@dataclass(frozen=True)
class Reply:
    contact_id: int
    wamid: str
    phone_number_id: str  # Meta's id of the number written to
    type: str
    text: str
    payload: str
    context_wamid: str
    sent_at: datetime


_REPLIES_SQL = """
INSERT INTO journeys_contactevent (contact_id, name, properties, occurred_at, received_at,
                                   dedupe_key)
SELECT (r->>0)::bigint, %s, r->1, (r->>2)::timestamptz, now(), r->>3
  FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(r, n)
 ORDER BY n
ON CONFLICT (dedupe_key) DO NOTHING
"""


def journeys_listening() -> bool:
    """Whether any journey could act on a reply (live or paused)."""
    return Journey.objects.filter(status__in=(JourneyStatus.LIVE, JourneyStatus.PAUSED)).exists()


def replies_record(replies: Sequence[Reply]) -> int:
    """Record each reply once as a ``whatsapp.reply`` event; how many were new."""
    if not replies or not journeys_listening():
        return 0
    rows = [
        [
            r.contact_id,
            {
                "wamid": r.wamid,
                "phone_number_id": r.phone_number_id,
                "type": r.type,
                "text": r.text,
                # A tapped quick reply: its text, and its payload when the template set one.
                "button": r.text if r.type in ("button", "interactive") else "",
                "payload": r.payload,
                "context_wamid": r.context_wamid,
            },
            r.sent_at.isoformat(),
            f"whatsapp:{r.wamid}",
        ]
        for r in replies
    ]
    with connection.cursor() as cursor:
        cursor.execute(_REPLIES_SQL, [REPLY_EVENT, json.dumps(rows, ensure_ascii=False)])
        return int(cursor.rowcount)


_HISTORY_SQL = """
INSERT INTO journeys_journeyhistory
       (instance_id, journey_id, contact_id, version, step, kind, detail, message_id,
        event_type, at)
SELECT i.id, i.journey_id, i.contact_id, i.version, m.journey_step, %(kind)s, %(detail)s,
       m.id, '', %(now)s
  FROM delivery_message AS m
  JOIN journeys_journeyinstance AS i ON i.id = m.journey_instance_id
 WHERE m.id = ANY(%(ids)s)
"""


def journey_sends_limited(*, message_ids: Sequence[int], now: datetime) -> int:
    """Journey messages Meta refused with 131049 go again when the hold ends (see the
    module's docstring); how many were put back."""
    ids = list(
        Message.objects.filter(
            pk__in=list(message_ids), journey_instance_id__isnull=False
        ).values_list("pk", flat=True)
    )
    if not ids:
        return 0
    until = now + HOLD
    moved = failed_requeue(
        ids=ids,
        entry={
            "at": now.isoformat(),
            "outcome": "journey: again after Meta's per-user marketing limit (131049)",
            "due": until.isoformat(),
        },
        at=until,
    )
    if moved:
        with connection.cursor() as cursor:
            cursor.execute(
                _HISTORY_SQL,
                {
                    "ids": moved,
                    "kind": HistoryKind.DEFERRED,
                    "detail": "Meta's per-user marketing limit (131049): the message goes again "
                    f"at {until:%Y-%m-%d %H:%M} UTC, and no marketing step before then",
                    "now": now,
                },
            )
    return len(moved)
