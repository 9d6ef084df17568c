"""The PostgreSQL aggregates behind the gauges of ``/metrics``: cheap enough for every scrape.

Each query is shaped to walk one of the partial indexes the engine already keeps small
(pending rows, rows in doubt, pending webhook events, open dead letters), so its cost
follows the backlog, not the size of the tables. All of them run in one short
transaction under a statement timeout: a slow database makes a scrape fail fast (the
``whatsblast_collector_up`` gauge says so) instead of piling up scrapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction

STATEMENT_TIMEOUT_MS = 2000

# Pending rows and the oldest *due* pending row of every running campaign. Both subqueries
# are probes of message_pending_claim_idx (campaign_id, next_attempt_at) WHERE pending: the
# min() reads one index entry, the count() an index-only range of that campaign. Rows of a
# paused campaign are not waiting on the engine, so only running campaigns count.
_CAMPAIGNS_SQL = """
SELECT c.id, p.phone_number_id,
       (SELECT count(*) FROM delivery_message m
         WHERE m.campaign_id = c.id AND m.send_status = 'pending') AS pending,
       (SELECT extract(epoch FROM now() - min(m.next_attempt_at)) FROM delivery_message m
         WHERE m.campaign_id = c.id AND m.send_status = 'pending'
           AND m.next_attempt_at <= now()) AS oldest_due_age
  FROM campaigns_campaign c
  JOIN campaigns_phonenumber p ON p.id = c.phone_number_id
 WHERE c.status = 'running'
"""

# Transactional rows waiting: message_pending_txn_idx holds exactly these. A row whose
# retry is scheduled later is not late, so the age is of due rows only.
_TRANSACTIONAL_SQL = """
SELECT count(*),
       extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE next_attempt_at <= now()))
  FROM delivery_message
 WHERE kind = 'transactional' AND send_status = 'pending'
"""

# Rows in doubt, from message_in_doubt_idx. "Stuck" means past the point where the
# reconciler should have moved it: a `sending` row past its lease, an `unknown` row past
# the evidence window. A growing stuck count means the maintenance tick is not running.
_IN_DOUBT_SQL = """
SELECT send_status, count(*),
       count(*) FILTER (WHERE claimed_at < now() - make_interval(secs =>
           CASE WHEN send_status = 'sending' THEN %(lease)s ELSE %(settle)s END)),
       coalesce(extract(epoch FROM now() - min(claimed_at)), 0)
  FROM delivery_message
 WHERE send_status IN ('sending', 'unknown')
 GROUP BY send_status
"""

# Open dead letters per number (deadletter_status_idx leads with status).
_DEAD_LETTERS_SQL = """
SELECT p.phone_number_id, count(*)
  FROM delivery_deadletter d
  JOIN campaigns_phonenumber p ON p.id = d.phone_number_id
 WHERE d.status = 'open'
 GROUP BY p.phone_number_id
"""

# The applier's backlog (webhookevent_pending_idx) and the statuses still waiting for
# their message (unmatched_status_due_idx).
_WEBHOOKS_SQL = """
SELECT (SELECT count(*) FROM webhooks_webhookevent WHERE status = 'pending'),
       (SELECT coalesce(extract(epoch FROM now() - min(received_at)), 0)
          FROM webhooks_webhookevent WHERE status = 'pending'),
       (SELECT count(*) FROM webhooks_unmatchedstatus WHERE reported_at IS NULL)
"""

_NUMBERS_SQL = """
SELECT p.phone_number_id, p.display_phone_number, p.rate_per_second,
       p.transactional_reserve, p.quality_rating, a.waba_id, a.messaging_limit_tier
  FROM campaigns_phonenumber p
  JOIN campaigns_businessaccount a ON a.id = p.account_id
