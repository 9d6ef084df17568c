"""The customer-service window: free-form messages only within 24 h of the user's last one.

Recorded from inbound messages (one upsert per applier batch, the latest time wins) and
read before the API sends a text.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from delivery.models import ServiceWindow

# Meta's customer-service window.
SERVICE_WINDOW = timedelta(hours=24)

# A batch of (number, user, time) in one statement; a later message moves the window on,
# an older one (a redelivery) changes nothing.
_RECORD_SQL = """
INSERT INTO delivery_servicewindow (phone_number_id, "user", last_inbound_at)
SELECT u.phone_number_id, u.user_id, max(u.at)
  FROM unnest(%s::bigint[], %s::text[], %s::timestamptz[]) AS u(phone_number_id, user_id, at)
 GROUP BY u.phone_number_id, u.user_id
ON CONFLICT (phone_number_id, "user") DO UPDATE
   SET last_inbound_at = greatest(delivery_servicewindow.last_inbound_at,
                                  excluded.last_inbound_at)
"""


def service_windows_record(entries: Sequence[tuple[int, str, datetime]]) -> int:
    """Record inbound messages as (phone number pk, user, sent at); return rows written."""
    if not entries:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD_SQL,
            [[e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries]],
        )
        return int(cursor.rowcount)


def service_window_open(*, phone_number_id: int, user: str, now: datetime | None = None) -> bool:
    """Whether ``user`` wrote to the number within the last 24 h."""
    since = (now or timezone.now()) - SERVICE_WINDOW
    return ServiceWindow.objects.filter(
        phone_number_id=phone_number_id, user=user, last_inbound_at__gte=since
    ).exists()
