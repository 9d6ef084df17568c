"""Each API key's own request quota: a sliding one-second window in Redis.

The window is two fixed windows blended (the previous one's count weighted by how much of
it still overlaps), which holds a caller to its quota across window edges where a plain
fixed window would let twice the quota through. One script call per request, atomic, on
Redis's clock so several web hosts agree.
"""

from __future__ import annotations

import logging
import math

import redis

from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

KEY_PREFIX = "wb:api:quota"
WINDOW_MS = 1000

# KEYS[1] the key's window state; ARGV: limit, window_ms. Returns {allowed, retry_after_ms}.
_TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local idx = math.floor(now / window)
local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local w = tonumber(state[1]) or idx
local c = tonumber(state[2]) or 0
local p = tonumber(state[3]) or 0
if idx == w + 1 then
  p = c
  c = 0
elseif idx > w + 1 then
  p = 0
  c = 0
end
local into = (now % window) / window
if p * (1 - into) + c + 1 > limit then
  return {0, window - (now % window)}
end
redis.call('HSET', KEYS[1], 'w', idx, 'c', c + 1, 'p', p)
redis.call('PEXPIRE', KEYS[1], window * 2)
return {1, 0}
"""


def quota_take(*, api_key_id: int, limit: int, conn: redis.Redis | None = None) -> float | None:
    """Count one request; ``None`` when allowed, else seconds until one may be.

    Fails open: with Redis unreachable the request goes on (an OTP matters more than the
    quota), and the send itself will wait for the queue like any other.
    """
    conn = conn or get_redis()
    try:
        allowed, retry_ms = conn.register_script(_TAKE_LUA)(
            keys=[f"{KEY_PREFIX}:{{{api_key_id}}}"], args=[max(1, limit), WINDOW_MS]
        )
    except redis.RedisError as exc:
        logger.warning("API quota unavailable (%s); request allowed", type(exc).__name__)
        return None
    return None if allowed else max(0.001, int(retry_ms) / 1000.0)


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
