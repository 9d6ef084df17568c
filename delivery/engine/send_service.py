"""A worker process's send loop: every number slot it holds, served from one event loop.

RQ orchestrates and the service sends. A kick (``dispatch.number_kick``: a launch, a
resume, the maintenance tick) reserves a free slot of a number and queues a
``number_send_job``; the worker that takes the job hands the slot to its ``SendService``
and returns at once, so the same worker goes on taking transactional and maintenance jobs
while its service sends for every slot it holds. Senders are coroutines on the Cloud API
transport's event loop (``delivery.cloud.transport``), so one process serves many numbers
and campaigns at once; their database work runs in the service's own threads, and their
results are recorded together, a few statements per flush whatever the number of
senders.

A slot's lease is renewed while its sender lives. A worker that dies loses its leases
after ``slots.LEASE_S``; the next tick offers the slots again and another worker takes
them. A worker asked to stop finishes its sends in flight, gives back rows it claimed but
did not send, and releases its leases.

Without a running service (a burst worker in tests, an operator running one job by hand)
the job sends for its slot in place, for ``CAMPAIGN_JOB_BUDGET_SECONDS``, then hands the
slot over to a continuation job when work remains.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
)
from django.db.models import Q
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, PhoneNumber
from delivery.cloud.client import Accepted
from delivery.cloud.transport import get_transport
from delivery.engine import dispatch, slots
from delivery.engine.completion import campaigns_complete_finished
from delivery.engine.effects import campaign_effects_apply, number_effects_apply
from delivery.engine.send_trace import send_trace_flush
from delivery.engine.sender import PATH_FAILING, Finished, NumberSender
from delivery.engine.settle import Effects, settle
from delivery.engine.transactional import transactional_send
from delivery.messages import Settlement, release_messages, settlements_record
from whatsblast.core.redis import get_async_redis, get_redis

logger = logging.getLogger(__name__)

T = TypeVar("T")

FLUSH_INTERVAL_S = 0.25
REFRESH_INTERVAL_S = 0.5
# Database threads: claims, records and refreshes of every sender of the process. Two keep
# a slow claim from holding up a flush; each holds one PostgreSQL connection.
DB_THREADS = 2
HEARTBEAT_KEY = "wb:senders"
# A service whose heartbeat is older than this is not counted when sharing out slots.
HEARTBEAT_MAX_AGE_S = 10.0
# A worker holding more than its share of slots passes a new one on this many times.
ADOPT_PASSES = 3
ADOPT_PASS_DELAY_S = 0.1
# A number whose sender stopped here because the Cloud API did not answer from this host
# (sender.PATH_FAILING) is offered for this long to the other workers whose path has not
# failed (their heartbeats say which numbers they decline). When every live worker's has,
# the fault is Meta's, not this host's, and the slot is taken as usual.
PATH_COOLDOWN_S = 10.0
# A sender running inside its job (no service: a burst worker) lets its slot go as soon as
# nothing is due; the next kick finds the work that comes due later.
IN_PLACE_IDLE_RELEASE_S = 0.3
# Transactional messages in flight at once per worker process (each waits Meta's answer in
# its own thread). A job that sent inline held the worker for that answer: at 10 OTPs a
# second and 150 ms each, one worker was busy for 1.5 s every second, and a worker restart
# left OTPs and campaigns' slot handovers queued for minutes behind them.
TRANSACTIONAL_LANE_THREADS = 8


class SendService:
    """The process's senders, their leases, their database threads and their flushes."""

    def __init__(self, *, holder: str | None = None) -> None:
        self.holder = holder or slots.holder_name()
        self.loop = get_transport().loop
        self.db = ThreadPoolExecutor(max_workers=DB_THREADS, thread_name_prefix="send-db")
        self.transactional = ThreadPoolExecutor(
            max_workers=TRANSACTIONAL_LANE_THREADS, thread_name_prefix="send-transactional"
        )
        self.senders: dict[tuple[int, int], NumberSender] = {}
        self._tasks: dict[tuple[int, int], asyncio.Task[str]] = {}
        # Set once a sender's end has been recorded and its slot released.
        self._ended: dict[tuple[int, int], asyncio.Future[str]] = {}
        self._finished: list[Finished] = []
        self._housekeeping: concurrent.futures.Future[None] | None = None
        self._stopping = False
        # Numbers this worker declines until then (monotonic): its path to the Cloud API failed.
        self._path_failing: dict[int, float] = {}
        # Since when every database call has failed (None: the last one worked).
        self._db_failing_since: float | None = None

    # --- from other threads ------------------------------------------------------------------

    def start(self) -> None:
        self._housekeeping = asyncio.run_coroutine_threadsafe(self._keep_house(), self.loop)

    def adopt(self, *, phone_number_pk: int, slot: int, token: str, passes: int = 0) -> str:
        """Take the slot reserved under ``token``: ``adopted``, ``passed``, ``declined`` or
        ``lost``. A declined reservation runs out on its own and the tick offers it again."""
        if self._declines(phone_number_pk) and passes < 2 * ADOPT_PASSES:
            if self._other_path_for(phone_number_pk):
                return "passed"
        if passes < ADOPT_PASSES and self._over_share():
            return "passed"
        return asyncio.run_coroutine_threadsafe(
            self._adopt(phone_number_pk, slot, token), self.loop
        ).result(30)

    def transactional_submit(self, message_id: int) -> bool:
        """Send a transactional message on the process's transactional lane; ``False`` when
        the service is stopping (the caller sends it in place).

        The job that handed it over returns at once. Nothing is lost if the process dies
        first: a message not yet claimed is still pending and the sweep queues it again; a
        claimed one is reconciled after its lease like any sent row.
        """
        if self._stopping:
            return False
        try:
            self.transactional.submit(_transactional_run, message_id)
        except RuntimeError:  # shut down meanwhile
            return False
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every sender (sends in flight finish), record, give the slots back."""
        if self._stopping:
            return
        self._stopping = True
        # OTPs handed over finish (each within the client's timeouts), then the lane's
        # threads close their database connections.
        _threads_close(self.transactional, TRANSACTIONAL_LANE_THREADS)
        future = asyncio.run_coroutine_threadsafe(self._stop_all(), self.loop)
        try:
            future.result(timeout)
        except Exception:
            logger.exception("send service did not stop cleanly")
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        send_trace_flush()
        self.db_close()

    def db_close(self) -> None:
        """Close each database thread's connection, then the threads."""
        _threads_close(self.db, DB_THREADS)

    # --- on the loop ---------------------------------------------------------------------------

    def finished(self, item: Finished) -> None:
        self._finished.append(item)

    async def db_call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a database thread."""
        try:
            result = await self.loop.run_in_executor(
                self.db, functools.partial(_db_run, fn, *args, **kwargs)
            )
        except (OperationalError, InterfaceError):
            if self._db_failing_since is None:
                self._db_failing_since = time.monotonic()
            raise
        self._db_failing_since = None
        return result

    async def _adopt(
        self, phone_number_pk: int, slot: int, token: str, *, idle_release_s: float | None = None
    ) -> str:
        number = await self.db_call(_number_load, phone_number_pk)
        if number is None:
            return "lost"
        value = await self.db_call(
            slots.slot_take, number.phone_number_id, slot, token, holder=self.holder
        )
        if value is None:
            return "lost"
        count = dispatch.slots_for(
            rate_per_second=number.rate_per_second, reserve=number.transactional_reserve
        )
        sender = NumberSender(
            self,
            number,
            slot=slot,
            token=value,
            slots=count,
            **({} if idle_release_s is None else {"idle_release_s": idle_release_s}),
        )
        campaigns = await self.db_call(_campaigns_load, [int(number.pk)])
        sender.campaigns_update(campaigns.get(int(number.pk), []))
        self.senders[sender.key] = sender
        task = self.loop.create_task(sender.run())
        self._tasks[sender.key] = task
        self._ended[sender.key] = self.loop.create_future()
        task.add_done_callback(functools.partial(self._sender_done, sender))
        try:
            # At once, not at the next renewal: a slot offered a moment later must see this
            # one counted, or the workers pass it back and forth.
            await self._beat()
        except redis.RedisError as exc:
            logger.warning("send service: heartbeat not written (%s)", exc)
        return "adopted"

    def _sender_done(self, sender: NumberSender, task: asyncio.Task[str]) -> None:
        self.loop.create_task(self._sender_end(sender, task))

    async def _sender_end(self, sender: NumberSender, task: asyncio.Task[str]) -> None:
        if sender.stopping == PATH_FAILING:
            self._path_failing[int(sender.number.pk)] = time.monotonic() + PATH_COOLDOWN_S
        try:
            await self._sender_close(sender, task)
        finally:
            self.senders.pop(sender.key, None)
            self._tasks.pop(sender.key, None)
            ended = self._ended.pop(sender.key, None)
            if ended is not None and not ended.done():
                ended.set_result(sender.stopping)

    async def _sender_close(self, sender: NumberSender, task: asyncio.Task[str]) -> None:
        if task.exception() is not None:
            logger.error("sender for %s slot %s failed", sender.number, sender.slot,
                         exc_info=task.exception())  # fmt: skip
        await self._flush()
        try:
            await self.db_call(
                slots.slot_release, sender.number.phone_number_id, sender.slot, sender.token
            )
        except redis.RedisError:
            pass  # it expires on its own
        ids = list(sender.campaigns)
        if ids:
            await self.db_call(_complete, ids)

    async def _stop_all(self) -> None:
        for sender in list(self.senders.values()):
            sender.stop("worker stopping")
        ended = list(self._ended.values())
        if ended:
            await asyncio.gather(*ended, return_exceptions=True)
        await self._flush()

    async def _keep_house(self) -> None:
        last_refresh = last_renew = 0.0
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            now = time.monotonic()
            try:
                await self._flush()
                send_trace_flush()
                if now - last_refresh >= REFRESH_INTERVAL_S:
                    last_refresh = now
                    await self._refresh()
                if now - last_renew >= slots.LEASE_RENEW_S:
                    last_renew = now
                    await self._renew()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("send service housekeeping failed; retrying")

    # --- what the senders serve -------------------------------------------------------------

    async def _refresh(self) -> None:
        """Numbers' settings and their running campaigns: paused ones leave at once."""
        if not self.senders:
            return
        pks = sorted({key[0] for key in self.senders})
        numbers = await self.db_call(_numbers_load, pks)
        campaigns = await self.db_call(_campaigns_load, pks)
        read = set(pks)
        dropped: list[int] = []
        for sender in list(self.senders.values()):
            if sender.key[0] not in read:
                # Adopted while this refresh read: its adoption loaded it fresh, and this
                # read knows nothing of it (it would take it for a number gone, or a
                # number with no campaign left, and stop it after its first send).
                continue
            number = numbers.get(int(sender.number.pk))
            if number is None:
                sender.stop("number gone")
                continue
            if _settings_of(number) != _settings_of(sender.number):
                sender.number_update(number)
            dropped += [m.id for m in sender.campaigns_update(campaigns.get(sender.key[0], []))]
        if dropped:
            await self.db_call(release_messages, ids=dropped)

    async def _renew(self) -> None:
        failing = self._db_failing_since
        if failing is not None and time.monotonic() - failing > DB_LET_GO_AFTER_S:
            # Cut off from PostgreSQL, this worker can neither claim nor record: it stops
            # renewing, so its slots lapse and a worker that reaches the database adopts
            # them (Redis alone would otherwise keep them here for the whole partition).
            logger.warning("send service: database unreachable, slots left to lapse")
            return
        conn = get_async_redis()
        try:
            for sender in list(self.senders.values()):
                key = slots.slot_key(sender.number.phone_number_id, sender.slot)
                started = time.monotonic()
                if await conn.eval(_RENEW_LUA, 1, key, sender.token, slots.LEASE_S):
                    sender.lease_confirmed(started)
                else:
                    sender.stop("slot lost")
            await self._beat()
        except redis.RedisError as exc:
            logger.warning("send service: leases not renewed (%s)", exc)

    def _declines(self, phone_number_pk: int) -> bool:
        return time.monotonic() < self._path_failing.get(phone_number_pk, 0.0)

    async def _beat(self) -> None:
        """Say how many slots this worker holds (the others read it to share out new ones)
        and which numbers it declines (its path to the Cloud API failed)."""
        declines = [pk for pk in self._path_failing if self._declines(pk)]
        beat = {"slots": len(self.senders), "at": time.time(), "declines": declines}
        await get_async_redis().hset(HEARTBEAT_KEY, self.holder, json.dumps(beat))

    def _live_beats(self) -> dict[str, dict[str, Any]]:
        """The heartbeats of the live workers, this one's included (Redis away: none)."""
        try:
            beats = get_redis().hgetall(HEARTBEAT_KEY)
        except redis.RedisError:
            return {}
        now = time.time()
        live = {}
        for holder, raw in beats.items():
            beat = json.loads(raw)
            if now - float(beat["at"]) <= HEARTBEAT_MAX_AGE_S:
                live[holder.decode() if isinstance(holder, bytes) else holder] = beat
        return live

    def _other_path_for(self, phone_number_pk: int) -> bool:
        """Whether another live worker does not decline the number (its path may work)."""
        return any(
            phone_number_pk not in beat.get("declines", [])
            for holder, beat in self._live_beats().items()
            if holder != self.holder
        )

    def _over_share(self) -> bool:
        """Whether this worker already holds more than its share of the live senders' slots."""
        live = {holder: int(beat["slots"]) for holder, beat in self._live_beats().items()}
        if not live:
            return False
        live[self.holder] = len(self.senders)
        share = math.ceil((sum(live.values()) + 1) / len(live))
        return len(self.senders) >= share and len(live) > 1

    # --- recording ------------------------------------------------------------------------

    async def _flush(self) -> None:
        """Record every send that came back since the last flush, in one transaction."""
        batch, self._finished = self._finished, []
        if not batch:
            return
        now = timezone.now()
        settlements: list[Settlement] = []
        effects: dict[tuple[NumberSender, int], Effects] = {}
        by_sender: dict[NumberSender, list[Finished]] = {}
        for item in batch:
            by_sender.setdefault(item.sender, []).append(item)
            found = effects.setdefault((item.sender, item.run.id), Effects())
            settlement = settle(
                message=item.message,
                result=item.result,
                outcome=item.outcome,
                policy=item.run.policy,
                now=now,
                effects=found,
            )
            if settlement is not None:
                if item.route:
                    settlement = replace(settlement, route=item.route)
                settlements.append(settlement)
        opted_out = [c for e in effects.values() for c in e.opted_out_contact_ids]
        try:
            await self.db_call(settlements_record, settlements, opted_out_contact_ids=opted_out)
        except DatabaseError as exc:
            # PostgreSQL is away: keep the results and record them at a later flush.
            logger.warning("send results not recorded yet (%s); retrying", exc)
            self._finished = batch + self._finished
            return
        for sender, items in by_sender.items():
            sender.latency_observe(
                [i.result.latency_s for i in items if isinstance(i.result, Accepted)]
            )
            sender.sent += sum(1 for i in items if isinstance(i.result, Accepted))
        broken = await self.db_call(_effects_apply, by_sender, effects, settlements)
        for sender, campaign_id in broken:
            rows = sender.campaign_drop(campaign_id)
            if rows:
                await self.db_call(release_messages, ids=[m.id for m in rows])


