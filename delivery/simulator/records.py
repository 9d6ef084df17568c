"""What the simulator saw: one compact row per request, counts and per-second histograms."""

from __future__ import annotations

import base64
import os
from collections import Counter, deque
from typing import Any, NamedTuple

ACCEPTED = "accepted"
ACCEPTED_HELD = "accepted_timeout"  # sent, but the answer was held past the client's timeout
ACCEPTED_LATE_FAIL = "accepted_async_failure"  # sent, then a `failed` status webhook
ACCEPTED_OUTCOMES = frozenset((ACCEPTED, ACCEPTED_HELD, ACCEPTED_LATE_FAIL))


class Row(NamedTuple):
    """One request. A tuple of small values: a million of them fit in a few hundred MB."""

    seq: int
    mono: float
    wall: float
    phone_number_id: str
    to: str
    template: str | None
    outcome: str  # ACCEPTED* or the error code as a string
    callback_data: str | None
    template_id: str | None = None  # the template's id, for analytics (a template send)
    endpoint: str = ""  # "messages" or "marketing_messages"


def wamid_for(seq: int, to: str, run_id: bytes) -> str:
    """A wamid in Meta's style (base64 after ``wamid.``), unique per run and sequence."""
    raw = b"\x18\x0b" + to.encode()[-15:] + b"\x15\x02\x00" + run_id + seq.to_bytes(8, "big")
    return "wamid." + base64.b64encode(raw).decode()


class Recorder:
    def __init__(self, *, record_cap: int, body_cap: int) -> None:
        self.record_cap = record_cap
        self.rows: list[Row] = []
        self.bodies: deque[tuple[int, bytes]] = deque(maxlen=max(0, body_cap))
        self.counts: Counter[str] = Counter()
        self.per_number: dict[str, Counter[str]] = {}
        self.histograms: dict[str, dict[int, int]] = {}
        self.dropped = 0
        self.requests = 0
        self.accepted = 0
        self.seq = 0
        # Sequence numbers restart with every recorder (process start, reset); the run id
        # keeps wamids unique anyway, as Meta's are: a database that outlives a simulator
        # run must never see one twice.
        self.run_id = os.urandom(6)
        self._interned: dict[str, str] = {}

    def wamid(self, seq: int, to: str) -> str:
        return wamid_for(seq, to, self.run_id)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def add(
        self,
        *,
        seq: int,
        mono: float,
        wall: float,
        phone_number_id: str,
        to: str,
        template: str | None,
        outcome: str,
        callback_data: str | None,
        body: bytes,
        template_id: str | None = None,
        endpoint: str = "",
    ) -> None:
        intern = self._interned.setdefault
        phone_number_id = intern(phone_number_id, phone_number_id)
        template = intern(template, template) if template else template
        self.requests += 1
        self.counts[outcome] += 1
        number = self.per_number.get(phone_number_id)
        if number is None:
            number = self.per_number[phone_number_id] = Counter()
        number[outcome] += 1
        if outcome in ACCEPTED_OUTCOMES:
            self.accepted += 1
            histogram = self.histograms.setdefault(phone_number_id, {})
            second = int(wall)
            histogram[second] = histogram.get(second, 0) + 1
        if len(self.rows) >= self.record_cap:
            self.dropped += 1
            return
        endpoint = intern(endpoint, endpoint)
        row = Row(
            seq, mono, wall, phone_number_id, to, template, outcome, callback_data,
            template_id, endpoint,
        )  # fmt: skip
        self.rows.append(row)
        if self.bodies.maxlen:
            self.bodies.append((seq, body))

    def rows_json(
        self, *, after: int = 0, limit: int | None = None, bodies: bool = False
    ) -> list[dict[str, Any]]:
        start = _first_after(self.rows, after)
        selected = self.rows[start : start + limit if limit else None]
        by_seq = dict(self.bodies) if bodies else {}
        result = []
        for row in selected:
            item = row._asdict()
            item["wamid"] = (
                self.wamid(row.seq, row.to) if row.outcome in ACCEPTED_OUTCOMES else None
            )
            if bodies:
                raw = by_seq.get(row.seq)
                item["body"] = raw.decode("utf-8", "replace") if raw is not None else None
            result.append(item)
        return result

    def accepted_row(self, wamid: str) -> Row | None:
        """The accepted send ``wamid`` names (its sequence number is its last 8 bytes), or
        None: not this run's, not accepted, or past the record cap."""
        try:
            raw = base64.b64decode(wamid.removeprefix("wamid."), validate=True)
        except ValueError:
            return None
        if len(raw) < 8 or raw[-14:-8] != self.run_id:
            return None
        seq = int.from_bytes(raw[-8:], "big")
        index = _first_after(self.rows, seq - 1)
        if index >= len(self.rows):
            return None
        row = self.rows[index]
        if row.seq != seq or row.outcome not in ACCEPTED_OUTCOMES:
            return None
        return row

    def accepted_per_recipient(self) -> dict[str, dict[str, int]]:
        """Accepted sends per (number, recipient), only where there was more than one."""
        counts: Counter[tuple[str, str]] = Counter(
            (row.phone_number_id, row.to) for row in self.rows if row.outcome in ACCEPTED_OUTCOMES
        )
        report: dict[str, dict[str, int]] = {}
        for (number, to), n in counts.items():
            if n > 1:
                report.setdefault(number, {})[to] = n
        return report

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "accepted": self.accepted,
            "by_outcome": dict(self.counts),
            "per_number": {k: dict(v) for k, v in self.per_number.items()},
            "records_kept": len(self.rows),
            "records_dropped": self.dropped,
        }

    def histogram(self, phone_number_id: str) -> dict[str, int]:
        return {str(s): n for s, n in sorted(self.histograms.get(phone_number_id, {}).items())}


def _first_after(rows: list[Row], seq: int) -> int:
    """Index of the first row with a seq above ``seq`` (rows are in seq order)."""
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid].seq <= seq:
            lo = mid + 1
        else:
            hi = mid
    return lo
