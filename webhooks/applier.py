"""The applier: stored callback events → message statuses, inbound messages, account state.

Runs in RQ (``whatsblast.jobs.webhook_apply_job``), never in the request. Each batch is one
transaction: lock pending events (SKIP LOCKED, so a second applier takes the next ones),
parse every item, apply statuses with one guarded UPDATE, store the rest, and mark the
events processed — a crash leaves the events pending and the next run redoes the batch.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from delivery.messages import NewlyFailed, status_updates_apply
from webhooks import metrics
from webhooks.account_events import account_changes_apply, template_changes_apply
from webhooks.failures import async_errors_apply, failures_apply
from webhooks.inbound import inbound_store
from webhooks.models import (
    AsyncError,
    MarketingClick,
    UnmatchedStatus,
    WebhookEvent,
    WebhookEventStatus,
)
from webhooks.payloads import ParsedBody, PayloadRejected, StatusUpdate, body_parse, json_clean
from webhooks.services import applier_debounce_clear, applier_schedule
from webhooks.statuses import statuses_reduce, statuses_resolve
from webhooks.unmatched import Retry, unmatched_due_lock, unmatched_settle, unmatched_store
from webhooks.users import (
    preferences_apply,
    user_ids_from_contacts,
    user_ids_from_inbound,
    user_ids_from_preferences,
)
from whatsblast.core.db import array_literal, bound_cursor

logger = logging.getLogger(__name__)

# Pause after a lock timeout or deadlock before the batch is tried again.
TRANSIENT_RETRY_DELAY_S = 0.2


@dataclass
class ApplyReport:
    events: int = 0
    rejected: int = 0
    failed: int = 0
    statuses: int = 0
    messages_updated: int = 0
    unmatched_new: int = 0
    unmatched_retried: int = 0
    unmatched_matched: int = 0
    unmatched_reported: int = 0
    inbound: int = 0
    opt_outs: int = 0
    async_errors: int = 0
    user_actions: int = 0  # clicks on Marketing Messages API sends, stored
    templates_updated: int = 0
    account_changes: int = 0
    campaigns_paused: int = 0
    preference_opt_outs: int = 0
    preference_opt_ins: int = 0
    failure_opt_outs: int = 0
    numbers_slowed: int = 0
    numbers_changed: int = 0
    user_ids_changed: int = 0
    user_ids_learnt: int = 0

    def add(self, other: ApplyReport) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def did_work(self) -> bool:
        return bool(self.events or self.failed or self.unmatched_retried)


@dataclass(frozen=True)
class _Event:
    id: int
    received_at: datetime
    parsed: ParsedBody | None
    error: str = ""


def events_apply_batch(
    *, limit: int | None = None, event_ids: list[int] | None = None, retry_unmatched: bool = True
) -> ApplyReport:
    """Apply one batch of pending events (the oldest ``limit``, or exactly ``event_ids``)."""
    limit = limit or settings.WEBHOOK_APPLY_BATCH_EVENTS
    now = timezone.now()
    with transaction.atomic():
        events = _events_lock(limit=limit, event_ids=event_ids)
        retries = unmatched_due_lock(now=now) if retry_unmatched else []
        if not events and not retries:
            return ApplyReport()
        report = ApplyReport(events=len(events), unmatched_retried=len(retries))
        _statuses_apply(events, retries, now, report)
        _others_apply(events, now, report)
        _events_finish(events, now)
        report.rejected = sum(1 for e in events if e.parsed is None)
    return report


def _events_lock(*, limit: int, event_ids: list[int] | None) -> list[_Event]:
    """Lock pending events, oldest first, and read as many bodies as the byte budget allows.

    SKIP LOCKED lets a second applier (the sweep next to a debounced job) take the next
    events instead of waiting; rows locked beyond the byte budget stay pending and are
    released at commit for the next batch.
    """
    scope = "id = ANY(%s::bigint[])" if event_ids is not None else "TRUE"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT id, received_at, octet_length(body) FROM webhooks_webhookevent
            WHERE status = 'pending' AND {scope}
            ORDER BY received_at
            LIMIT %s
            FOR UPDATE SKIP LOCKED
            """,  # noqa: S608 - the scope is one of two constant strings
            [event_ids, limit] if event_ids is not None else [limit],
        )
        heads = cursor.fetchall()
        # Bodies read per batch, whatever the event count (2 MiB by default): Meta's bodies
        # reach 3 MB, and a batch holds its bodies and their parsed items in memory at once.
        # 2 MiB is some 8,000 statuses batched by Meta; 200 events of one status each are far
        # below it. With two threads, a smaller batch holds its rows' locks for less time
        # (the other thread's batch may be waiting for them): 36,200-38,457 statuses/s
        # against 33,557-36,189 at 8 MiB (four pairs, 100 statuses an event).
        chosen: list[tuple[int, datetime]] = []
        total, budget = 0, settings.WEBHOOK_APPLY_BATCH_BYTES
        for event_id, received_at, size in heads:
            if chosen and total + size > budget:
                break
            chosen.append((event_id, received_at))
            total += size
        if not chosen:
            return []
        cursor.execute(
            "SELECT id, body FROM webhooks_webhookevent WHERE id = ANY(%s::bigint[])",
            [array_literal(str(event_id) for event_id, _ in chosen)],
        )
        bodies = dict(cursor.fetchall())
    return [_event_parse(event_id, at, bodies[event_id]) for event_id, at in chosen]


