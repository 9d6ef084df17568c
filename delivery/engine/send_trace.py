"""An opt-in record of the moment each send was granted, to compare with Meta's.

The send log bounds the grants of any 1.02 s to the number's rate at the moment of the
write; Meta (or the simulator) counts sends when it reads them, after the network and its
own scheduling. When a receiver's second holds more than the rate, this record says which
side it came from: the grants, or the way to the receiver.

A grant is recorded at the moment the send log counted it, in Redis's clock (the time the
bucket's script read), not when the worker's loop got the answer: on full cores a loop may
resume tens of milliseconds later, and a grant stamped then can fall into the next second
though the log counted it in this one. Everything after the log's count (the worker
resuming, the request, the receiver's own scheduling) is the way to the receiver.

With ``SEND_TRACE_DIR`` set (``WHATSBLAST_SEND_TRACE_DIR``), each process appends one line
per grant to ``<dir>/grants-<pid>.txt``: message id, phone number id, wall-clock seconds.
Lines are buffered and written by the send service's housekeeping, a few times a second,
off the dispatch path; a process killed loses at most its last buffer. Without the setting
nothing is recorded and the sender's cost is one attribute test per send.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True, slots=True)
class Grant:
    message_id: int
    phone_number_id: str
    at: float  # wall-clock seconds: when the send log counted it (Redis's clock)


# Lines kept before a write is due even without housekeeping (a sender running in place).
BUFFER_LINES = 2000


class SendTrace:
    """One process's grant record, appended to its own file."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / f"grants-{os.getpid()}.txt"
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def granted(self, message_id: int, phone_number_id: str, at: float | None) -> None:
        """Record one grant; ``at`` is the bucket's moment (``ratelimit.Grant.at``)."""
        at = time.time() if at is None else at
        with self._lock:
            self._lines.append(f"{message_id} {phone_number_id} {at:.6f}\n")
            full = len(self._lines) >= BUFFER_LINES
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            if lines:
                with self.path.open("a") as out:
                    out.writelines(lines)


_trace: SendTrace | None = None
_trace_pid = 0


def send_trace() -> SendTrace | None:
    """This process's trace, or ``None`` when ``SEND_TRACE_DIR`` is not set."""
    global _trace, _trace_pid
    if not settings.SEND_TRACE_DIR:
        return None
    directory = Path(settings.SEND_TRACE_DIR)
    # A forked child writes its own file; a changed setting, its new directory.
    if _trace is None or _trace_pid != os.getpid() or _trace.directory != directory:
        if _trace is not None:
            _trace.flush()
        _trace = SendTrace(directory)
        _trace_pid = os.getpid()
    return _trace


def send_trace_flush() -> None:
    """Write this process's buffered grants, if it traces them."""
    trace = send_trace()
    if trace is not None:
        trace.flush()


def grants_read(directory: Path) -> list[Grant]:
    """Every grant recorded under ``directory``, in time order."""
    grants: list[Grant] = []
    for path in sorted(directory.glob("grants-*.txt")):
        for line in path.read_text().splitlines():
            message_id, phone_number_id, at = line.split()
            grants.append(Grant(int(message_id), phone_number_id, float(at)))
    grants.sort(key=lambda g: g.at)
    return grants


def grant_seconds(grants: list[Grant], rates: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per number of ``rates``: its busiest calendar second of grants, and how many of its
    seconds held more grants than its rate. Every grant counts, sent or not: the bucket
    counted it."""
    seconds: dict[str, Counter[int]] = {number: Counter() for number in rates}
    for grant in grants:
        if grant.phone_number_id in seconds:
            seconds[grant.phone_number_id][int(grant.at)] += 1
    return {
        number: {
            "rate": rates[number],
            "max_second": max(counts.values(), default=0),
            "seconds_over_rate": sum(1 for n in counts.values() if n > rates[number]),
        }
        for number, counts in seconds.items()
    }


def grant_to_stamp(grants: list[Grant], stamps: Iterable[tuple[str, float]]) -> list[float]:
    """For each receiver stamp (callback data ``wb:<message id>``, wall-clock time), the
    seconds since that message's latest grant before it; stamps with no grant are left out."""
    by_message: dict[int, list[float]] = defaultdict(list)
    for grant in grants:
        by_message[grant.message_id].append(grant.at)
    delays: list[float] = []
    for callback_data, stamped_at in stamps:
        if not callback_data.startswith("wb:"):
            continue
        times = by_message.get(int(callback_data[3:]), [])
        before = bisect.bisect_right(times, stamped_at)
        if before:
            delays.append(stamped_at - times[before - 1])
    return sorted(delays)


def percentiles_ms(sorted_s: list[float], quantiles: Iterable[float]) -> dict[str, float]:
    """``{"p50": ms, ...}`` of sorted seconds (``max`` for 1.0); empty when there are none."""
    if not sorted_s:
        return {}
    out = {}
    for q in quantiles:
        name = "max" if q >= 1.0 else f"p{q * 100:g}".replace(".", "")
        out[name] = round(1000 * sorted_s[min(len(sorted_s) - 1, int(q * len(sorted_s)))], 1)
    return out