"""


# Each event subscription and how far behind it is. Backlog: for a subscription to every
# type, the events after its cursor are exactly newest seq - cursor (seq has no gaps above
# any cursor: the router numbers events one after another and pruning stays below every
# cursor); for one to some types, a count of its types after the cursor. The oldest
# waiting event is the first of its types after the cursor. Both walk delivery_event's
# primary key from the cursor, as the deliverer's own batch query does several times a
# second; a subscription keeping up reads a handful of rows.
_EVENT_SUBSCRIPTIONS_SQL = """
SELECT s.id, s.name, s.active,
       CASE WHEN cardinality(s.event_types) = 0 THEN greatest(newest.seq - s.cursor, 0)
            ELSE (SELECT count(*) FROM delivery_event e
                   WHERE e.seq > s.cursor AND e.event_type = ANY(s.event_types))
       END AS backlog,
       (SELECT extract(epoch FROM now() - e.occurred_at) FROM delivery_event e
         WHERE e.seq > s.cursor
           AND (cardinality(s.event_types) = 0 OR e.event_type = ANY(s.event_types))
         ORDER BY e.seq LIMIT 1) AS oldest_age
  FROM delivery_eventsubscription s,
       (SELECT coalesce(max(seq), 0) AS seq FROM delivery_event) AS newest
 ORDER BY s.id
"""

# Events committed but not routed yet wait for every subscription: the outbox's first row
# (its primary key) is the oldest. A growing age means no events worker is running.
_EVENT_OUTBOX_SQL = """
SELECT extract(epoch FROM now() - occurred_at) FROM delivery_eventoutbox ORDER BY id LIMIT 1
"""


@dataclass(frozen=True)
class CampaignBacklog:
    campaign_id: int
    phone_number_id: str
    pending: int
    oldest_due_age_s: float | None


@dataclass(frozen=True)
class InDoubt:
    count: int
    stuck: int
    oldest_age_s: float


@dataclass(frozen=True)
class NumberRow:
    phone_number_id: str
    display_phone_number: str
    rate_per_second: int
    transactional_reserve: float
    quality_rating: str
    waba_id: str
    messaging_limit_tier: str


@dataclass
class DatabaseSnapshot:
    campaigns: list[CampaignBacklog] = field(default_factory=list)
    transactional_pending: int = 0
    transactional_oldest_due_age_s: float | None = None
    in_doubt: dict[str, InDoubt] = field(default_factory=dict)
    dead_letters_open: dict[str, int] = field(default_factory=dict)
    webhook_events_pending: int = 0
    webhook_oldest_pending_age_s: float = 0.0
    webhook_unmatched_waiting: int = 0
    numbers: list[NumberRow] = field(default_factory=list)


@dataclass(frozen=True)
class SubscriptionBacklog:
    subscription_id: int
    name: str
    active: bool
    backlog: int
    oldest_waiting_s: float | None


@dataclass
class EventsSnapshot:
    subscriptions: list[SubscriptionBacklog] = field(default_factory=list)
    outbox_oldest_s: float | None = None

    @property
    def paused(self) -> int:
        return sum(1 for s in self.subscriptions if not s.active)

    @property
    def oldest_waiting_s(self) -> float:
        """The longest any event has waited for an active subscription (or to be routed)."""
        ages = [s.oldest_waiting_s for s in self.subscriptions if s.active]
        ages.append(self.outbox_oldest_s)
        return max((max(age, 0.0) for age in ages if age is not None), default=0.0)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def database_snapshot() -> DatabaseSnapshot:
    """Read every database gauge in one short transaction."""
    snap = DatabaseSnapshot()
    with transaction.atomic(), connection.cursor() as cursor:
        # SET LOCAL: the timeout ends with this transaction, never leaks to the connection.
        cursor.execute(f"SET LOCAL statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        cursor.execute(_CAMPAIGNS_SQL)
        snap.campaigns = [
            CampaignBacklog(int(cid), str(pnid), int(pending), _float(age))
            for cid, pnid, pending, age in cursor.fetchall()
        ]
        cursor.execute(_TRANSACTIONAL_SQL)
        pending, age = cursor.fetchone()
        snap.transactional_pending, snap.transactional_oldest_due_age_s = int(pending), _float(age)
        cursor.execute(
            _IN_DOUBT_SQL,
            {"lease": settings.SEND_LEASE_SECONDS, "settle": settings.UNKNOWN_SETTLE_SECONDS},
        )
        snap.in_doubt = {
            status: InDoubt(int(count), int(stuck), float(age))
            for status, count, stuck, age in cursor.fetchall()
        }
        cursor.execute(_DEAD_LETTERS_SQL)
        snap.dead_letters_open = {str(pnid): int(n) for pnid, n in cursor.fetchall()}
        cursor.execute(_WEBHOOKS_SQL)
        pending_events, lag, unmatched = cursor.fetchone()
        snap.webhook_events_pending = int(pending_events)
        snap.webhook_oldest_pending_age_s = float(lag)
        snap.webhook_unmatched_waiting = int(unmatched)
        cursor.execute(_NUMBERS_SQL)
        snap.numbers = [
            NumberRow(str(pnid), display, int(rate), float(reserve), quality, str(waba), tier)
            for pnid, display, rate, reserve, quality, waba, tier in cursor.fetchall()
        ]
    return snap


# Live journeys: people in each, and the due rows the sweep has not taken yet (their oldest
# due time: a growing age means no worker runs the journeys' pass). Through the partial
# indexes on active instances (by journey and due time, by journey and step).
_JOURNEYS_SQL = """
SELECT j.id, j.name,
       (SELECT count(*) FROM journeys_journeyinstance i
         WHERE i.journey_id = j.id AND i.state = 'active'),
       (SELECT count(*) FROM journeys_journeyinstance i
         WHERE i.journey_id = j.id AND i.state = 'active' AND i.due_at <= now()),
       (SELECT extract(epoch FROM now() - min(i.due_at)) FROM journeys_journeyinstance i
         WHERE i.journey_id = j.id AND i.state = 'active' AND i.due_at <= now())
  FROM journeys_journey j
 WHERE j.status = 'live'
 ORDER BY j.id