def _event_parse(event_id: int, received_at: datetime, body: bytes) -> _Event:
    try:
        parsed = body_parse(json.loads(bytes(body)))
    except (ValueError, RecursionError) as exc:  # JSON errors and PayloadRejected
        reason = str(exc) if isinstance(exc, PayloadRejected) else f"not JSON: {exc}"
        logger.warning("webhook event %s rejected: %s", event_id, reason[:200])
        return _Event(event_id, received_at, None, reason[:2000])
    return _Event(event_id, received_at, parsed)


def _statuses_apply(
    events: list[_Event], retries: list[Retry], now: datetime, report: ApplyReport
) -> None:
    # The events' statuses, then the retried ones. Tens of thousands a batch: where each
    # came from is kept as each event's first index (unmatched statuses are few, so their
    # event is looked up), not as a tuple per status.
    statuses: list[StatusUpdate] = []
    event_starts: list[int] = []
    event_ids: list[int] = []
    for event in events:
        if event.parsed is None or not event.parsed.statuses:
            continue
        event_starts.append(len(statuses))
        event_ids.append(event.id)
        received_at = event.received_at
        # A status without a usable timestamp is dated by its event's receipt.
        statuses.extend(
            s if s.timestamp is not None else replace(s, timestamp=received_at)
            for s in event.parsed.statuses
        )
    report.statuses = retries_start = len(statuses)
    statuses.extend(replace(r.status, timestamp=r.status.timestamp or now) for r in retries)
    resolution = statuses_resolve(statuses)
    failed: list[NewlyFailed] = []
    report.messages_updated = status_updates_apply(
        statuses_reduce(resolution.matched), newly_failed=failed
    )
    effects = failures_apply(failed=failed, now=now)
    report.failure_opt_outs = effects.opted_out
    report.campaigns_paused += effects.campaigns_paused
    report.numbers_slowed += effects.numbers_slowed
    identities = [i for e in events if e.parsed is not None for i in e.parsed.identities]
    report.user_ids_learnt += user_ids_from_contacts(resolution.matched, identities)
    missed = set(resolution.unmatched)
    new_unmatched = [
        (statuses[i], event_ids[bisect_right(event_starts, i) - 1])
        for i in sorted(missed)
        if i < retries_start
    ]
    matched_rows = [r.row_id for i, r in enumerate(retries, retries_start) if i not in missed]
    missed_rows = [r.row_id for i, r in enumerate(retries, retries_start) if i in missed]
    report.unmatched_new = unmatched_store(statuses=new_unmatched, now=now)
    report.unmatched_matched = len(matched_rows)
    report.unmatched_reported = unmatched_settle(
        matched_ids=matched_rows, missed_ids=missed_rows, now=now
    )


