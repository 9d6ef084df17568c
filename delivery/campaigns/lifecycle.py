"""Campaign transitions that move its messages too: resume and cancel.

Pausing is a status change alone (``campaigns.state``); resuming wakes the senders, a
cancel cancels every row not yet handed to Meta. Completion is the engine's
(``delivery.engine.completion``).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from campaigns.state import LifecycleError
from delivery.campaigns.launch import campaign_start
from delivery.engine.dispatch import campaign_kick
from delivery.messages import campaign_pending_cancel
from whatsblast.core import queues


def campaign_resume(*, campaign: Campaign) -> Campaign:
    """Continue where the campaign stopped: nobody skipped, nobody sent twice."""
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if locked.status == CampaignStatus.RUNNING:
            return locked
        if locked.status != CampaignStatus.PAUSED:
            raise LifecycleError(f"campaign {locked.pk} is {locked.status}, it cannot be resumed")
        if locked.started_at is None:
            # Paused while scheduled: nothing was launched yet, so launch now.
            locked.status = CampaignStatus.DRAFT
            locked.save(update_fields=["status", "updated_at"])
            campaign_start(campaign=locked)
        else:
            locked.status = CampaignStatus.RUNNING
            locked.status_reason = ""
            # The quality guard judges what is sent from now: the sends that paused it
            # were seen by the person resuming.
            locked.guard_since = timezone.now()
            locked.save(update_fields=["status", "status_reason", "guard_since", "updated_at"])
            queues.after_commit(lambda: _kick(locked.pk), what="campaign senders")
    locked.refresh_from_db()
    return locked


def campaign_cancel(*, campaign: Campaign, reason: str = "cancelled by user") -> int:
    """Cancel the campaign; every row not yet handed to Meta becomes ``cancelled``.

    Rows in flight (``sending``) finish on their own: their send may already have left.
    Returns how many rows were cancelled.
    """
    with transaction.atomic():
        locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if locked.status in (CampaignStatus.COMPLETED, CampaignStatus.CANCELLED):
            raise LifecycleError(f"campaign {locked.pk} is already {locked.status}")
        locked.status = CampaignStatus.CANCELLED
        locked.status_reason = reason[:500]
        locked.completed_at = timezone.now()
        locked.first_completed_at = locked.first_completed_at or locked.completed_at
        locked.save(
            update_fields=[
                "status",
                "status_reason",
                "completed_at",
                "first_completed_at",
                "updated_at",
            ]
        )
        return campaign_pending_cancel(campaign_id=locked.pk)


def _kick(campaign_id: int) -> None:
    campaign_kick(campaign_id=campaign_id)