# After this long with every database call failing, a worker stops renewing its slots.
DB_LET_GO_AFTER_S = 2 * slots.LEASE_RENEW_S

# A renewal that does not replace a lease someone else took over.
_RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


# How often a database thread checks its connection before a call (``CONN_HEALTH_CHECKS``
# makes that check a ``SELECT 1`` round trip). Checked before every call, it was one extra
# statement per claim and per flush: 5.7 % of a worker's samples at 50 numbers x 20 msg/s.
DB_HEALTH_CHECK_EVERY_S = 1.0
_db_thread = threading.local()


def _db_run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run in a database thread: a connection broken by a PostgreSQL restart is replaced.

    The connection is checked at most once every ``DB_HEALTH_CHECK_EVERY_S``. A call that
    meets a broken connection between two checks fails, closes it, and the next call opens a
    new one: the caller already treats a failed call as the database failing, and retries.
    """
    now = time.monotonic()
    if now - getattr(_db_thread, "checked_at", -math.inf) >= DB_HEALTH_CHECK_EVERY_S:
        close_old_connections()
        _db_thread.checked_at = now
    try:
        return fn(*args, **kwargs)
    except DatabaseError:
        connection.close()
        _db_thread.checked_at = -math.inf
        raise


def _settings_of(number: PhoneNumber) -> tuple[Any, ...]:
    return (
        number.rate_per_second,
        number.transactional_reserve,
        number.access_token.reveal(),
        number.api_base_url,
        number.account.messaging_limit_tier,
    )


def _number_load(pk: int) -> PhoneNumber | None:
    return PhoneNumber.objects.select_related("account").filter(pk=pk).first()


def _numbers_load(pks: list[int]) -> dict[int, PhoneNumber]:
    return {int(n.pk): n for n in PhoneNumber.objects.select_related("account").filter(pk__in=pks)}


def _campaigns_load(pks: list[int]) -> dict[int, list[Campaign]]:
    """Running campaigns of each number: its own, and those with it in their pool."""
    running = list(
        Campaign.objects.select_related("template")
        .filter(status=CampaignStatus.RUNNING)
        .filter(Q(phone_number_id__in=pks) | Q(pool_numbers__in=pks))
        .distinct()
    )
    pooled = Campaign.pool_numbers.through.objects.filter(
        campaign_id__in=[c.pk for c in running], phonenumber_id__in=pks
    ).values_list("campaign_id", "phonenumber_id")
    by_number: dict[int, list[Campaign]] = {pk: [] for pk in pks}
    by_id = {c.pk: c for c in running}
    for campaign in running:
        if campaign.phone_number_id in by_number:
            by_number[campaign.phone_number_id].append(campaign)
    for campaign_id, number_id in pooled:
        campaign = by_id[campaign_id]
        if campaign not in by_number[number_id]:
            by_number[number_id].append(campaign)
    return by_number


def _complete(campaign_ids: list[int]) -> None:
    for campaign_id in campaign_ids:
        campaigns_complete_finished(campaign_id=campaign_id)


def _effects_apply(
    by_sender: dict[NumberSender, list[Finished]],
    effects: dict[tuple[NumberSender, int], Effects],
    settlements: list[Settlement],
) -> list[tuple[NumberSender, int]]:
    """Metrics, throttling and broken campaigns of a recorded flush: in a database thread."""
    by_id = {s.message_id: s for s in settlements}
    broken: list[tuple[NumberSender, int]] = []
    for sender, items in by_sender.items():
        sender.meter.flush(
            results=[i.result for i in items],
            settlements=[by_id.get(i.message.id) for i in items],
        )
        throttled = sum(e.throttled for (s, _), e in effects.items() if s is sender)
        spam = sum(e.spam_limited for (s, _), e in effects.items() if s is sender)
        sent = sum(1 for i in items if isinstance(i.result, Accepted))
        try:
            number_effects_apply(
                bucket=sender.bucket, throttled=throttled, sent=sent, spam_limited=spam
            )
        except redis.RedisError as exc:
            logger.warning("number %s: rate not adapted (%s)", sender.number, exc)
    for (sender, campaign_id), found in effects.items():
        run = sender.campaigns.get(campaign_id)
        if campaign_effects_apply(effects=found, campaign=run.campaign if run else None):
            broken.append((sender, campaign_id))
    return broken


def _threads_close(executor: ThreadPoolExecutor, threads: int) -> None:
    """Close the database connection of each of ``executor``'s threads, then the threads.
    The closes queue behind the work already submitted."""
    barrier = threading.Barrier(threads, timeout=10)

    def close() -> None:
        try:
            barrier.wait()  # one call per thread: each waits until all are taken
        except threading.BrokenBarrierError:
            pass
        connection.close()

    for future in [executor.submit(close) for _ in range(threads)]:
        future.result(60)
    executor.shutdown(wait=True)


def _transactional_run(message_id: int) -> None:
    close_old_connections()
    try:
        transactional_send(message_id=message_id)
    except Exception:
        # The row stays where the failure left it (pending, or sending until its lease
        # runs out and the reconciler settles it).
        logger.exception("transactional message %s not sent", message_id)
    finally:
        close_old_connections()


# --- the process's service, and the job's service call ------------------------------------------

_service: SendService | None = None
_service_lock = threading.Lock()


def service_start() -> SendService:
    """Start this process's send service (a long-running worker does, at start-up)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = SendService()
            _service.start()
        return _service


