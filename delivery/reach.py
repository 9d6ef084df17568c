"""Messaging-limit guard: unique users a business portfolio reaches in a rolling 24 h.

Meta returns no error when the portfolio's limit (250 / 2K / 10K / 100K / unlimited unique
users per rolling 24 h, shared by all its numbers) runs out: messages are silently not
delivered. So the engine budgets it itself. One sorted set per account holds each user
reached with the time of first reach; entries older than 24 h fall out. A send to a user
already in the set is free; a new user is admitted only while the set is below the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import redis

from whatsblast.redis import get_redis

WINDOW_MS = 24 * 3600 * 1000

# KEYS[1] the account's reach set. ARGV[1] window ms, ARGV[2] limit, ARGV[3..] recipients.
# Returns {admitted flags (1/0) per recipient..., ms until the oldest entry expires}.
_ADMIT_LUA = """
local WINDOW = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - WINDOW)
local count = redis.call('ZCARD', KEYS[1])
local out = {}
for i = 3, #ARGV do
  local user = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], user) then
    out[#out + 1] = 1
  elseif count < limit then
    redis.call('ZADD', KEYS[1], now, user)
    count = count + 1
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local free_in = 0
if count >= limit and oldest[2] then free_in = tonumber(oldest[2]) + WINDOW - now end
redis.call('PEXPIRE', KEYS[1], WINDOW)
out[#out + 1] = free_in
return out
"""


@dataclass(frozen=True)
class Admission:
    admitted: list[str]
    refused: list[str]
    room_frees_in_s: float  # when some were refused: how long until the oldest reach expires


def reach_key(waba_id: str) -> str:
    return f"wb:reach:{{{waba_id}}}"


def reach_admit(
    *,
    waba_id: str,
    limit: int | None,
    recipients: Sequence[str],
    conn: redis.Redis | None = None,
) -> Admission:
    """Admit recipients against the account's rolling 24 h unique-user budget."""
    if limit is None or not recipients:
        return Admission(list(recipients), [], 0.0)
    conn = conn or get_redis()
    flags = conn.eval(_ADMIT_LUA, 1, reach_key(waba_id), WINDOW_MS, limit, *recipients)
    *admitted_flags, free_in_ms = flags
    admitted = [r for r, ok in zip(recipients, admitted_flags, strict=True) if ok]
    refused = [r for r, ok in zip(recipients, admitted_flags, strict=True) if not ok]
    return Admission(admitted, refused, int(free_in_ms) / 1000.0)


def reach_used(*, waba_id: str, conn: redis.Redis | None = None) -> int:
    """Unique users reached in the last 24 h (as far as this Redis knows)."""
    conn = conn or get_redis()
    seconds, micros = conn.time()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    return int(conn.zcount(reach_key(waba_id), now_ms - WINDOW_MS, "+inf"))