def _others_apply(events: list[_Event], now: datetime, report: ApplyReport) -> None:
    parsed = [(e, e.parsed) for e in events if e.parsed is not None]
    # Who the senders are first, so a STOP showing only a user id finds the contact whose
    # phone another message of the batch tied to that id.
    report.user_ids_learnt += user_ids_from_inbound([m for _, p in parsed for m in p.inbound])
    inbound = inbound_store(
        items=[(m, e.id) for e, p in parsed for m in p.inbound],
        fallback_times={e.id: e.received_at for e in events},
        now=now,
    )
    report.inbound, report.opt_outs = inbound.stored, inbound.opt_outs
    report.numbers_changed = inbound.numbers_changed
    report.user_ids_changed = inbound.user_ids_changed
    said = [pref for _, p in parsed for pref in p.preferences]
    report.user_ids_learnt += user_ids_from_preferences(said)
    preferences = preferences_apply(preferences=said, now=now)
    report.preference_opt_outs = preferences.opted_out
    report.preference_opt_ins = preferences.opted_in
    errors = [
        AsyncError(
            event_id=e.id,
            phone_number_id=item.phone_number_id,
            code=item.code,
            title=item.title,
            message=item.message,
            details=item.details,
            payload=json_clean(item.raw),
        )
        for e, p in parsed
        for item in p.errors
    ]
    if errors:
        AsyncError.objects.bulk_create(errors)
        codes = Counter(error.code for error in errors)
        logger.warning("Meta reported system errors by callback: %s", dict(codes))
    report.async_errors = len(errors)
    clicks = [
        MarketingClick(
            event_id=e.id,
            phone_number_id=action.phone_number_id,
            action_type=action.action_type,
            click_component=action.click_component,
            product_id=action.product_id,
            click_id=action.click_id,
            tracking_token=action.tracking_token,
            clicked_at=action.timestamp,
            payload=json_clean(action.raw),
        )
        for e, p in parsed
        for action in p.user_actions
    ]
    if clicks:
        MarketingClick.objects.bulk_create(clicks)
    report.user_actions = len(clicks)
    async_effects = async_errors_apply(errors=[item for _, p in parsed for item in p.errors])
    report.numbers_slowed += async_effects.numbers_slowed
    report.campaigns_paused += async_effects.campaigns_paused
    templates, paused_t = template_changes_apply([t for _, p in parsed for t in p.templates])
    accounts, paused_a = account_changes_apply([a for _, p in parsed for a in p.accounts])
    report.templates_updated, report.account_changes = templates, accounts
    report.campaigns_paused += paused_t + paused_a


def _events_finish(events: list[_Event], now: datetime) -> None:
    """Mark the batch's events done, in the batch's own transaction (one statement).

    The rows travel as one JSON array, built by json.dumps in C: four bound text arrays
    were dumped element by element in Python, 9 % of a drain at one status per event.
    """
    rejected, processed = WebhookEventStatus.REJECTED.value, WebhookEventStatus.PROCESSED.value
    rows = [
        # jsonb refuses NUL, and a rejection's reason may quote the body.
        {"id": e.id, "status": rejected, "error": e.error.replace("\x00", ""), "summary": {}}
        if e.parsed is None
        else {"id": e.id, "status": processed, "summary": e.parsed.summary()}
        for e in events
    ]
    with bound_cursor() as cursor:
        cursor.execute(
            """
            UPDATE webhooks_webhookevent AS e
            SET status = u.status, error = COALESCE(u.error, ''), summary = u.summary,
                processed_at = %s
            FROM jsonb_to_recordset(%s::jsonb) AS u(id bigint, status text, error text,
                                                     summary jsonb)
            WHERE e.id = u.id
            """,
            [now, json.dumps(rows)],
        )


def events_apply_isolated(*, limit: int | None = None) -> ApplyReport:
    """Apply pending events one per transaction, marking any that fails as failed.

    The fallback after a batch raised: one bad event (a bug, a value the database refuses)
    must not hold every event behind it. Unmatched retries are tried one by one as well.
    """
    limit = limit or settings.WEBHOOK_APPLY_BATCH_EVENTS
    report = ApplyReport()
    ids = WebhookEvent.objects.filter(status=WebhookEventStatus.PENDING).order_by("received_at")
    for event_id in ids.values_list("id", flat=True)[:limit]:
        try:
            report.add(events_apply_batch(event_ids=[event_id], retry_unmatched=False))
        except OperationalError:
            raise
        except Exception as exc:
            logger.exception("webhook event %s failed to apply", event_id)
            WebhookEvent.objects.filter(id=event_id, status=WebhookEventStatus.PENDING).update(
                status=WebhookEventStatus.FAILED,
                error=repr(exc)[:2000],
                processed_at=timezone.now(),
            )
            report.failed += 1
    try:
        report.add(events_apply_batch(event_ids=[], retry_unmatched=True))
    except OperationalError:
        raise
    except Exception:
        # The retries themselves fail: report them now rather than retry them forever.
        logger.exception("unmatched status retries failed; reporting them")
        due = UnmatchedStatus.objects.filter(
            reported_at__isnull=True, next_try_at__lte=timezone.now()
        )
        report.unmatched_reported += due.update(reported_at=timezone.now())
    return report


