"""Send slots: how many senders serve a phone number at once, and who holds each.

A number has a fixed number of slots (one per ``CAMPAIGN_SLOT_RATE`` msg/s of its campaign
share). Each slot is held by one sender, in one worker process, through a lease in Redis
whose value names the holder (``<token>|<host>:<pid>``). Only the holder of the current
value may send for the slot: a duplicated or late job finds the value changed and stops.
When a worker dies its leases expire and the next maintenance tick offers the slots again.
"""

from __future__ import annotations

import os
import socket
import uuid

import redis

from whatsblast.core.redis import get_redis

# Renewed every LEASE_RENEW_S by the holder, so a short lease costs nothing while it lives
# and bounds the pause after a worker is killed: the slot frees LEASE_S after the last
# renewal and the next tick offers it again. A holder stalled past the lease only loses
# the slot (it stops at its next renewal); claims are SKIP LOCKED and the bucket is
# shared, so a short overlap of two holders sends nothing twice and nothing faster.
LEASE_S = 10
LEASE_RENEW_S = 2.0

_TAKE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0
"""

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


def holder_name() -> str:
    """This process, as a lease names it: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def slot_key(phone_number_id: str, slot: int) -> str:
    return f"wb:slot:{{{phone_number_id}}}:{slot}"


def lease_holder(value: str | bytes | None) -> str | None:
    """The ``host:pid`` a lease value names, if any."""
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    return text.split("|", 1)[1] if "|" in text else None


def _value(holder: str) -> str:
    return f"{uuid.uuid4().hex}|{holder}"


def slot_reserve(
    phone_number_id: str, slot: int, *, holder: str = "kick", conn: redis.Redis | None = None
) -> str | None:
    """Take a free slot; the lease value, or ``None`` when the slot is held."""
    value = _value(holder)
    conn = conn or get_redis()
    if conn.set(slot_key(phone_number_id, slot), value, nx=True, ex=LEASE_S):
        return value
    return None


def slot_take(
    phone_number_id: str, slot: int, token: str, *, holder: str, conn: redis.Redis | None = None
) -> str | None:
    """Take over a slot reserved under ``token`` (by the kick) in this holder's name."""
    value = _value(holder)
    conn = conn or get_redis()
    taken = conn.eval(_TAKE_LUA, 1, slot_key(phone_number_id, slot), token, value, LEASE_S)
    return value if taken else None


def slot_renew(
    phone_number_id: str, slot: int, token: str, conn: redis.Redis | None = None
) -> bool:
    """Extend the lease; ``False`` means the slot is no longer this holder's."""
    conn = conn or get_redis()
    return bool(conn.eval(_RENEW_LUA, 1, slot_key(phone_number_id, slot), token, LEASE_S))


def slot_release(
    phone_number_id: str, slot: int, token: str, conn: redis.Redis | None = None
) -> None:
    conn = conn or get_redis()
    conn.eval(_RELEASE_LUA, 1, slot_key(phone_number_id, slot), token)


def slots_held_many(
    numbers: list[tuple[str, int]], conn: redis.Redis | None = None
) -> list[list[bool]]:
    """Which slots of each (phone number id, slot count) are held: one round trip for all."""
    if not numbers:
        return []
    conn = conn or get_redis()
    pipe = conn.pipeline(transaction=False)
    for phone_number_id, count in numbers:
        for slot in range(count):
            pipe.exists(slot_key(phone_number_id, slot))
    flags = [bool(x) for x in pipe.execute()]
    held: list[list[bool]] = []
    start = 0
    for _, count in numbers:
        held.append(flags[start : start + count])
        start += count
    return held