def service_stop() -> None:
    global _service
    with _service_lock:
        service, _service = _service, None
    if service is not None:
        service.stop()


def transactional_message_send(*, message_id: int) -> str:
    """The job's service call: hand the message to this worker's transactional lane, or
    send it in place (no service: a burst worker, a stopping one)."""
    service = _service
    if service is not None and service.transactional_submit(message_id):
        return "handed to the send service"
    return str(transactional_send(message_id=message_id))


def number_slot_send(
    *, phone_number_pk: int, slot: int, token: str, passes: int = 0
) -> dict[str, Any]:
    """The job's service call: hand the slot to this worker's service, or send in place."""
    service = _service
    if service is not None:
        outcome = service.adopt(
            phone_number_pk=phone_number_pk, slot=slot, token=token, passes=passes
        )
        if outcome == "passed":
            # Another worker holds fewer slots: offer it this one, and stay away from the
            # queue a moment so that it, not this worker, takes the offer.
            dispatch.number_continue(
                phone_number_pk=phone_number_pk, slot=slot, token=token, passes=passes + 1
            )
            time.sleep(ADOPT_PASS_DELAY_S)
        return {"slot": slot, "outcome": outcome}
    return _send_in_place(phone_number_pk=phone_number_pk, slot=slot, token=token)