# A drain that steps aside for urgent jobs first works this long: under a steady stream of
# them (a soak at 10 OTPs a second) a drain yielding after every batch applied one batch per
# trip round the queues and fell half an hour behind.
STEP_ASIDE_AFTER_S = 1.0


def events_drain(
    *,
    budget_seconds: float | None = None,
    batch_events: int | None = None,
    step_aside: Callable[[], bool] | None = None,
    threads: int | None = None,
) -> ApplyReport:
    """Apply batches until no pending event remains or the time budget is spent.

    The debounce key is cleared first, so an event stored from now on schedules a new job
    and none is left waiting for the sweep. A drain cut short by its budget, or by
    ``step_aside`` answering true between batches (work more urgent than statuses waits for
    this worker) once it has drained for ``STEP_ASIDE_AFTER_S``, schedules its own
    continuation.

    ``threads`` batches run at once (``WEBHOOK_APPLY_THREADS``), each in its own transaction
    on its own connection; SKIP LOCKED gives each its own events. One batch's Python
    (parsing, reducing) runs while another waits for PostgreSQL.
    """
    budget = settings.WEBHOOK_APPLY_BUDGET_SECONDS if budget_seconds is None else budget_seconds
    threads = settings.WEBHOOK_APPLY_THREADS if threads is None else threads
    started = time.monotonic()
    run = _DrainRun(deadline=started + budget, started=started, step_aside=step_aside)
    applier_debounce_clear()
    helpers = [
        threading.Thread(target=_drain_helper, args=(run, batch_events), name=f"applier-{n}")
        for n in range(1, threads)
    ]
    for helper in helpers:
        helper.start()
    try:
        _drain_loop(run, batch_events)
    except BaseException:
        run.stop.set()  # the job is ending (a timeout, a warm stop): so are its helpers
        raise
    finally:
        for helper in helpers:
            helper.join()
    if run.cut_short:
        applier_schedule()
    return run.total


@dataclass
class _DrainRun:
    """What the threads of one drain share: the clock, the stop flag and the counts."""

    deadline: float
    started: float
    step_aside: Callable[[], bool] | None
    total: ApplyReport = field(default_factory=ApplyReport)
    stop: threading.Event = field(default_factory=threading.Event)
    cut_short: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def _drain_helper(run: _DrainRun, batch_events: int | None) -> None:
    """A helper thread's drain: whatever ends it, its batch in hand rolled back with its
    transaction and stays pending for the others, and its connection is closed."""
    try:
        _drain_loop(run, batch_events)
    except BaseException:  # a thread has nowhere to raise to: say so, the others go on
        logger.exception("applier thread stopped")
    finally:
        connection.close()


def _drain_loop(run: _DrainRun, batch_events: int | None) -> None:
    while not run.stop.is_set():
        if time.monotonic() >= run.deadline:
            run.cut_short = True
            break
        try:
            report = events_apply_batch(limit=batch_events)
        except OperationalError as exc:
            # Lock timeout, deadlock, a dropped connection: the batch rolled back whole.
            logger.warning("webhook batch rolled back (%s); retrying", exc)
            connection.close_if_unusable_or_obsolete()
            time.sleep(TRANSIENT_RETRY_DELAY_S)
            continue
        except Exception:
            logger.exception("webhook batch failed; applying its events one by one")
            report = events_apply_isolated(limit=batch_events)
        with run.lock:
            run.total.add(report)
        metrics.webhooks_applied(report)
        if not report.did_work:
            return
        if (
            run.step_aside is not None
            and time.monotonic() - run.started >= STEP_ASIDE_AFTER_S
            and run.step_aside()
        ):
            run.cut_short = True
            run.stop.set()
            return
