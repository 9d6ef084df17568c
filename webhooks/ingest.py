"""Group commit: many concurrent webhook POSTs stored by one INSERT, each acked after it.

Meta sends mostly one status per POST, two or three per message, so a number sending
1,000 msg/s brings some 3,000 POSTs a second. One INSERT and one commit per POST is most of
a POST's cost; here every request thread of a web process hands its body to the process's
``GroupCommitter`` and waits. A single committer thread takes everything waiting, stores
it with one multi-row ``INSERT … ON CONFLICT DO NOTHING`` and one commit, and only then
releases the waiting requests, which answer 200. Nothing is acknowledged before it is
durable; a request that cannot be stored in time is answered 503 (Meta retries), and a
body that was committed after all is recognised on its retry by its hash.

Admission: at most ``WEBHOOK_MAX_PENDING`` bodies may wait per process. Past that the
endpoint sheds load at once with 503 and ``Retry-After`` instead of letting requests pile
up and time out.

A request already inside a transaction (a test, ``ATOMIC_REQUESTS``) stores inline: its
commit belongs to its caller.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from webhooks import metrics
from webhooks.models import WebhookEventStatus
from webhooks.services import applier_schedule, event_store
from whatsblast.core.db import array_literal, array_text, bound_cursor
from whatsblast.core.waiters import waiters_release

logger = logging.getLogger(__name__)

# Bodies stored per statement: a few hundred kilobytes at Meta's usual one status a body.
MAX_BATCH = 500


class Overloaded(Exception):
    """More bodies wait than the admission limit allows: answer 503, Meta retries."""


class NotStored(Exception):
    """The body could not be committed in time (the database is slow or away): 503."""


@dataclass(eq=False)
class _Item:
    body: bytes
    digest: str
    rejected_reason: str | None
    # A thread waits on ``done``; a caller on an event loop (the ASGI web process) on
    # ``future``, which the committer resolves on that loop. Each item has one of the two.
    done: threading.Event | None = None
    future: asyncio.Future[None] | None = None
    event_id: int | None = None
    failed: bool = False


# Every waiting body of a batch in one statement. The unique body hash makes a redelivered
# body (or the same body twice in one batch) a no-op; RETURNING says which rows are new.
_BATCH_INSERT_SQL = """
INSERT INTO webhooks_webhookevent
    (received_at, body, body_sha256, status, error, processed_at, summary)
SELECT now(), substring(%b::bytea FROM u.start FOR u.length), u.digest, u.status, u.error,
       CASE WHEN u.status = %s THEN now() END, '{}'::jsonb
  FROM unnest(%s::int[], %s::int[], %s::text[], %s::text[], %s::text[])
       AS u(start, length, digest, status, error)
