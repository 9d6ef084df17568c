"""Retry delays: exponential backoff with full jitter, and Meta's documented waits."""

from __future__ import annotations

import random

BASE_S = 1.0
CAP_S = 300.0
# 131056: Meta asks for 4^x seconds before retrying the same user (x = hits so far).
PAIR_LIMIT_CAP_S = 4.0**6
# 131049: retrying a capped user within 24 h extends the block.
USER_CAP_WAIT_S = 24 * 3600.0


def backoff_delay(attempt: int, *, base_s: float = BASE_S, cap_s: float = CAP_S) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2^attempt)] (AWS architecture blog).

    Jitter spreads a wave of simultaneous failures so the retries do not all hit Meta in
    the same second again.
    """
    ceiling = min(cap_s, base_s * 2.0 ** max(0, attempt))
    return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography


def pair_limit_delay(hits: int) -> float:
    return min(PAIR_LIMIT_CAP_S, 4.0 ** max(0, hits))
