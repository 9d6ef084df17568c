"""Per-number token bucket in Redis, shared by every worker on every host.

Two buckets per phone number, taken together in one Lua script so the take is atomic:

* the *number* bucket refills at the number's full rate R; every send takes from it;
* the *campaign* bucket refills at ``(1 - reserve) * R``; campaign sends take from it too.

Campaign traffic therefore never exceeds ``(1 - reserve) * R``, the number as a whole never
exceeds R, and at least ``reserve * R`` is always left for transactional sends, which take
only from the number bucket. Both refill continuously (tokens are fractional) and are
capped at a small burst.

A bucket alone lets a full burst follow a stall inside one second: a second may then hold
the rate plus the burst (a worker killed or restarted, a job handing over). So every grant
is also written to a send log of 10 ms slots, and no grant takes a window of 102 slots
(1.01-1.02 s) past the rate: Meta counts per second, and no second may hold more than the
rate. The window is a little over a second so that a send written a few milliseconds late
(the event loop busy, the network) still lands in a second that has room.

Campaign grants are written to a second log of their own and held by it to the campaign
share, ``(1 - reserve) * R``, in every window. Without it the campaign bucket's burst could
take part of the reserve in the second after a stall, and a transactional send would wait
for room the reserve had promised it.

Keys carry the phone number id as a Redis Cluster hash tag (``{pnid}``) so every key of one
number lives on one shard and the script may touch them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import redis
import redis.asyncio
from redis.commands.core import AsyncScript

from whatsblast.core.redis import get_async_redis, get_redis

KEY_PREFIX = "wb:bucket"


class TrafficClass(StrEnum):
    CAMPAIGN = "campaign"
    TRANSACTIONAL = "transactional"


@dataclass(frozen=True)
class Grant:
    tokens: int
    wait_s: float  # when ``tokens`` is short of the ask: how long until the next token
    # When the send log counted the grant: Redis's clock, wall-clock seconds (to the
    # millisecond). ``None`` when nothing was asked.
    at: float | None = None


# KEYS[1] number bucket hash, KEYS[2] campaign bucket hash, KEYS[3] pause key,
# KEYS[4] adaptive-rate key, KEYS[5] send log (grants per 10 ms slot, last second),
# KEYS[6] campaign send log (campaign grants only, same slots).
# ARGV: rate, reserve, burst_s, want, is_campaign (1/0)
# Returns {granted, wait_ms, now_ms}: now_ms is the moment the send log counted the grant.
# "now" is Redis's clock, not the caller's: workers on several hosts must agree on it for
# the refill arithmetic, and their clocks may drift apart.
_ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1])
local reserve = tonumber(ARGV[2])
local burst_s = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local is_campaign = ARGV[5] == '1'

local paused_until = tonumber(redis.call('GET', KEYS[3]) or '0')
if paused_until > now then
  return {0, paused_until - now, now}
end
local adaptive = tonumber(redis.call('GET', KEYS[4]) or '0')
if adaptive > 0 and adaptive < rate then rate = adaptive end

local function refill(key, r)
  local cap = math.max(1, r * burst_s)
  local state = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens = tonumber(state[1])
  local ts = tonumber(state[2])
  if tokens == nil then
    -- A new (or lost) bucket starts empty-but-one: a restart never opens with a burst.
    tokens = 1
    ts = now
  end
  if now > ts then tokens = math.min(cap, tokens + (now - ts) * r / 1000.0) end
  return tokens
end

local n_tokens = refill(KEYS[1], rate)
local avail = math.floor(n_tokens)
local c_rate = rate * (1 - reserve)
local c_tokens = 0
if is_campaign then
  c_tokens = refill(KEYS[2], c_rate)
  avail = math.min(avail, math.floor(c_tokens))
end
local granted = math.max(0, math.min(want, avail))

-- The send logs: what the last second granted caps this grant. 102 slots of 10 ms: a grant
-- made anywhere in its slot stays counted for at least 1.01 s (see the module's doc).
-- A log is a hash: one field per slot that holds grants (its count), 'sum' (the counts of
-- the slots still in the window) and 'low' (the oldest slot still counted). A call retires
-- only the slots that left the window since the one before, a handful when a number sends:
-- reading all 102 slots on every call (HMGET) made the script cost 420 us of Redis's one
-- thread, and at 1,000 grants a second (50 numbers at 20 msg/s) Redis was busy 45 % of the
-- time, every grant queueing behind the others.
local slot = math.floor(now / 10)
local first = slot - 101
local function window_advance(key)
  local state = redis.call('HMGET', key, 'sum', 'low')
  local used = tonumber(state[1]) or 0
  local low = tonumber(state[2])
  if low ~= nil and first - low > 102 then
    -- Idle for longer than a window: every slot it holds has left it.
    redis.call('DEL', key)
    low = nil
  end
  if low == nil then return 0, first end
  for s = low, first - 1 do
    local c = redis.call('HGET', key, s)
    if c then
      used = used - tonumber(c)
      redis.call('HDEL', key, s)
    end
  end
  return used, math.max(low, first)
end
-- How many more the window takes under ``limit``, what it holds, and its oldest slot.
local function window_room(key, limit)
  local used, low = window_advance(key)
  return math.max(0, math.floor(limit) - math.max(0, used)), used, low
end
-- Room comes back when the oldest slot of the window that holds a grant leaves it.
local function log_wait_for(key, low)
  for s = low, slot do
    local c = tonumber(redis.call('HGET', key, s))
    if c and c > 0 then return math.max(1, (s + 102) * 10 - now) end
  end
  return 10
end
local function write_log(key, used, low)
  if granted > 0 then redis.call('HINCRBY', key, slot, granted) end
  redis.call('HSET', key, 'sum', used + granted, 'low', low)
  redis.call('PEXPIRE', key, 2000)
end

local log_wait = 0
local room, used, low = window_room(KEYS[5], rate)
if granted > room then
  granted = room
  log_wait = log_wait_for(KEYS[5], low)
end
if is_campaign then
  local c_room, c_used, c_low = window_room(KEYS[6], c_rate)
  if granted > c_room then
    granted = c_room
    log_wait = math.max(log_wait, log_wait_for(KEYS[6], c_low))
  end
  write_log(KEYS[6], c_used, c_low)
end
write_log(KEYS[5], used, low)

n_tokens = n_tokens - granted
redis.call('HSET', KEYS[1], 'tokens', n_tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], 60000)
local wait = 0
if granted < want then
  wait = math.ceil((1 - (n_tokens - math.floor(n_tokens))) * 1000.0 / rate)
  if log_wait > wait then wait = log_wait end
end
if is_campaign then
  c_tokens = c_tokens - granted
  redis.call('HSET', KEYS[2], 'tokens', c_tokens, 'ts', now)
  redis.call('PEXPIRE', KEYS[2], 60000)
  if granted < want and c_rate > 0 then
    local c_wait = math.ceil((1 - (c_tokens - math.floor(c_tokens))) * 1000.0 / c_rate)
    if c_wait > wait then wait = c_wait end
  end
end
return {granted, wait, now}
"""

