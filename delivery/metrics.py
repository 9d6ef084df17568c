"""The engine's counters: sends by number, traffic and outcome, errors by code, latency,
token waits, dead letters (written to Redis by ``whatsblast.core.counters``)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import redis

from delivery.cloud.client import Accepted, SendResult
from delivery.cloud.outcomes import classify
from delivery.messages import Settlement
from whatsblast.core.counters import KEY_PREFIX, counters_add

# field "<phone_number_id>|<traffic>|<outcome>" -> sends
SENDS_KEY = f"{KEY_PREFIX}:sends"
# field "<phone_number_id>|<code>" -> failed sends (code: Meta's, "http_<status>" or "transport")
ERRORS_KEY = f"{KEY_PREFIX}:errors"
# field "<phone_number_id>|<traffic>" -> seconds a sender spent short of tokens
TOKEN_WAIT_KEY = f"{KEY_PREFIX}:token_wait"
# field "<phone_number_id>|<bucket index>" -> calls (not cumulative); "|sum", "|count"
LATENCY_KEY = f"{KEY_PREFIX}:latency"
# field "<phone_number_id>" -> dead letters created
DEAD_LETTERS_KEY = f"{KEY_PREFIX}:dead_letters"
KEYS = (SENDS_KEY, ERRORS_KEY, TOKEN_WAIT_KEY, LATENCY_KEY, DEAD_LETTERS_KEY)

# Upper bounds (seconds) of the Cloud API latency histogram; +Inf is implicit. Meta answers
# in 100-500 ms; the top buckets catch read timeouts (WHATSAPP_READ_TIMEOUT, 10 s).
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# A long token wait (a paused number) is written at least this often, not only at flushes.
TOKEN_WAIT_WRITE_INTERVAL_S = 1.0


def error_label(result: SendResult) -> str | None:
    """The ``code`` label of a failed send; ``None`` for an accepted one."""
    if isinstance(result, Accepted):
        return None
    if result.code is not None:
        return str(result.code)
    if result.http_status is not None:
        return f"http_{result.http_status}"
    return "transport"


def latency_bucket(seconds: float) -> int:
    """Index of the first bucket holding ``seconds``; ``len(LATENCY_BUCKETS)`` is +Inf."""
    for index, bound in enumerate(LATENCY_BUCKETS):
        if seconds <= bound:
            return index
    return len(LATENCY_BUCKETS)


class SendMeter:
    """One sender's measurements for one phone number, written to Redis at each flush.

    ``tokens`` is told of every bucket grant. The sender is *waiting for tokens* from a
    grant short of its ask until a grant that fills it: at the configured rate a sender is
    paced by the bucket and waits nearly all the time (rate of the counter ~ 1 s/s per
    sender); when the API is slow it waits for responses instead and this stays near 0.
    """

    def __init__(
        self, phone_number_id: str, traffic: str, *, conn: redis.Redis | None = None
    ) -> None:
        self.phone_number_id = phone_number_id
        self.traffic = str(traffic)
        self._conn = conn
        self._waiting_since: float | None = None
        self._waited_s = 0.0
        self._last_write = time.monotonic()

    def tokens(self, *, asked: int, granted: int) -> None:
        now = time.monotonic()
        if granted < asked:
            if self._waiting_since is None:
                self._waiting_since = now
        elif self._waiting_since is not None:
            self._waited_s += now - self._waiting_since
            self._waiting_since = None
        if now - self._last_write >= TOKEN_WAIT_WRITE_INTERVAL_S and self._pending_wait(now):
            self.flush(results=(), settlements=())

    def _pending_wait(self, now: float) -> float:
        current = now - self._waiting_since if self._waiting_since is not None else 0.0
        return self._waited_s + current

    def flush(
        self,
        *,
        results: Sequence[SendResult],
        settlements: Sequence[Settlement | None] = (),
    ) -> None:
        """Write a batch's sends, errors, latencies, dead letters and token wait at once."""
        now = time.monotonic()
        waited = self._pending_wait(now)
        if self._waiting_since is not None:
            self._waiting_since = now  # the wait goes on; count the rest next time
        self._waited_s = 0.0
        self._last_write = now
        counters_add(self._increments(results, settlements, waited), self._conn)

    def _increments(
        self,
        results: Sequence[SendResult],
        settlements: Sequence[Settlement | None],
        waited: float,
    ) -> list[tuple[str, str, str, float]]:
        pnid = self.phone_number_id
        outcomes = Counter(str(classify(result)) for result in results)
        errors = Counter(label for r in results if (label := error_label(r)) is not None)
        buckets = Counter(latency_bucket(result.latency_s) for result in results)
        ops: list[tuple[str, str, str, float]] = [
            ("int", SENDS_KEY, f"{pnid}|{self.traffic}|{outcome}", n)
            for outcome, n in outcomes.items()
        ]
        ops += [("int", ERRORS_KEY, f"{pnid}|{code}", n) for code, n in errors.items()]
        ops += [("int", LATENCY_KEY, f"{pnid}|{index}", n) for index, n in buckets.items()]
        if results:
            total = sum(result.latency_s for result in results)
            ops += [
                ("float", LATENCY_KEY, f"{pnid}|sum", total),
                ("int", LATENCY_KEY, f"{pnid}|count", len(results)),
            ]
        dead = sum(1 for s in settlements if s is not None and s.status == "dead")
        if dead:
            ops.append(("int", DEAD_LETTERS_KEY, pnid, dead))
        if waited > 0:
            ops.append(("float", TOKEN_WAIT_KEY, f"{pnid}|{self.traffic}", waited))
        return ops