"""
# Events in not routed yet (the partial index on them): their count and the oldest's age.
_EVENTS_IN_SQL = """
SELECT count(*), extract(epoch FROM now() - min(received_at))
  FROM journeys_contactevent WHERE routed_at IS NULL
"""


@dataclass(frozen=True)
class JourneyBacklog:
    journey_id: int
    name: str
    active: int
    due: int
    oldest_due_s: float | None


@dataclass
class JourneysSnapshot:
    journeys: list[JourneyBacklog] = field(default_factory=list)
    events_unrouted: int = 0
    events_oldest_unrouted_s: float | None = None

    @property
    def oldest_due_s(self) -> float:
        return max((j.oldest_due_s or 0.0 for j in self.journeys), default=0.0)


def journeys_snapshot() -> JourneysSnapshot:
    """The journeys' gauges, in a transaction of their own, as the events'."""
    snap = JourneysSnapshot()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        cursor.execute(_JOURNEYS_SQL)
        snap.journeys = [
            JourneyBacklog(int(jid), str(name), int(active), int(due), _float(age))
            for jid, name, active, due, age in cursor.fetchall()
        ]
        cursor.execute(_EVENTS_IN_SQL)
        unrouted, age = cursor.fetchone()
        snap.events_unrouted = int(unrouted)
        snap.events_oldest_unrouted_s = _float(age)
    return snap


def events_snapshot() -> EventsSnapshot:
    """The event subscriptions' gauges, in a transaction of their own: a subscription far
    behind cannot make the rest of the scrape time out."""
    snap = EventsSnapshot()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL statement_timeout = {int(STATEMENT_TIMEOUT_MS)}")
        cursor.execute(_EVENT_SUBSCRIPTIONS_SQL)
        snap.subscriptions = [
            SubscriptionBacklog(int(sid), str(name), bool(active), int(backlog), _float(age))
            for sid, name, active, backlog, age in cursor.fetchall()
        ]
        cursor.execute(_EVENT_OUTBOX_SQL)
        row = cursor.fetchone()
        snap.outbox_oldest_s = _float(row[0]) if row else None
    return snap