# Give back tokens that were taken but not used (fewer rows to claim than tokens).
# KEYS: the send log, the campaign send log, the number bucket, the campaign bucket.
# ARGV: tokens, is_campaign (1/0). A log takes the refund off its current slot: within a
# few ms of the grant's own slot, so the window's sum is right again. Only what exists is
# touched: a bucket or log that expired meanwhile is not brought back by a refund.
_REFUND_LUA = """
local n = tonumber(ARGV[1])
local is_campaign = ARGV[2] == '1'
local t = redis.call('TIME')
local slot = math.floor((tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) / 10)
local function refund_log(key)
  if redis.call('EXISTS', key) == 1 then
    redis.call('HINCRBY', key, slot, -n)
    redis.call('HINCRBY', key, 'sum', -n)
  end
end
local function refund_bucket(key)
  if redis.call('EXISTS', key) == 1 then redis.call('HINCRBYFLOAT', key, 'tokens', n) end
end
refund_log(KEYS[1])
refund_bucket(KEYS[3])
if is_campaign then
  refund_log(KEYS[2])
  refund_bucket(KEYS[4])
end
return 1
"""


_async_scripts: dict[int, AsyncScript] = {}


class TokenBucket:
    """The shared limiter of one phone number."""

    def __init__(
        self,
        phone_number_id: str,
        *,
        rate: float,
        reserve: float,
        burst_s: float = 0.05,
        conn: redis.Redis | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        if not 0 <= reserve < 1:
            raise ValueError("reserve must be in [0, 1)")
        self.phone_number_id = phone_number_id
        self.rate = rate
        self.reserve = reserve
        self.burst_s = burst_s
        self._conn = conn or get_redis()
        tag = f"{{{phone_number_id}}}"
        self.number_key = f"{KEY_PREFIX}:{tag}:number"
        self.campaign_key = f"{KEY_PREFIX}:{tag}:campaign"
        self.pause_key = f"{KEY_PREFIX}:{tag}:paused_until"
        self.adaptive_key = f"{KEY_PREFIX}:{tag}:adaptive_rate"
        self.log_key = f"{KEY_PREFIX}:{tag}:log"
        self.campaign_log_key = f"{KEY_PREFIX}:{tag}:campaign_log"
        self._acquire = self._conn.register_script(_ACQUIRE_LUA)
        self._refund = self._conn.register_script(_REFUND_LUA)

    def _call(self, want: int, traffic: TrafficClass) -> tuple[list[str], list[float | int]]:
        keys = [self.number_key, self.campaign_key, self.pause_key, self.adaptive_key]
        args: list[float | int] = [self.rate, self.reserve, self.burst_s, want]
        args.append(1 if traffic is TrafficClass.CAMPAIGN else 0)
        return [*keys, self.log_key, self.campaign_log_key], args

    def acquire(self, want: int, traffic: TrafficClass) -> Grant:
        """Take up to ``want`` tokens now; never blocks."""
        if want <= 0:
            return Grant(0, 0.0)
        keys, args = self._call(want, traffic)
        granted, wait_ms, now_ms = self._acquire(keys=keys, args=args)
        return Grant(int(granted), int(wait_ms) / 1000.0, int(now_ms) / 1000.0)

    async def acquire_async(self, want: int, traffic: TrafficClass) -> Grant:
        """``acquire`` from an event loop, through that loop's own Redis client.

        The senders call it at the moment of the write, for the rows they are about to
        send: what the send log counts is what leaves, when it leaves.
        """
        if want <= 0:
            return Grant(0, 0.0)
        script = _async_scripts.get(id(self._async_conn()))
        if script is None:
            script = self._async_conn().register_script(_ACQUIRE_LUA)
            _async_scripts[id(self._async_conn())] = script
        keys, args = self._call(want, traffic)
        granted, wait_ms, now_ms = await script(keys=keys, args=args)
        return Grant(int(granted), int(wait_ms) / 1000.0, int(now_ms) / 1000.0)

    @staticmethod
    def _async_conn() -> redis.asyncio.Redis:
        return get_async_redis()

    def refund(self, tokens: int, traffic: TrafficClass) -> None:
        if tokens <= 0:
            return
        keys = [self.log_key, self.campaign_log_key, self.number_key, self.campaign_key]
        is_campaign = 1 if traffic is TrafficClass.CAMPAIGN else 0
        self._refund(keys=keys, args=[tokens, is_campaign])

    def pause(self, seconds: float) -> None:
        """Empty the bucket and refuse every take until ``seconds`` from now."""
        until = _now_ms(self._conn) + math.ceil(seconds * 1000)
        pipe = self._conn.pipeline()
        pipe.set(self.pause_key, until, px=math.ceil(seconds * 1000) + 1000)
        pipe.hset(self.number_key, mapping={"tokens": 0, "ts": until})
        pipe.hset(self.campaign_key, mapping={"tokens": 0, "ts": until})
        pipe.execute()

    def paused_for(self) -> float:
        until = int(self._conn.get(self.pause_key) or 0)
        return max(0.0, (until - _now_ms(self._conn)) / 1000.0)

    def set_adaptive_rate(self, rate: float | None) -> None:
        if rate is None or rate >= self.rate:
            self._conn.delete(self.adaptive_key)
        else:
            self._conn.set(self.adaptive_key, max(1.0, rate), ex=3600)

    def adaptive_rate(self) -> float | None:
        value = self._conn.get(self.adaptive_key)
        return float(value) if value is not None else None


def _now_ms(conn: redis.Redis) -> int:
    seconds, micros = conn.time()
    return int(seconds) * 1000 + int(micros) // 1000
