"""Meta's limits as the simulator enforces them: throughput, pair rate, messaging limit."""

from __future__ import annotations


class TokenBucket:
    """``rate`` tokens per second up to ``size``; a send takes one."""

    __slots__ = ("rate", "size", "tokens", "stamp")

    def __init__(self, rate: float, size: float, now: float) -> None:
        self.rate = rate
        self.size = size
        self.tokens = size
        self.stamp = now

    def take(self, now: float) -> bool:
        self.tokens = min(self.size, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class PairLimiter:
    """One bucket per (number, recipient): 1 message / 6 s with a burst of 45 by default.

    Buckets that have refilled are swept away, so a campaign that messages each user once
    keeps only the last few minutes of recipients in memory.
    """

    def __init__(self) -> None:
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        self.last_sweep = 0.0

    def take(self, key: tuple[str, str], *, rate: float, burst: float, now: float) -> bool:
        if now - self.last_sweep > 30.0:
            self.sweep(now)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = TokenBucket(rate, max(1.0, burst), now)
        return bucket.take(now)

    def sweep(self, now: float) -> None:
        self.last_sweep = now
        full = [
            key for key, b in self.buckets.items() if b.tokens + (now - b.stamp) * b.rate >= b.size
        ]
        for key in full:
            del self.buckets[key]


class ReachWindow:
    """Unique recipients of one number within a rolling window (Meta's messaging limit).

    The dict keeps recipients in order of their latest send, so expired ones are popped from
    the front in O(1) each.
    """

    def __init__(self) -> None:
        self.last_sent: dict[str, float] = {}

    def admit(self, recipient: str, *, limit: int, window_s: float, now: float) -> bool:
        horizon = now - window_s
        while self.last_sent:
            oldest = next(iter(self.last_sent))
            if self.last_sent[oldest] > horizon:
                break
            del self.last_sent[oldest]
        if recipient in self.last_sent:
            del self.last_sent[recipient]
        elif len(self.last_sent) >= limit:
            return False
        self.last_sent[recipient] = now
        return True
