"""The marketing frequency cap, enforced as rows are claimed: at most N marketing templates
per contact in any rolling window, whatever campaign, worker or number sends them.

Where, and why there:

* Not at launch alone. A campaign runs for hours or days: a contact under the cap when it
  launched may be sent by another campaign on its second day; two campaigns launched
  together each see the other's rows as pending, not sent. Only the moment of sending
  knows what was sent before it.
* At the claim, every campaign send passes through one place (the sender's ``_claim``,
  after the send-window guard and before the messaging limit), on any number of workers.
  A check runs in one transaction: it takes a transaction-scoped advisory lock per
  contact of the batch, in id order (two checks never wait on each other in a cycle),
  then, in a new statement, counts each contact's marketing messages in the window that
  are sent or being sent (status ``sending`` or ``unknown``: another worker claimed it),
  other than the batch's own rows. Under READ COMMITTED a statement's snapshot is taken
  when it starts, so the count, run after the lock was granted, sees everything the
  lock's previous holder committed. Two workers claiming one contact for two campaigns at
  once are serialised on the lock: the first to check sees the other's row ``sending``
  and yields; the second sees the first's row skipped (or pending again) and sends. Rows
  released after the check (a messaging limit with no room) stop counting.
* A capped row is skipped with the reason (the report counts it), or, for a campaign that
  says so, deferred: pending again, due when the oldest counted send leaves the window; a
  closed send window at that time holds it on to the window's opening (the window guard
  runs at every claim).

Cost: one lock and an index read on ``delivery_message.contact_id`` per claimed row of a
capped marketing campaign; nothing for a campaign without a cap or a template that is not
marketing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from django.conf import settings
from django.db import connection, transaction

from campaigns.models import Campaign, TemplateCategory
from delivery.messages import claimed_skip, release_messages
from delivery.models import MessageStatus as S
from whatsblast.core.frequency import FrequencyCap, frequency_cap_parse

CAPPED = "frequency cap"
# The advisory lock's first key: the cap's own namespace, apart from any other lock.
_LOCK_NAMESPACE = 0x57_42_46_43  # "WBFC"


class Claimed(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def contact_id(self) -> int | None: ...


ClaimedT = TypeVar("ClaimedT", bound=Claimed)


def campaign_frequency_cap(campaign: Campaign) -> FrequencyCap | None:
    """The cap a campaign's sends obey: its own, else the site's; none for a template that is
    not marketing. A stored override that no longer parses counts as the site's policy."""
    if campaign.template.category != TemplateCategory.MARKETING:
        return None
    own = campaign.frequency_cap.strip()
    try:
        return frequency_cap_parse(own or settings.MARKETING_FREQUENCY_CAP)
    except ValueError:
        return frequency_cap_parse(settings.MARKETING_FREQUENCY_CAP)


def capped_reason(cap: FrequencyCap) -> str:
    return f"{CAPPED}: {cap}"


# Each contact's marketing sends in the window (sent, being sent or in doubt) other than the
# batch's own rows, with their times, oldest first. Through the contact_id index.
_RECENT_SQL = f"""
SELECT m.contact_id, array_agg(COALESCE(m.sent_at, m.claimed_at)
                                ORDER BY COALESCE(m.sent_at, m.claimed_at))
  FROM delivery_message AS m
  JOIN campaigns_template AS t ON t.id = m.template_id
 WHERE m.contact_id = ANY(%(contacts)s::bigint[])
   AND m.id <> ALL(%(own)s::bigint[])
   AND t.category = '{TemplateCategory.MARKETING}'
   AND m.send_status IN ('{S.SENDING}', '{S.SENT}', '{S.UNKNOWN}')
   AND COALESCE(m.sent_at, m.claimed_at) > now() - make_interval(secs => %(window_s)s)
 GROUP BY m.contact_id
"""  # noqa: S608 - constants only

# One lock per contact, taken in the order of the array (sorted by the caller): unnest
# yields its elements in order and the scan computes each lock as it goes.
_LOCK_SQL = """
SELECT pg_advisory_xact_lock(%(namespace)s, (u.contact %% 2147483647)::int)
  FROM unnest(%(contacts)s::bigint[]) AS u(contact)
"""


class FrequencyCapGuard:
    """Keeps a capped campaign's sends within the cap (see the module's docstring)."""

    def __init__(self, cap: FrequencyCap, *, defer: bool) -> None:
        self.cap = cap
        self.defer = defer
        self.capped = 0

    @classmethod
    def for_campaign(cls, campaign: Campaign) -> FrequencyCapGuard | None:
        cap = campaign_frequency_cap(campaign)
        return cls(cap, defer=campaign.frequency_cap_defer) if cap is not None else None

    def admit(self, rows: Sequence[ClaimedT]) -> list[ClaimedT]:
        """The rows the cap allows now; the others are skipped or deferred."""
        contacts = sorted({r.contact_id for r in rows if r.contact_id is not None})
        if not contacts:
            return list(rows)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_LOCK_SQL, {"namespace": _LOCK_NAMESPACE, "contacts": contacts})
            cursor.execute(
                _RECENT_SQL,
                {
                    "contacts": contacts,
                    "own": [r.id for r in rows],
                    "window_s": self.cap.window.total_seconds(),
                },
            )
            recent: dict[int, list[datetime]] = {int(c): list(t) for c, t in cursor.fetchall()}
            admitted: list[ClaimedT] = []
            capped: list[ClaimedT] = []
            for row in rows:
                times = recent.get(row.contact_id or 0, [])
                (capped if len(times) >= self.cap.limit else admitted).append(row)
            if capped:
                self._refuse(capped, recent)
        return admitted

    def _refuse(self, rows: list[ClaimedT], recent: dict[int, list[datetime]]) -> None:
        self.capped += len(rows)
        ids = [r.id for r in rows]
        if not self.defer:
            claimed_skip(ids=ids, reason=capped_reason(self.cap))
            return
        # Due when enough of the counted sends have left the window for one more.
        allowed_at = []
        for row in rows:
            times = recent[row.contact_id or 0]
            allowed_at.append(times[len(times) - self.cap.limit] + self.cap.window)
        release_messages(ids=ids, at=allowed_at)
