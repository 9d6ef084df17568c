"""How fast and how many at once: a number's bucket, and the sends kept in flight.

Two controls, two reasons (design.md): the token bucket caps the rate, and concurrency
covers the API's latency (Little's law: in flight = rate x latency, so 250 msg/s at 250 ms
needs about 63 in flight).
"""

from __future__ import annotations

import math

from campaigns.models import PhoneNumber
from delivery.engine.ratelimit import TokenBucket

# The bucket runs at the number's exact rate: what keeps every second at or under it is the
# send log in the same script (no grant takes a window of 1.00-1.01 s past the rate, at the
# moment of the write). Pacing under the rate as well would only waste throughput: with a
# 0.985 headroom the log's cap fell to floor(78.8) = 78 a second at 80 msg/s, 3.5 % lost.
# The burst covers the send loop's own jitter (a claim, a flush) without letting a stall
# turn into a spike: a tenth of a second's tokens, at most BURST_MAX_TOKENS.
BURST_SECONDS = 0.1
BURST_MAX_TOKENS = 25
MAX_CONCURRENCY = 256
MIN_CONCURRENCY = 4


def number_bucket(phone_number: PhoneNumber) -> TokenBucket:
    """The shared limiter of ``phone_number``, as every sender and transactional send uses it."""
    rate = phone_number.rate_per_second
    return TokenBucket(
        phone_number.phone_number_id,
        rate=float(rate),
        reserve=float(phone_number.transactional_reserve),
        burst_s=min(BURST_SECONDS, BURST_MAX_TOKENS / max(1, rate)),
    )


def concurrency_for(rate: float, latency_s: float) -> int:
    """In-flight sends needed to sustain ``rate`` at ``latency_s`` (Little's law + 50 %)."""
    return max(MIN_CONCURRENCY, min(MAX_CONCURRENCY, math.ceil(rate * latency_s * 1.5) + 2))
