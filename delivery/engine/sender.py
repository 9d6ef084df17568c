"""One number's sender: every campaign sending from one phone number slot, on an event loop.

A ``NumberSender`` holds one slot of one number (``delivery.engine.slots``) and serves
every running campaign that sends from that number, its own or through a pool. Per
campaign it keeps a small buffer of claimed rows (at most ``READY_SECONDS`` of the
number's share, so a crash leaves few rows in doubt); the next send goes to the campaign
the stride scheduler picks (``delivery.engine.fair_share``: shares in proportion to the
campaigns' weights); and tokens are taken from the number's shared bucket at the moment
of the write, for rows already in hand, which then leave at once: no database round trip
and no scheduling gap between a grant and its request, so what the bucket's one-second
send log counts is what reaches Meta, when it reaches it.

Everything that touches PostgreSQL runs in the service's database threads
(``SendService.db``); the sender itself only awaits. Results are recorded by the service
for all its senders at once (``SendService._flush``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol, TypeVar

import redis
from django.conf import settings
from django.utils import timezone

from campaigns.catalogue.params import mapping_has_click
from campaigns.models import Campaign, PhoneNumber, Template
from delivery.cloud.client import ApiError, SendRequest, SendResult
from delivery.cloud.outcomes import Outcome, classify
from delivery.cloud.transport import get_transport
from delivery.engine.fair_share import StrideScheduler
from delivery.engine.frequency_cap import FrequencyCapGuard
from delivery.engine.pacing import concurrency_for, number_bucket
from delivery.engine.ratelimit import TrafficClass
from delivery.engine.reach import reach_admit, reach_from_table
from delivery.engine.routes import endpoint_for, reroute, route_recorded
from delivery.engine.send_trace import send_trace
from delivery.engine.settle import RetryPolicy
from delivery.engine.slots import LEASE_S
from delivery.engine.window_guard import WindowGuard
from delivery.messages import ClaimedMessage, claim_campaign_batch, release_messages
from delivery.metrics import SendMeter
from whatsblast.core.click_tokens import click_token
from whatsblast.core.tracked_links import params_tracked

logger = logging.getLogger(__name__)

# Upper bound on one claim: keeps the claimed-but-unsent window (rows in doubt after a
# crash) small while still amortising the round trip.
MAX_CLAIM = 200
# Claimed rows kept ready per campaign, in seconds of the number's share. A refill is asked
# for at half of it, so the database threads have half this long to answer before the
# campaign runs dry: at 0.5 s, fifty numbers at 20 msg/s on two workers (25 senders sharing
# a worker's two database threads while the launches load PostgreSQL) left numbers idle up
# to 0.9 s after their first send, the worst at 87-93 % of its share; at 1.0 s, 94.6-94.7 %.
READY_SECONDS = 1.0
# A campaign whose claim found nothing due is asked again after this long.
EMPTY_RECHECK_S = 0.5
# A sender with nothing due anywhere and nothing in flight for this long lets its slot go.
IDLE_RELEASE_S = 3.0
# Tokens asked for at once: a few milliseconds' worth at the top rates, sent at once.
MAX_GRANT = 25
# The longest the dispatch loop sleeps before looking again (a pause, a new campaign).
MAX_NAP_S = 0.05
# A sender sends only while it knows its slot is its own: until ``slots.LEASE_S`` after the
# start of its last renewal that succeeded, less this margin. A host cut off from Redis (a
# partition: packets dropped, nothing refused) stops before its lease can have passed to
# another worker, and starts again only once a renewal proved the slot still its own.
LEASE_MARGIN_S = 2.0
# Claimed rows are sent only before SEND_LEASE_SECONDS (less this) since their claim: past
# it, the reconciler may have taken them (``lease expired``) and another worker resent them.
ROW_LEASE_MARGIN_S = 1.0
# This many sends in a row without any answer (a timeout, a connection that failed) and the
# path from this host to the Cloud API is taken as failing: the sender stops and its slot
# goes to another worker (send_service: this one declines the number for a while), rather
# than hold the slot and claim rows it cannot send. Its sends that did reach Meta late
# are settled by their webhooks, like any ambiguous send.
PATH_FAILURES_MAX = 10
PATH_FAILING = "Cloud API path failing"
# A send that says the whole campaign is broken (a bad token, a test number's 131030, a
# template gone) halts that campaign's sends on this sender at once, before the service's
# next flush pauses it: at 100 msg/s the quarter second to the flush is 25 more sends that
# can only fail the same way. The halt lapses after this long, in case the pause did not
# take (the database away): the campaign's next send then finds out again.
BROKEN_HALT_S = 5.0


T = TypeVar("T")


class SenderHost(Protocol):
    """What a sender needs of the service that runs it (``send_service.SendService``)."""

    def finished(self, item: Finished) -> None: ...

    async def db_call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...


@dataclass
class CampaignRun:
    """One campaign as this sender serves it: what to send, and rows ready to go."""

    campaign: Campaign
    policy: RetryPolicy
    windows: WindowGuard | None
    frequency_cap: FrequencyCapGuard | None = None
    ready: deque[ClaimedMessage] = field(default_factory=deque)
    refilling: bool = False
    empty_since: float | None = None
    claimed_at: float = 0.0
    # Per claim still in ``ready`` (oldest first): when its lease runs out (monotonic) and
    # how many of its rows are left. Rows past it are not sent (ROW_LEASE_MARGIN_S).
    claims: deque[list[float]] = field(default_factory=deque)
    # The quality guard's cap (Campaign.guard_rate_cap): no send before this (monotonic).
    next_send_at: float = 0.0
    # A send came back saying the campaign is broken: none of its rows go before this.
    halted_until: float = 0.0
    # The endpoint this run's sends go to first once one was refused with the code that
    # names the other ('' until then: delivery.engine.routes.endpoint_for decides).
    endpoint: str = ""
    # Rows sent with another template than the campaign's (a version in another language,
    # an A/B test's variant): each template's (name, language) by its id, read as rows of
    # it are first claimed.
    versions: dict[int, tuple[str, str]] = field(default_factory=dict)
    # The campaign maps a tracked link (its own or an A/B variant's mapping).
    tracked: bool = False

    def template_of(self, message: ClaimedMessage) -> tuple[str, str]:
        """The (name, language) the row is sent with: its own template's, else the
        campaign's."""
        if message.template_id is not None and message.template_id in self.versions:
            return self.versions[message.template_id]
        return self.campaign.template.name, self.campaign.template.language

    def versions_learn(self, rows: list[ClaimedMessage]) -> None:
        """Read the templates first seen in ``rows`` (in a database thread)."""
        own = self.campaign.template_id
        unknown = {
            m.template_id for m in rows if m.template_id is not None and m.template_id != own
        } - set(self.versions)
        if unknown:
            found = Template.objects.filter(pk__in=unknown).values_list("id", "name", "language")
            self.versions.update({pk: (name, language) for pk, name, language in found})

    def paced(self, now: float) -> bool:
        return self.resumes_at() > now

    def resumes_at(self) -> float:
        """When this run may send next (monotonic): after a halt, at the guard's pace."""
        paced_at = self.next_send_at if self.campaign.guard_rate_cap is not None else 0.0
        return max(self.halted_until, paced_at)

    def sent_one(self, now: float, slots: int) -> None:
        """Each of the number's ``slots`` senders takes its share of the cap."""
        cap = self.campaign.guard_rate_cap
        if cap:
            self.next_send_at = max(now, self.next_send_at) + max(1, slots) / cap

    def rows_add(self, rows: list[ClaimedMessage], *, stale_at: float) -> None:
        if rows:
            self.ready.extend(rows)
            self.claims.append([stale_at, len(rows)])

    def row_take(self) -> ClaimedMessage:
        head = self.claims[0]
        head[1] -= 1
        if head[1] <= 0:
            self.claims.popleft()
        return self.ready.popleft()

    def rows_clear(self) -> list[ClaimedMessage]:
        rows = list(self.ready)
        self.ready.clear()
        self.claims.clear()
        return rows

    def stale_drop(self, now: float) -> int:
        """Forget the ready rows of claims whose lease ran out; how many."""
        dropped = 0
        while self.claims and now >= self.claims[0][0]:
            _, left = self.claims.popleft()
            for _ in range(int(left)):
                self.ready.popleft()
            dropped += int(left)
        return dropped

    def allowance(self) -> int:
        """Rows this run may start in one grant: one at a time when the guard paces it."""
        return min(1, len(self.ready)) if self.campaign.guard_rate_cap else len(self.ready)

    @property
    def id(self) -> int:
        return int(self.campaign.pk)


