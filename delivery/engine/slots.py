"""Send slots: how many sender jobs run for a campaign at once, and which job owns each.

A running campaign has a fixed number of slots. Each slot is a chain of RQ jobs (a job
sends for a few seconds, then enqueues its own continuation), and owns a lease in Redis
holding a random token. Only the job carrying the slot's current token may run, so a
duplicated or late job exits at once. When a worker dies its chain breaks, the lease
expires, and the next kick starts a fresh chain for that slot: a crash costs seconds, never
the campaign.
"""

from __future__ import annotations

import uuid

import redis

from whatsblast.core.redis import get_redis

# Renewed every half second by the running job, so a short lease costs nothing while the
# job lives and bounds the pause after a worker is killed: the slot frees LEASE_S after the
# last renewal and the next maintenance tick starts a fresh chain. A job stalled past the
# lease only loses its slot (it stops at its next check); claims are SKIP LOCKED and the
# bucket is shared, so a short overlap of two chains sends nothing twice and nothing faster.
LEASE_S = 10

_RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def slot_key(campaign_id: int, slot: int) -> str:
    return f"wb:slot:{{c{campaign_id}}}:{slot}"


def slot_reserve(campaign_id: int, slot: int, conn: redis.Redis | None = None) -> str | None:
    """Take a free slot for a new job chain; the token, or ``None`` when the slot is held."""
    token = uuid.uuid4().hex
    conn = conn or get_redis()
    if conn.set(slot_key(campaign_id, slot), token, nx=True, ex=LEASE_S):
        return token
    return None


def slot_renew(campaign_id: int, slot: int, token: str, conn: redis.Redis | None = None) -> bool:
    """Extend the lease; ``False`` means this job no longer owns the slot and must stop."""
    conn = conn or get_redis()
    return bool(conn.eval(_RENEW_LUA, 1, slot_key(campaign_id, slot), token, LEASE_S))


def slot_release(campaign_id: int, slot: int, token: str, conn: redis.Redis | None = None) -> None:
    conn = conn or get_redis()
    conn.eval(_RELEASE_LUA, 1, slot_key(campaign_id, slot), token)


def slots_held(campaign_id: int, slots: int, conn: redis.Redis | None = None) -> list[bool]:
    conn = conn or get_redis()
    pipe = conn.pipeline(transaction=False)
    for slot in range(slots):
        pipe.exists(slot_key(campaign_id, slot))
    return [bool(x) for x in pipe.execute()]
