"""A contact's consent to marketing: opting out (and back in)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

_OPT_OUT_SQL = """
UPDATE campaigns_contact
   SET opted_out_at = coalesce(%s, now()), opted_out_reason = %s, updated_at = now()
 WHERE id = ANY(%s) AND opted_out_at IS NULL
"""


def contacts_opt_out(
    *, contact_ids: Sequence[int], at: datetime | None = None, reason: str = ""
) -> int:
    """Mark the contacts opted out at ``at`` (default: now) for ``reason`` (how the user
    said it, shown on the customer page); return how many changed.

    Those already out keep their first date and reason.
    """
    if not contact_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_OPT_OUT_SQL, [at, reason[:200], list(contact_ids)])
        return int(cursor.rowcount)


_OPT_IN_SQL = """
UPDATE campaigns_contact
   SET opted_out_at = NULL, opted_out_reason = '', opted_in_at = %s, updated_at = now()
 WHERE id = ANY(%s)
   AND (opted_out_at IS NULL OR opted_out_at <= %s)
   AND (opted_in_at IS NULL OR opted_in_at < %s)
"""


def contacts_opt_in(*, contact_ids: Sequence[int], at: datetime) -> int:
    """The contacts asked to hear from us again at ``at``: opted in, no longer out.

    An opt-out said after ``at`` stands (callbacks arrive out of order).
    """
    if not contact_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_OPT_IN_SQL, [at, list(contact_ids), at, at])
        return int(cursor.rowcount)
