"""A contact's consent to marketing: opting out (and back in)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection

_OPT_OUT_SQL = """
UPDATE campaigns_contact SET opted_out_at = coalesce(%s, now()), updated_at = now()
 WHERE id = ANY(%s) AND opted_out_at IS NULL
"""


def contacts_opt_out(*, contact_ids: Sequence[int], at: datetime | None = None) -> int:
    """Mark the contacts opted out at ``at`` (default: now); return how many changed.

    Those already out keep their first date.
    """
    if not contact_ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_OPT_OUT_SQL, [at, list(contact_ids)])
        return int(cursor.rowcount)