ON CONFLICT (body_sha256) DO NOTHING
RETURNING id, body_sha256
"""
# The bodies travel as one binary parameter, cut apart by offsets in SQL, and the other
# columns as array literals: binding five arrays element by element (psycopg dumps each in
# Python) was a fifth of a web process's CPU at 3,000 POSTs/s.

# After-commit work (counters, waking the applier) is done at most this often per process,
# not once per batch: at one status per POST a batch is a few bodies, and a Redis round
# trip per batch was as much CPU as the INSERT.
HOUSEKEEPING_INTERVAL_S = 0.05


class GroupCommitter:
    """One web process's committer threads and the bodies waiting for them.

    Two committers by default: while one waits for its commit to reach the disk (a few
    milliseconds, most of a batch's time), the other is already inserting the next batch.
    Each keeps its own database connection for the life of the process.
    """

    def __init__(self, *, max_pending: int, wait_s: float, committers: int = 2) -> None:
        self.max_pending = max_pending
        self.wait_s = wait_s
        self.committers = committers
        self._waiting: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self.batches_committed = 0  # statements that stored something: a figure for tests
        self._stopping = False
        self._counts = [0, 0, 0]  # stored, rejected, duplicates: not yet counted in Redis
        self._housekept_at = 0.0

    def store(self, *, body: bytes, rejected_reason: str | None) -> int | None:
        """Store ``body`` durably; its event id, or ``None`` for a redelivery.

        Raises ``Overloaded`` when too many bodies wait, ``NotStored`` when the commit did
        not happen within ``wait_s``.
        """
        item = _Item(body, hashlib.sha256(body).hexdigest(), rejected_reason)
        item.done = done = threading.Event()
        self._admit(item)
        if not done.wait(self.wait_s) or item.failed:
            raise NotStored
        return item.event_id

    async def store_async(self, *, body: bytes, rejected_reason: str | None) -> int | None:
        """``store`` for a caller on an event loop: the loop serves other requests meanwhile.

        The committer threads are the same; each batch wakes each loop it serves once.
        """
        future = asyncio.get_running_loop().create_future()
        item = _Item(body, hashlib.sha256(body).hexdigest(), rejected_reason, future=future)
        self._admit(item)
        try:
            await asyncio.wait_for(future, self.wait_s)
        except TimeoutError:
            raise NotStored from None
        if item.failed:
            raise NotStored
        return item.event_id

    def waiting_count(self) -> int:
        """Bodies admitted and not yet taken by a committer thread."""
        with self._cond:
            return len(self._waiting)

    def _admit(self, item: _Item) -> None:
        with self._cond:
            if len(self._waiting) >= self.max_pending:
                raise Overloaded
            self._waiting.append(item)
            self._ensure_thread()
            self._cond.notify()

    def _ensure_thread(self) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < self.committers:
            thread = threading.Thread(
                target=self._run, name=f"webhook-committer-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Let the committers finish what waits, then end them and close their connections."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._stopping:
                        # Idle with counts not yet written: write them once the interval is up.
                        if any(self._counts):
                            self._cond.wait(HOUSEKEEPING_INTERVAL_S)
                            break
                        self._cond.wait()
                    if not self._waiting and self._stopping:
                        break
                    batch = [
                        self._waiting.popleft() for _ in range(min(MAX_BATCH, len(self._waiting)))
                    ]
                if batch:
                    self._commit(batch)
                self._housekeep()
        finally:
            self._housekeep(force=True)
            connection.close()

    def _commit(self, batch: list[_Item]) -> None:
        started = time.monotonic()
        try:
            stored = _batch_insert(batch)
        except DatabaseError as exc:
            logger.warning("webhook batch of %s not stored (%s): answered 503", len(batch), exc)
            connection.close()
            for item in batch:
                item.failed = True
            waiters_release(batch)
            return
        new = rejected = duplicates = 0
        for item in batch:
            # The first of equal bodies in the batch is the stored one; the others are
            # redeliveries, as they would be in a later batch.
            item.event_id = stored.pop(item.digest, None)
            if item.event_id is None:
                duplicates += 1
            elif item.rejected_reason:
                rejected += 1
            else:
                new += 1
        waiters_release(batch)
        with self._cond:
            self.batches_committed += 1
            self._counts[0] += new
            self._counts[1] += rejected
            self._counts[2] += duplicates
        elapsed = time.monotonic() - started
        if elapsed > 1.0:
            logger.warning("webhook batch of %s took %.2fs to commit", len(batch), elapsed)

    def _housekeep(self, *, force: bool = False) -> None:
        """Count what was stored and wake the applier: at most every HOUSEKEEPING_INTERVAL_S."""
        now = time.monotonic()
        with self._cond:
            if not force and now - self._housekept_at < HOUSEKEEPING_INTERVAL_S:
                return
            if not any(self._counts):
                return
            self._housekept_at = now
            new, rejected, duplicates = self._counts
            self._counts = [0, 0, 0]
        metrics.webhooks_stored_batch(stored=new, rejected=rejected, duplicates=duplicates)
        if new:
            applier_schedule()


def _batch_insert(batch: list[_Item]) -> dict[str, int]:
    """Insert the batch (the first of equal bodies wins); {digest: new event id}."""
    unique: dict[str, _Item] = {}
    for item in batch:
        unique.setdefault(item.digest, item)
    items = list(unique.values())
    starts, lengths = [], []
    offset = 1  # substring() counts from 1
    for item in items:
        starts.append(str(offset))
        lengths.append(str(len(item.body)))
        offset += len(item.body)
    statuses = [
        WebhookEventStatus.REJECTED if i.rejected_reason else WebhookEventStatus.PENDING
        for i in items
    ]
    with transaction.atomic(), bound_cursor() as cursor:
        cursor.execute(
            _BATCH_INSERT_SQL,
            [
                b"".join(i.body for i in items),
                WebhookEventStatus.REJECTED,
                array_literal(starts),
                array_literal(lengths),
                array_literal(i.digest for i in items),
                array_literal(array_text(str(s)) for s in statuses),
                array_literal(array_text((i.rejected_reason or "")[:2000]) for i in items),
            ],
        )
        stored = {digest: int(event_id) for event_id, digest in cursor.fetchall()}
    for item in items:
        if item.rejected_reason and item.digest in stored:
            logger.warning(
                "webhook event %s rejected: %s", stored[item.digest], item.rejected_reason
            )
    return stored


_committer: GroupCommitter | None = None
_committer_lock = threading.Lock()


def committer() -> GroupCommitter:
    global _committer
    with _committer_lock:
        if _committer is None:
            _committer = GroupCommitter(
                max_pending=settings.WEBHOOK_MAX_PENDING,
                wait_s=settings.WEBHOOK_STORE_TIMEOUT_S,
                committers=settings.WEBHOOK_COMMITTERS,
            )
        return _committer


def committer_stop() -> None:
    """Stop the process's committer, if one started (tests; a clean shutdown)."""
    global _committer
    with _committer_lock:
        if _committer is not None:
            _committer.stop()
            _committer = None


async def webhook_body_store_async(*, body: bytes, rejected_reason: str | None) -> int | None:
    """Store one signed body from an event loop: always grouped (the loop holds no
    transaction)."""
    return await committer().store_async(body=body, rejected_reason=rejected_reason)


def webhook_body_store(*, body: bytes, rejected_reason: str | None) -> int | None:
    """Store one signed body: grouped with other requests' when the request is autocommit,
    inline (``event_store``) when it runs inside a transaction already."""
    if connection.in_atomic_block or not settings.WEBHOOK_GROUP_COMMIT:
        event_id = event_store(body=body, rejected_reason=rejected_reason)
        metrics.webhook_stored(event_id=event_id, rejected=rejected_reason is not None)
        return event_id
    return committer().store(body=body, rejected_reason=rejected_reason)
