"""The campaign send loop: tokens, then claim, then send concurrently, then record in bulk.

One call runs one slot of a campaign for a time budget. The loop keeps up to
``concurrency`` sends in flight (Little's law: in flight = rate x latency, so 250 msg/s
at 250 ms needs about 63), takes tokens from the number's shared bucket *before* claiming
rows (so a crash leaves at most the in-flight rows in doubt), and records results every
``FLUSH_INTERVAL_S`` in a few statements. Pacing is the bucket's job: the loop waits only
for tokens or for in-flight sends, never for a retry (retries are rows with a future
``next_attempt_at``).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from campaigns.models import Campaign, CampaignStatus, PhoneNumber
from delivery.cloud.client import Accepted, CloudApiClient, SendRequest, SendResult, get_client
from delivery.cloud.outcomes import classify
from delivery.engine import dispatch, slots
from delivery.engine.completion import campaigns_complete_finished
from delivery.engine.effects import batch_effects_apply
from delivery.engine.ratelimit import TokenBucket, TrafficClass
from delivery.engine.reach import reach_admit, reach_from_table
from delivery.engine.settle import Effects, RetryPolicy, settle
from delivery.engine.window_guard import WindowGuard
from delivery.messages import (
    ClaimedMessage,
    Settlement,
    claim_campaign_batch,
    release_messages,
    settlements_record,
)
from delivery.metrics import SendMeter

logger = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 0.25
STATUS_CHECK_INTERVAL_S = 0.5
# Waiting transactional work is looked for more often: one LLEN, a fraction of a ms.
YIELD_CHECK_INTERVAL_S = 0.05
MAX_CONCURRENCY = 256
MIN_CONCURRENCY = 4
# Upper bound on one claim: keeps the claimed-but-unsent window (rows in doubt after a
# crash) small while still amortising the round trip.
MAX_CLAIM = 200
# Claimed rows kept ready for the next tokens, in seconds of the campaign's share.
READY_SECONDS = 0.5
# Stops that leave work for a continuation job.
HAND_OVER_REASONS = ("time budget", "yield to transactional")
# Pace a little under the configured rate and keep the burst small: Meta counts per
# second at its end, and network jitter moves sends across second boundaries, so an
# exact-rate pace would now and then put rate + 1 or + 2 into one of Meta's seconds.
RATE_HEADROOM = 0.985
# The burst covers the send loop's own jitter (a claim, a flush) without letting a stall
# turn into a spike: a tenth of a second's tokens, at most BURST_MAX_TOKENS.
BURST_SECONDS = 0.1
BURST_MAX_TOKENS = 25


@dataclass
class SlotReport:
    sent: int = 0
    settled: int = 0
    throttled: int = 0
    stopped_because: str = ""
    work_remaining: bool = False
    handed_over: bool = False
    latencies: list[float] = field(default_factory=list)


def number_bucket(phone_number: PhoneNumber) -> TokenBucket:
    rate = phone_number.rate_per_second
    return TokenBucket(
        phone_number.phone_number_id,
        rate=float(rate) * RATE_HEADROOM,
        reserve=float(phone_number.transactional_reserve),
        burst_s=min(BURST_SECONDS, BURST_MAX_TOKENS / max(1, rate)),
    )


def concurrency_for(rate: float, latency_s: float) -> int:
    """In-flight sends needed to sustain ``rate`` at ``latency_s`` (Little's law + 50 %)."""
    return max(MIN_CONCURRENCY, min(MAX_CONCURRENCY, math.ceil(rate * latency_s * 1.5) + 2))


class CampaignSlotSender:
    """Sends for one campaign slot until the budget runs out or there is nothing due."""

    def __init__(
        self,
        campaign: Campaign,
        *,
        slots: int,
        client: CloudApiClient | None = None,
        should_yield: Callable[[], bool] | None = None,
    ) -> None:
        self.campaign = campaign
        self.number = campaign.phone_number
        self.template = campaign.template
        self.bucket = number_bucket(self.number)
        self.meter = SendMeter(self.number.phone_number_id, TrafficClass.CAMPAIGN)
        self.client = client or get_client()  # used when WHATSAPP_HTTP_CLIENT=requests
        self.policy = RetryPolicy(max_attempts=campaign.max_attempts)
        self.share = self.number.rate_per_second * (1 - self.number.transactional_reserve) / slots
        self.latency_estimate = 0.3
        self.should_yield = should_yield  # callable: True when transactional work waits
        self._last_yield_check = 0.0
        self._ready: deque[ClaimedMessage] = deque()
        self._ready_target = max(1, min(MAX_CLAIM, math.ceil(self.share * READY_SECONDS)))
        self.base_url = str(self.number.api_base_url or settings.WHATSAPP_API_BASE_URL)
        self.limit = campaign.phone_number.account.daily_unique_user_limit
        self.waba_id = campaign.phone_number.account.waba_id
        # Send windows in each recipient's local time (None: the campaign has none).
        self.windows = WindowGuard.for_campaign(campaign)

    def _request(self, message: ClaimedMessage) -> SendRequest:
        return SendRequest(
            base_url=self.base_url,
            phone_number_id=self.number.phone_number_id,
            access_token=self.number.access_token,
            to=message.to,
            callback_data=f"wb:{message.id}",
            template_name=self.template.name,
            language=self.template.language,
            params=message.params,
        )

    def run(
        self,
        *,
        budget_s: float,
        renew: Callable[[], bool] | None = None,
        hand_over: Callable[[], None] | None = None,
    ) -> SlotReport:
        """Send until the budget is spent, nothing is due, or the campaign stops.

        ``hand_over`` is called once, the moment this run stops taking new work while work
        remains: the continuation can start on another worker while this one drains its
        in-flight sends, so the number's pace has no gap between jobs.
        """
        report = SlotReport()
        deadline = time.monotonic() + budget_s
        in_flight: dict[Future[SendResult], ClaimedMessage] = {}
        done: list[tuple[ClaimedMessage, SendResult]] = []
        last_flush = last_check = time.monotonic()
        stopping = ""
        with self._submitter() as submit:
            while True:
                now = time.monotonic()
                if not stopping:
                    stopping = self._stop_reason(now, deadline, last_check, renew)
                    if now - last_check >= STATUS_CHECK_INTERVAL_S:
                        last_check = now
                    if stopping in HAND_OVER_REASONS and hand_over is not None:
                        hand_over()
                        report.handed_over = True
                wait_s = FLUSH_INTERVAL_S
                if not stopping:
                    wait_s, nothing_due = self._fill(submit, in_flight)
                    if nothing_due and not in_flight:
                        stopping = "nothing due"
                if stopping and not in_flight:
                    break
                finished, _ = (
                    wait(
                        list(in_flight),
                        timeout=min(wait_s, FLUSH_INTERVAL_S),
                        return_when=FIRST_COMPLETED,
                    )
                    if in_flight
                    else (set(), None)
                )
                if not in_flight:
                    time.sleep(min(wait_s, FLUSH_INTERVAL_S))
                for future in finished:
                    done.append((in_flight.pop(future), future.result()))
                if done and (time.monotonic() - last_flush >= FLUSH_INTERVAL_S):
                    broken = self._flush(done, report)
                    done = []
                    last_flush = time.monotonic()
                    if broken and not stopping:
                        stopping = "campaign broken"
            if done:
                self._flush(done, report)
        # Rows claimed for the next tokens but never sent go back untouched.
        release_messages(ids=[message.id for message in self._ready])
        self._ready.clear()
        report.stopped_because = stopping
        report.work_remaining = stopping in HAND_OVER_REASONS
        return report

    def _stop_reason(
        self, now: float, deadline: float, last_check: float, renew: Callable[[], bool] | None
    ) -> str:
        if now >= deadline:
            return "time budget"
        if now - last_check >= STATUS_CHECK_INTERVAL_S:
            status = (
                Campaign.objects.filter(pk=self.campaign.pk)
                .values_list("status", flat=True)
                .first()
            )
            if status != CampaignStatus.RUNNING:
                return f"campaign {status}"
            if renew is not None and not renew():
                return "slot lost"
        if self.should_yield is not None and now - self._last_yield_check >= YIELD_CHECK_INTERVAL_S:
            # A transactional job waits for a free worker: step aside now, not at the next
            # status check, so an OTP never queues behind a campaign for long.
            self._last_yield_check = now
            if self.should_yield():
                return "yield to transactional"
        return ""

    @contextmanager
    def _submitter(self) -> Iterator[Callable[[SendRequest], Future[SendResult]]]:
        """How sends are started: the asyncio transport, or threads around ``requests``."""
        if settings.WHATSAPP_HTTP_CLIENT == "aiohttp":
            # Imported here, not at module level: aiohttp is most of the import cost of
            # this module, and the transactional job (which imports number_bucket from
            # here) runs in a freshly forked work horse that would pay it on every send.
            from delivery.cloud.transport import get_transport

            yield get_transport().submit
            return
        with ThreadPoolExecutor(max_workers=MAX_CONCURRENCY, thread_name_prefix="send") as pool:
            yield lambda request: pool.submit(self.client.send, request)

    def _fill(
        self,
        submit: Callable[[SendRequest], Future[SendResult]],
        in_flight: dict[Future[SendResult], ClaimedMessage],
    ) -> tuple[float, bool]:
        """Top up the in-flight sends; return (how long to wait, whether nothing was due).

        Rows are claimed ahead into a small ready buffer, and tokens are taken only for rows
        in hand, which are then sent at once. Taking tokens first and claiming after put a
        database round trip (and on a busy machine, a descheduled process) between the
        grant and the request: grants made in one second then reached Meta in the next,
        bunched, above the rate. The buffer holds at most READY_SECONDS of the campaign's
        share, so a crash leaves few rows in doubt.
        """
        concurrency = concurrency_for(self.share, self.latency_estimate)
        free = min(concurrency - len(in_flight), MAX_CLAIM)
        if free <= 0:
            return FLUSH_INTERVAL_S, False
        due = True
        # Refill at half empty: fewer, larger claims than one row per token.
        if len(self._ready) < free and len(self._ready) <= self._ready_target // 2:
            due = self._refill()
        if not self._ready:
            return FLUSH_INTERVAL_S, not due
        want = min(free, len(self._ready))
        grant = self.bucket.acquire(want, TrafficClass.CAMPAIGN)
        self.meter.tokens(asked=want, granted=grant.tokens)
        for _ in range(grant.tokens):
            message = self._ready.popleft()
            in_flight[submit(self._request(message))] = message
        if grant.tokens < want:
            return max(0.001, grant.wait_s), False
        return 0.0, False

    def _refill(self) -> bool:
        """Claim due rows into the ready buffer; False when nothing at all was due."""
        need = self._ready_target - len(self._ready)
        if need <= 0:
            return True
        rows = claim_campaign_batch(campaign_id=self.campaign.pk, limit=need)
        claimed = len(rows)
        if self.windows is not None:
            # Recipients whose local send window is closed go back, due at its opening
            # (a retry or a resend that fell at night, a campaign that overran its window).
            rows = self.windows.admit(rows, now=timezone.now())
        self._ready.extend(self._admit(rows))
        # Rows held for their window do not mean nothing is due: others may be behind them.
        return claimed > 0 or bool(self._ready)

    def _admit(self, rows: list[ClaimedMessage]) -> list[ClaimedMessage]:
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
        held = [m for m in rows if m.to in refused]
        until = timezone.now() + timedelta(seconds=max(1.0, admission.room_frees_in_s))
        # Waiting is not failing: the rows go back to pending for when room frees.
        release_messages(ids=[m.id for m in held], at=until)
        Campaign.objects.filter(pk=self.campaign.pk).update(
            status_reason=(
                f"Waiting for the messaging limit ({self.number.account.messaging_limit_tier})"
                f" until {until:%Y-%m-%d %H:%M} UTC"
            )
        )
        return [m for m in rows if m.to not in refused]

    def _flush(self, done: list[tuple[ClaimedMessage, SendResult]], report: SlotReport) -> bool:
        """Record finished sends; return True when the campaign turned out to be broken."""
        effects = Effects()
        now = timezone.now()
        settlements: list[Settlement] = []
        for message, result in done:
            report.latencies.append(result.latency_s)
            outcome = classify(result)
            settlement = settle(
                message=message,
                result=result,
                outcome=outcome,
                policy=self.policy,
                now=now,
                effects=effects,
            )
            if settlement is not None:
                settlements.append(settlement)
            if isinstance(result, Accepted):
                report.sent += 1
        latencies = [r.latency_s for _, r in done if isinstance(r, Accepted)]
        if latencies:
            # Smooth the estimate: one slow batch should not double the in-flight window.
            self.latency_estimate = 0.8 * self.latency_estimate + 0.2 * (
                sum(latencies) / len(latencies)
            )
        report.settled += settlements_record(
            settlements, opted_out_contact_ids=effects.opted_out_contact_ids
        )
        self.meter.flush(results=[result for _, result in done], settlements=settlements)
        report.throttled += effects.throttled
        return batch_effects_apply(
            effects=effects, bucket=self.bucket, campaign=self.campaign, sent=report.sent
        )


def campaign_slot_send(*, campaign_id: int, slot: int, token: str) -> dict[str, Any]:
    """Run one slot's sender for ``CAMPAIGN_JOB_BUDGET_SECONDS``, then hand over.

    Only the job holding the slot's current token runs; a duplicated or late job exits at
    once. A chain that ends (nothing due, campaign stopped) frees its slot and completes
    the campaign if nothing is left open.
    """
    if not slots.slot_renew(campaign_id, slot, token):
        return {"stopped": "slot owned by another job"}
    campaign = (
        Campaign.objects.select_related("phone_number__account", "template")
        .filter(pk=campaign_id)
        .first()
    )
    if campaign is None or campaign.status != CampaignStatus.RUNNING:
        slots.slot_release(campaign_id, slot, token)
        return {"stopped": "campaign not running"}
    count = dispatch.slots_for(
        rate_per_second=campaign.phone_number.rate_per_second,
        reserve=campaign.phone_number.transactional_reserve,
    )
    sender = CampaignSlotSender(campaign, slots=count, should_yield=dispatch.transactional_waiting)
    handed_over: list[bool] = []

    def hand_over() -> None:
        dispatch.campaign_continue(campaign_id=campaign_id, slot=slot, token=token)
        handed_over.append(True)

    try:
        report = sender.run(
            budget_s=settings.CAMPAIGN_JOB_BUDGET_SECONDS,
            renew=lambda: slots.slot_renew(campaign_id, slot, token),
            hand_over=hand_over,
        )
    except Exception:
        # The job dies (PostgreSQL went away, a bug): free its slot now, so the next
        # maintenance tick starts a fresh chain instead of waiting out the lease. The rows
        # it had in flight are the reconciler's, as after a crash.
        if not handed_over:
            try:
                slots.slot_release(campaign_id, slot, token)
            except RedisError:
                logger.warning(
                    "campaign %s slot %s not released: Redis unavailable", campaign_id, slot
                )
        raise
    if not report.handed_over:
        slots.slot_release(campaign_id, slot, token)
        campaigns_complete_finished(campaign_id=campaign_id)
    return {"sent": report.sent, "settled": report.settled, "stopped": report.stopped_because}
