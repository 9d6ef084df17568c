"""Meta's per-user marketing limit (131049), remembered per contact.

Meta refuses a marketing template to a user it judges to have had enough ("to maintain
healthy ecosystem engagement"), says to wait at least 24 hours, and warns that an earlier
retry can keep the user blocked longer. The code arrives on a ``failed`` status callback
(webhooks.failures) or, rarely, on the send's answer (the engine retries that send after
24 h). Either way the contact is held: no marketing step of a journey goes to them before
``until`` (journeys.sends moves the step there instead of sending into the block).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.db import connection

from delivery.models import MarketingHold

MARKETING_LIMIT_CODE = 131049
HOLD = timedelta(hours=24)

# The later hold wins: a second 131049 the next day moves the hold on, an old one arriving
# late (a redelivered callback) changes nothing.
_RECORD_SQL = """
INSERT INTO delivery_marketinghold (contact_id, until, since, message_id)
SELECT u.contact_id, max(u.until), min(u.since), max(u.message_id)
  FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::bigint[])
       AS u(contact_id, until, since, message_id)
 GROUP BY u.contact_id
ON CONFLICT (contact_id) DO UPDATE
   SET until = greatest(delivery_marketinghold.until, excluded.until),
       since = CASE WHEN excluded.until > delivery_marketinghold.until THEN excluded.since
                    ELSE delivery_marketinghold.since END,
       message_id = CASE WHEN excluded.until > delivery_marketinghold.until
                         THEN excluded.message_id ELSE delivery_marketinghold.message_id END
"""


def marketing_holds_record(entries: Sequence[tuple[int, datetime, int | None]]) -> int:
    """Hold each (contact, when Meta said 131049, message) for ``HOLD`` from then."""
    if not entries:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_SQL,
            [
                [c for c, _, _ in entries],
                [at + HOLD for _, at, _ in entries],
                [at for _, at, _ in entries],
                [m for _, _, m in entries],
            ],
        )
        return int(cursor.rowcount)


def marketing_holds_until(contact_ids: Iterable[int], *, now: datetime) -> dict[int, datetime]:
    """The contacts of ``contact_ids`` held past ``now``, and until when."""
    ids = sorted(set(contact_ids))
    if not ids:
        return {}
    return dict(
        MarketingHold.objects.filter(contact_id__in=ids, until__gt=now).values_list(
            "contact_id", "until"
        )
    )