def _send_in_place(*, phone_number_pk: int, slot: int, token: str) -> dict[str, Any]:
    service = SendService(holder=f"{slots.holder_name()}:in-place")
    try:
        future = asyncio.run_coroutine_threadsafe(
            _in_place(service, phone_number_pk, slot, token), service.loop
        )
        report = future.result()
    finally:
        send_trace_flush()
        service.db_close()
    if report.get("work_left"):
        # Work remains: a fresh job takes the slot on (its lease was released).
        dispatch.number_kick(phone_number_pk=phone_number_pk)
    return report


async def _in_place(
    service: SendService, phone_number_pk: int, slot: int, token: str
) -> dict[str, Any]:
    outcome = await service._adopt(
        phone_number_pk, slot, token, idle_release_s=IN_PLACE_IDLE_RELEASE_S
    )
    if outcome != "adopted":
        return {"slot": slot, "outcome": outcome}
    sender = next(iter(service.senders.values()))
    task = service._tasks[sender.key]
    ended = service._ended[sender.key]
    deadline = time.monotonic() + settings.CAMPAIGN_JOB_BUDGET_SECONDS
    last_flush = last_refresh = time.monotonic()
    work_left = False
    while not task.done():
        await asyncio.sleep(0.05)
        now = time.monotonic()
        if now - last_flush >= FLUSH_INTERVAL_S:
            last_flush = now
            await service._flush()
        if now - last_refresh >= REFRESH_INTERVAL_S:
            last_refresh = now
            await service._refresh()
            await service._renew()
        if not sender.stopping and (now >= deadline or dispatch.transactional_waiting()):
            # A number its bucket holds past the budget is not worth another job now: the
            # tick offers its slot again once it sends.
            work_left = sender.work_left() and sender.held_until <= deadline + 1.0
            sender.stop("time budget" if now >= deadline else "yield to transactional")
    reason = await ended  # recorded, and the slot released
    return {
        "slot": slot,
        "outcome": "sent",
        "sent": sender.sent,
        "stopped": reason,
        "work_left": work_left,
    }
