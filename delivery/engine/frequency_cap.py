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
* It counts what Meta counts: marketing templates sent outside the person's open
  24-hour window. A row whose recipient wrote to the number within the last 24 hours is
  admitted without counting and marked ``in_service_window``, so it is never counted
  later either. Campaigns and journeys share the one budget: a journey's send step is a
  campaign of the engine's like any other.

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
from delivery.service_windows import SERVICE_WINDOW
from whatsblast.core.frequency import FrequencyCap, frequency_cap_parse

CAPPED = "frequency cap"
# The advisory lock's first key: the cap's own namespace, apart from any other lock.
_LOCK_NAMESPACE = 0x57_42_46_43  # "WBFC"


class Claimed(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def to(self) -> str: ...
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


# Recipients of the batch who wrote to the number within Meta's 24 hours (the
# customer-service window), through its (number, user) unique index.
_WINDOWS_OPEN_SQL = f"""
SELECT "user" FROM delivery_servicewindow
 WHERE phone_number_id = %s AND "user" = ANY(%s::text[])
   AND last_inbound_at > now() - interval '{int(SERVICE_WINDOW.total_seconds())} seconds'
"""  # noqa: S608 - a constant

_MARK_SQL = "UPDATE delivery_message SET in_service_window = true WHERE id = ANY(%s::bigint[])"


def _windows_open(phone_number_pk: int, recipients: Sequence[str]) -> set[str]:
    if not phone_number_pk or not recipients:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(_WINDOWS_OPEN_SQL, [phone_number_pk, sorted(set(recipients))])
        return {str(row[0]) for row in cursor.fetchall()}


def _mark_in_window(ids: Sequence[int]) -> None:
    """Claimed rows (this worker owns them: no one else writes them now) sent in a window."""
    with connection.cursor() as cursor:
        cursor.execute(_MARK_SQL, [list(ids)])


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
   AND NOT m.in_service_window
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

    @staticmethod
    def same(a: FrequencyCapGuard | None, b: FrequencyCapGuard | None) -> bool:
        """Whether two guards hold the same cap the same way (None: no cap)."""
        if a is None or b is None:
            return a is b
        return a.cap == b.cap and a.defer == b.defer

    @classmethod
    def for_campaign(cls, campaign: Campaign) -> FrequencyCapGuard | None:
        cap = campaign_frequency_cap(campaign)
        return cls(cap, defer=campaign.frequency_cap_defer) if cap is not None else None

    def admit(self, rows: Sequence[ClaimedT], *, phone_number_pk: int) -> list[ClaimedT]:
        """The rows the cap allows now; the others are skipped or deferred."""
        in_window = _windows_open(phone_number_pk, [r.to for r in rows])
        if in_window:
            exempt = [r for r in rows if r.to in in_window]
            _mark_in_window([r.id for r in exempt])
            rows = [r for r in rows if r.to not in in_window]
            return exempt + self.admit(rows, phone_number_pk=0) if rows else exempt
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