@dataclass
class Finished:
    """One send that came back, waiting for the service's next flush."""

    sender: NumberSender
    run: CampaignRun
    message: ClaimedMessage
    result: SendResult
    outcome: Outcome  # classify(result), computed once where the answer came back
    route: str = ""  # Message.send_route (delivery.engine.routes)


def campaign_run(campaign: Campaign) -> CampaignRun:
    return CampaignRun(
        campaign=campaign,
        policy=RetryPolicy(max_attempts=campaign.max_attempts),
        windows=WindowGuard.for_campaign(campaign),
        frequency_cap=FrequencyCapGuard.for_campaign(campaign),
        # An A/B variant's mapping may hold the link where the campaign's does not.
        tracked=campaign.ab_test_percent > 0 or mapping_has_click(campaign.param_mapping),
    )


class NumberSender:
    """Sends for every running campaign of one number slot until told to stop or idle."""

    def __init__(
        self,
        service: SenderHost,
        number: PhoneNumber,
        *,
        slot: int,
        token: str,
        slots: int,
        idle_release_s: float = IDLE_RELEASE_S,
    ) -> None:
        self.service = service
        self.idle_release_s = idle_release_s
        self.slot = slot
        self.token = token
        self.slots = slots
        self.campaigns: dict[int, CampaignRun] = {}
        self.scheduler = StrideScheduler()
        self.in_flight = 0
        self.sent = 0
        self.held_until = 0.0
        # This sender's own writes over the last second: a second guard beside the shared
        # bucket's send log, which a Redis restart empties.
        self._writes: deque[float] = deque()
        self.latency_estimate = 0.3
        self.stopping = ""
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle_since: float | None = None
        # The slot was just taken: its lease holds for LEASE_S from about now.
        self.lease_until = time.monotonic() + LEASE_S - LEASE_MARGIN_S
        self._lease_doubted = False
        self._unanswered = 0
        self.trace = send_trace()
        self.number_update(number)

    # --- what it serves -----------------------------------------------------------------

    @property
    def key(self) -> tuple[int, int]:
        return (int(self.number.pk), self.slot)

    def number_update(self, number: PhoneNumber) -> None:
        """Take the number's current settings (rate, reserve, token, pause)."""
        self.number = number
        self.bucket = number_bucket(number)
        self.meter = SendMeter(number.phone_number_id, TrafficClass.CAMPAIGN)
        self.share = number.rate_per_second * (1 - number.transactional_reserve) / self.slots
        # At most this many writes in any second from this slot (the bucket's own pace).
        self.local_cap = max(1, math.floor(self.bucket.rate / self.slots))
        self.ready_target = max(1, min(MAX_CLAIM, math.ceil(self.share * READY_SECONDS)))
        self.base_url = str(number.api_base_url or settings.WHATSAPP_API_BASE_URL)
        account = number.account
        self.limit = account.daily_unique_user_limit
        self.waba_id = account.waba_id

    def campaigns_update(self, campaigns: list[Campaign]) -> list[ClaimedMessage]:
        """Serve exactly ``campaigns`` from now on; the rows of those dropped, to release."""
        wanted = {int(c.pk): c for c in campaigns}
        dropped: list[ClaimedMessage] = []
        for campaign_id in list(self.campaigns):
            if campaign_id not in wanted:
                dropped.extend(self.campaign_drop(campaign_id))
        for campaign_id, campaign in wanted.items():
            run = self.campaigns.get(campaign_id)
            if run is None:
                self.campaigns[campaign_id] = campaign_run(campaign)
            else:
                run.campaign = campaign
                run.policy = RetryPolicy(max_attempts=campaign.max_attempts)
                # The template's latest category (a utility one re-categorised as marketing
                # is capped from now) and the campaign's cap as it is now.
                guard = FrequencyCapGuard.for_campaign(campaign)
                if not FrequencyCapGuard.same(guard, run.frequency_cap):
                    run.frequency_cap = guard
            self.scheduler.join(campaign_id, float(campaign.share_weight))
        self._wake.set()
        return dropped

    def campaign_drop(self, campaign_id: int) -> list[ClaimedMessage]:
        run = self.campaigns.pop(campaign_id, None)
        self.scheduler.leave(campaign_id)
        if run is None:
            return []
        run.stale_drop(time.monotonic())  # those are the reconciler's, not to release
        return run.rows_clear()

    def lease_confirmed(self, renewal_started: float) -> None:
        """A renewal begun at ``renewal_started`` (monotonic) succeeded."""
        self.lease_until = max(self.lease_until, renewal_started + LEASE_S - LEASE_MARGIN_S)
        if self._lease_doubted:
            self._lease_doubted = False
            logger.warning("number %s: slot lease confirmed again; sending", self.number)
            self._wake.set()

    def stop(self, reason: str) -> None:
        if not self.stopping:
            self.stopping = reason
        self._wake.set()

    # --- the loop ----------------------------------------------------------------------------

    async def run(self) -> str:
        """Send until stopped or idle; return why it ended (in flight sends finish first)."""
        try:
            while not self.stopping:
                self._refills_start()
                if not await self._dispatch_once():
                    if self._idle_long_enough():
                        self.stopping = "nothing due"
                        break
                    await self._nap(MAX_NAP_S)
        finally:
            await self._drain()
        return self.stopping

    async def _dispatch_once(self) -> bool:
        """Send what tokens allow now; ``False`` when there was nothing to send."""
        if time.monotonic() >= self.lease_until:
            if not self._lease_doubted:
                self._lease_doubted = True
                logger.warning("number %s: slot lease not renewed in time; holding sends",
                               self.number)  # fmt: skip
            self._stale_drop()
            await self._nap(MAX_NAP_S)
            return True
        self._stale_drop()
        free = concurrency_for(self.share, self.latency_estimate) - self.in_flight
        waiting = [run for run in self.campaigns.values() if run.ready]
        now = time.monotonic()
        ready = [run for run in waiting if not run.paced(now)]
        if free <= 0:
            await self._nap(MAX_NAP_S)
            return True
        if not ready:
            if waiting:  # slowed by the quality guard, or halted: wait for the next one's turn
                self._idle_since = None
                await self._nap(min(MAX_NAP_S, min(r.resumes_at() for r in waiting) - now))
                return True
            return False
        self._idle_since = None
        room = self._local_room()
        if room <= 0:
            await self._nap(min(MAX_NAP_S, self._writes[0] + 1.0 - time.monotonic() + 0.001))
            return True
        want = min(free, MAX_GRANT, room, sum(run.allowance() for run in ready))
        try:
            grant = await self.bucket.acquire_async(want, TrafficClass.CAMPAIGN)
        except redis.RedisError as exc:
            logger.warning("number %s: limiter unavailable (%s)", self.number, exc)
            await self._nap(0.5)
            return True
        self.meter.tokens(asked=want, granted=grant.tokens)
        # A number held for long (an operator's pause, a throttling back-off) says so.
        self.held_until = time.monotonic() + grant.wait_s if not grant.tokens else 0.0
        ready_ids = [run.id for run in ready]
        for _ in range(grant.tokens):
            campaign_id = self.scheduler.pick(ready_ids)
            if campaign_id is None:
                break
            run = self.campaigns[campaign_id]
            self._start(run, run.row_take(), granted_at=grant.at)
            run.sent_one(time.monotonic(), self.slots)
            if not run.ready or run.paced(time.monotonic()):
                ready_ids.remove(campaign_id)
        if grant.tokens < want:
            await self._nap(min(max(0.001, grant.wait_s), 0.25))
        return True

    def _local_room(self) -> int:
        """Writes this slot may still make in the current one-second window."""
        horizon = time.monotonic() - 1.0
        while self._writes and self._writes[0] <= horizon:
            self._writes.popleft()
        return self.local_cap - len(self._writes)

    def _start(
        self, run: CampaignRun, message: ClaimedMessage, *, granted_at: float | None
    ) -> None:
        self._writes.append(time.monotonic())
        if self.trace is not None:
            self.trace.granted(message.id, self.number.phone_number_id, granted_at)
        self.in_flight += 1
        task = asyncio.get_running_loop().create_task(self._send(run, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, run: CampaignRun, message: ClaimedMessage) -> None:
        campaign = run.campaign
        account = self.number.account
        first = run.endpoint or endpoint_for(account, campaign.template)
        template_name, language = run.template_of(message)
        params = message.params
        if run.tracked:
            # A tracked link's slot gets this recipient's token (core.tracked_links).
            params = params_tracked(
                params, token=click_token(message.id), base_url=settings.CLICK_BASE_URL
            )
        request = SendRequest(
            base_url=self.base_url,
            phone_number_id=self.number.phone_number_id,
            access_token=self.number.access_token,
            to=message.to,
            callback_data=f"wb:{message.id}",
            template_name=template_name,
            language=language,
            params=params,
            endpoint=first,
            product_policy=account.mm_product_policy,
            activity_sharing=account.mm_activity_sharing,
        )
        final = first
        try:
            result = await get_transport().send_async(request)
            other = reroute(first, result)
            if other is not None:
                # Refused before anything was sent: the other endpoint, once (routes.py).
                run.endpoint = final = other
                result = await get_transport().send_async(replace(request, endpoint=other))
        finally:
            self.in_flight -= 1
            self._wake.set()
        outcome = classify(result)
        if outcome is Outcome.CAMPAIGN_BROKEN:
            run.halted_until = time.monotonic() + BROKEN_HALT_S
        route = route_recorded(first, final)
        self.service.finished(Finished(self, run, message, result, outcome, route))
        self._path_observe(result)

    def _path_observe(self, result: SendResult) -> None:
        """Count sends in a row that got no answer; stop when the path looks broken."""
        if not (isinstance(result, ApiError) and result.http_status is None):
            self._unanswered = 0
            return
        self._unanswered += 1
        if self._unanswered >= PATH_FAILURES_MAX and not self.stopping:
            logger.warning("number %s: %d sends in a row unanswered; the slot goes to "
                           "another worker", self.number, self._unanswered)  # fmt: skip
            self.stop(PATH_FAILING)

    def latency_observe(self, latencies: list[float]) -> None:
        # Smooth the estimate: one slow batch should not double the in-flight window.
        if latencies:
            mean = sum(latencies) / len(latencies)
            self.latency_estimate = 0.8 * self.latency_estimate + 0.2 * mean

    async def _nap(self, seconds: float) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except TimeoutError:
            pass

    def _idle_long_enough(self) -> bool:
        """Nothing ready, nothing being claimed, nothing in flight, for a while."""
        now = time.monotonic()
        busy = self.in_flight or any(
            run.refilling or run.ready or run.empty_since is None for run in self.campaigns.values()
        )
        if busy:
            self._idle_since = None
            return False
        if self._idle_since is None:
            self._idle_since = now
        return now - self._idle_since >= self.idle_release_s

    def work_left(self) -> bool:
        """Rows ready or being claimed, or a campaign whose last claim was not empty."""
        return any(
            run.refilling or run.ready or run.empty_since is None for run in self.campaigns.values()
        )

    def _stale_drop(self) -> None:
        """Forget ready rows whose claim ran out: they are the reconciler's now, not ours.

        Not released: the reconciler may already have moved them on and another worker
        claimed them again, and a release would take that claim from under it.
        """
        now = time.monotonic()
        for run in self.campaigns.values():
            dropped = run.stale_drop(now)
            if dropped:
                logger.warning("number %s: %d claimed rows held past their lease; left to "
                               "the reconciler", self.number, dropped)  # fmt: skip

    async def _drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        self._stale_drop()
        leftover = [m for run in self.campaigns.values() for m in run.rows_clear()]
        if leftover:
            # Claimed for the next tokens but never sent: back untouched.
            await self.service.db_call(release_messages, ids=[m.id for m in leftover])

    # --- claims ------------------------------------------------------------------------------

    def _refills_start(self) -> None:
        now = time.monotonic()
        if now >= self.lease_until:
            return  # rows claimed now could not be sent: the slot may be another's already
        for run in self.campaigns.values():
            if run.refilling or len(run.ready) > self.ready_target // 2:
                continue
            if run.halted_until > now:
                continue  # broken: its pause is on the way, its rows would only go back
            if run.empty_since is not None and now - run.claimed_at < EMPTY_RECHECK_S:
                continue
            run.refilling = True
            need = self.ready_target - len(run.ready)
            task = asyncio.get_running_loop().create_task(self._refill(run, need))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _refill(self, run: CampaignRun, need: int) -> None:
        # Before the claim, so the claim's lease (from the database's clock, later) outlasts it.
        started = time.monotonic()
        try:
            rows, claimed = await self.service.db_call(self._claim, run, need)
        except Exception as exc:  # the database is away: ask again later
            logger.warning("number %s: claim failed (%s)", self.number, exc)
            rows, claimed = [], 0
        finally:
            run.refilling = False
            run.claimed_at = time.monotonic()
        if self.campaigns.get(run.id) is not run:
            # Dropped meanwhile (paused, cancelled): the rows go straight back.
            if rows:
                await self.service.db_call(release_messages, ids=[m.id for m in rows])
            return
        run.rows_add(rows, stale_at=started + settings.SEND_LEASE_SECONDS - ROW_LEASE_MARGIN_S)
        # Rows held for their window or the messaging limit do not mean nothing is due.
        run.empty_since = None if claimed or rows else time.monotonic()
        self._wake.set()

    def _claim(self, run: CampaignRun, need: int) -> tuple[list[ClaimedMessage], int]:
        """(rows ready to send, rows claimed): in a database thread."""
        rows = claim_campaign_batch(
            campaign_id=run.id, limit=need, phone_number_id=int(self.number.pk)
        )
        claimed = len(rows)
        run.versions_learn(rows)
        if run.windows is not None:
            # Recipients whose local send window is closed go back, due at its opening.
            rows = run.windows.admit(rows, now=timezone.now())
        if run.frequency_cap is not None and rows:
            # Across campaigns and workers: delivery.engine.frequency_cap says how.
            rows = run.frequency_cap.admit(rows, phone_number_pk=int(self.number.pk))
        return self._reach_admit(run, rows), claimed

    def _reach_admit(self, run: CampaignRun, rows: list[ClaimedMessage]) -> list[ClaimedMessage]:
        """Hold back recipients the portfolio's 24 h messaging limit has no room for."""
        if self.limit is None or not rows:
            return rows
        admission = reach_admit(
            waba_id=self.waba_id,
            limit=self.limit,
            recipients=[m.to for m in rows],
            seed=lambda: reach_from_table(waba_id=self.waba_id),
        )
        if not admission.refused:
            return rows
        refused = set(admission.refused)
        until = timezone.now() + timedelta(seconds=max(1.0, admission.room_frees_in_s))
        # Waiting is not failing: the rows go back to pending for when room frees.
        release_messages(ids=[m.id for m in rows if m.to in refused], at=until)
        Campaign.objects.filter(pk=run.id).update(
            status_reason=(
                f"Waiting for the messaging limit ({self.number.account.messaging_limit_tier})"
                f" until {until:%Y-%m-%d %H:%M} UTC"
            )
        )
        return [m for m in rows if m.to not in refused]
