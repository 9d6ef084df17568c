"""The webhook endpoint's and applier's counters (written by ``whatsblast.core.counters``)."""

from __future__ import annotations

import threading
from typing import Protocol

from whatsblast.core.counters import KEY_PREFIX, counters_add

# fields "received|<result>", "applied|<result>", "statuses", "message_updates", "unmatched"
WEBHOOKS_KEY = f"{KEY_PREFIX}:webhooks"
KEYS = (WEBHOOKS_KEY,)
WEBHOOK_RECEIPTS = ("stored", "duplicate", "rejected", "forbidden", "shed")


class AppliedCounts(Protocol):
    """What an applier batch reports (``webhooks.applier.ApplyReport``)."""

    events: int
    rejected: int
    failed: int
    statuses: int
    messages_updated: int
    unmatched_new: int


def webhook_received(result: str) -> None:
    """Count one POST to the webhook: stored, duplicate, rejected (malformed) or forbidden."""
    counters_add([("int", WEBHOOKS_KEY, f"received|{result}", 1)])


def webhook_stored(*, event_id: int | None, rejected: bool) -> None:
    """Count a signed POST by what ``event_store`` made of it."""
    webhook_received("duplicate" if event_id is None else "rejected" if rejected else "stored")


def webhooks_applied(report: AppliedCounts) -> None:
    """Count one applier batch: events by result, statuses read, messages moved."""
    counts = {
        "applied|processed": report.events - report.rejected,
        "applied|rejected": report.rejected,
        "applied|failed": report.failed,
        "statuses": report.statuses,
        "message_updates": report.messages_updated,
        "unmatched": report.unmatched_new,
    }
    counters_add(("int", WEBHOOKS_KEY, field, n) for field, n in counts.items() if n > 0)


def webhooks_stored_batch(*, stored: int, rejected: int, duplicates: int) -> None:
    """Count a group-committed batch of signed POSTs by what became of them."""
    counts = {"received|stored": stored, "received|rejected": rejected}
    counts["received|duplicate"] = duplicates
    counters_add(("int", WEBHOOKS_KEY, field, n) for field, n in counts.items() if n > 0)


# Shed POSTs come by thousands a second in a flood, when the process has the least CPU to
# spare: they are summed in the process and written once per interval by a timer, not with
# a Redis round trip each.
SHED_FLUSH_INTERVAL_S = 0.05
_shed_lock = threading.Lock()
_shed_unwritten = 0


def webhook_shed() -> None:
    """Count one POST answered 503: too many waiting, waited too long for a thread, or not
    stored in time. Written to Redis within ``SHED_FLUSH_INTERVAL_S``."""
    global _shed_unwritten
    with _shed_lock:
        _shed_unwritten += 1
        if _shed_unwritten > 1:
            return  # a flush is already due
    timer = threading.Timer(SHED_FLUSH_INTERVAL_S, _shed_flush)
    timer.daemon = True
    timer.start()


def _shed_flush() -> None:
    global _shed_unwritten
    with _shed_lock:
        count, _shed_unwritten = _shed_unwritten, 0
    counters_add([("int", WEBHOOKS_KEY, "received|shed", count)])
