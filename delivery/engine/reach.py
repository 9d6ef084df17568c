"""Messaging-limit guard: unique users a business portfolio reaches in a rolling 24 h.

Meta returns no error when the portfolio's limit (250 / 2K / 10K / 100K / unlimited unique
users per rolling 24 h, shared by all its numbers) runs out: messages are silently not
delivered. So the engine budgets it itself. One sorted set per account holds each user
reached with the time of first reach; entries older than 24 h fall out. A send to a user
already in the set is free; a new user is admitted only while the set is below the limit.

Redis is not the source of truth: when the set is missing (Redis restarted, or the key was
evicted) the caller's ``seed`` rebuilds it from the message table before anything is
admitted, so losing Redis never resets the budget (``reach_from_table``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis
from django.db import connection

from whatsblast.core.redis import get_redis

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


# Users the portfolio reached in the last 24 h as the table knows them, scored by first
# reach in epoch ms like the set: campaign rows that went out (sent_at), rows in doubt
# (unknown: a send was attempted), and rows in flight (sending) claimed over a second ago.
# A row claimed within the last second may not have been admitted yet (the admission
# follows the claim by one Redis round trip): counting it would admit it for free. Runs
# only when the set is missing, once per worker that notices.
_REACHED_SQL = """
SELECT m."to", (extract(epoch FROM min(coalesce(m.sent_at, m.claimed_at))) * 1000)::bigint
  FROM delivery_message m
  JOIN campaigns_phonenumber p ON p.id = m.phone_number_id
  JOIN campaigns_businessaccount a ON a.id = p.account_id
 WHERE a.waba_id = %(waba_id)s
   AND m.kind = 'campaign'
   AND (m.sent_at >= now() - interval '24 hours'
        OR (m.status = 'unknown' AND m.claimed_at >= now() - interval '24 hours')
        OR (m.status = 'sending' AND m.claimed_at >= now() - interval '24 hours'
            AND m.claimed_at < now() - interval '1 second'))
 GROUP BY m."to"
"""


def reach_from_table(*, waba_id: str) -> list[tuple[str, int]]:
    """(recipient, first reach in epoch ms) for every user reached in the last 24 h."""
    with connection.cursor() as cursor:
        cursor.execute(_REACHED_SQL, {"waba_id": waba_id})
        return [(to, int(ms)) for to, ms in cursor.fetchall()]


def reach_admit(
    *,
    waba_id: str,
    limit: int | None,
    recipients: Sequence[str],
    seed: Callable[[], list[tuple[str, int]]] | None = None,
    conn: redis.Redis | None = None,
) -> Admission:
    """Admit recipients against the account's rolling 24 h unique-user budget.

    ``seed`` (e.g. ``lambda: reach_from_table(waba_id=...)``) refills a missing set first.
    Every admission follows its own worker's seeding, so once the set exists it holds the
    table's users: workers seeding at once only add the same members again (ZADD NX).
    """
    if limit is None or not recipients:
        return Admission(list(recipients), [], 0.0)
    conn = conn or get_redis()
    key = reach_key(waba_id)
    if seed is not None and not conn.exists(key):
        reached = seed()
        if reached:
            pipe = conn.pipeline()
            pipe.zadd(key, dict(reached), nx=True)
            pipe.pexpire(key, WINDOW_MS)
            pipe.execute()
    flags = conn.eval(_ADMIT_LUA, 1, key, WINDOW_MS, limit, *recipients)
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
