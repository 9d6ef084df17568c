"""Retry failed recipients whose failure another attempt can fix.

Which failures count as retryable: those whose error code the engine itself would have
retried had it come back on the send (``delivery.cloud.outcomes``: transient trouble at Meta,
throughput and pair limits, the per-user marketing cap), plus rows failed with no code at
all, which is how the ambiguous-send policy "fail" ends a send that left no evidence of
reaching Meta within ``UNKNOWN_SETTLE_SECONDS``. Such failures reach ``failed`` when Meta
reports them in a status webhook after accepting the send, or by that policy.

Never retried: a permanent per-recipient code (131026 undeliverable, 131050 the user
stopped marketing messages, 132005-132008 this recipient's values, ...): the same send
would fail the same way, or must not be made. Nor anyone who has opted out since.

Dead rows are not touched here: they have dead-letter entries, and support requeues or
discards those (``delivery`` dead letters) with an audit trail.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from campaigns.state import LifecycleError
from delivery.cloud.outcomes import CODE_OUTCOMES, DOCUMENTED_WAITS, Outcome
from delivery.engine.dispatch import campaign_kick
from delivery.messages import campaign_failed_retry, campaign_failed_retryable_count
from whatsblast.core import queues

_RETRYABLE_OUTCOMES = (
    Outcome.TRANSIENT,
    Outcome.THROTTLED,
    Outcome.SPAM_LIMITED,
    Outcome.PAIR_LIMITED,
    Outcome.USER_CAPPED,
)
RETRYABLE_CODES: tuple[int, ...] = tuple(
    sorted(code for code, outcome in CODE_OUTCOMES.items() if outcome in _RETRYABLE_OUTCOMES)
)
# 131049: Meta asks for at least 24 h before the same user gets marketing again.
USER_CAP_CODE = 131049
USER_CAP_WAIT_S = DOCUMENTED_WAITS[USER_CAP_CODE]


@dataclass(frozen=True)
class RetryReport:
    campaign_id: int
    retried: int
    status: str


def campaign_retryable_count(*, campaign: Campaign) -> int:
    """Failed rows ``campaign_retry_failed`` would retry now."""
    return campaign_failed_retryable_count(campaign_id=campaign.pk, codes=RETRYABLE_CODES)


def campaign_retry_failed(*, campaign: Campaign, actor: str = "") -> RetryReport:
    """Give every retryable failed recipient a fresh attempt; restart a completed campaign.

    A paused campaign keeps its retried rows pending until it is resumed; a draft,
    scheduled or cancelled campaign has nothing to retry (``LifecycleError``).
    """
    entry = {"at": timezone.now().isoformat(), "outcome": "retry requested", "by": actor}
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if locked.status not in (
            CampaignStatus.RUNNING,
            CampaignStatus.PAUSED,
            CampaignStatus.COMPLETED,
        ):
            raise LifecycleError(f"campaign {locked.pk} is {locked.status}: nothing to retry")
        retried = campaign_failed_retry(
            campaign_id=locked.pk,
            codes=RETRYABLE_CODES,
            user_cap_code=USER_CAP_CODE,
            user_cap_wait_s=USER_CAP_WAIT_S,
            entry=entry,
        )
        if retried and locked.status == CampaignStatus.COMPLETED:
            locked.status = CampaignStatus.RUNNING
            locked.completed_at = None
            locked.status_reason = ""
            locked.save(update_fields=["status", "completed_at", "status_reason", "updated_at"])
        if retried and locked.status == CampaignStatus.RUNNING:
            queues.after_commit(lambda: _kick(locked.pk), what="campaign senders")
    return RetryReport(locked.pk, retried, locked.status)


def _kick(campaign_id: int) -> None:
    campaign_kick(campaign_id=campaign_id)
