"""Campaign state transitions that other apps trigger (webhooks, the engine, the admin)."""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from campaigns.models import BusinessAccount, Campaign, CampaignStatus, Template
from delivery.messages import campaign_pending_cancel
from whatsblast import queues

# Campaigns that are (or are about to be) sending: the ones a broken template or a
# restricted account must stop.
ACTIVE_STATUSES = (CampaignStatus.SCHEDULED, CampaignStatus.RUNNING)


def campaigns_pause_for(
    *,
    reason: str,
    template: Template | None = None,
    account: BusinessAccount | None = None,
) -> int:
    """Pause every active campaign using ``template`` or sending from ``account``.

    Returns how many campaigns were paused. The engine stops claiming for a paused
    campaign at its next batch; rows already claimed finish or are released.
    """
    if template is None and account is None:
        raise ValueError("campaigns_pause_for needs a template or an account")
    scope = Q()
    if template is not None:
        scope |= Q(template=template)
    if account is not None:
        scope |= Q(phone_number__account=account)
    return Campaign.objects.filter(scope, status__in=ACTIVE_STATUSES).update(
        status=CampaignStatus.PAUSED, status_reason=reason[:500]
    )


class LifecycleError(ValueError):
    """The requested transition does not apply to the campaign's current state."""


def campaign_pause(*, campaign: Campaign, reason: str = "paused by user") -> Campaign:
    """Stop claiming at once; sends already in flight finish and are recorded."""
    updated = Campaign.objects.filter(
        pk=campaign.pk, status__in=(CampaignStatus.RUNNING, CampaignStatus.SCHEDULED)
    ).update(status=CampaignStatus.PAUSED, status_reason=reason[:500])
    campaign.refresh_from_db()
    if not updated and campaign.status != CampaignStatus.PAUSED:
        raise LifecycleError(f"campaign {campaign.pk} is {campaign.status}, it cannot be paused")
    return campaign


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
            from campaigns.launch import campaign_start

            campaign_start(campaign=locked)
        else:
            locked.status = CampaignStatus.RUNNING
            locked.status_reason = ""
            locked.save(update_fields=["status", "status_reason", "updated_at"])
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
        locked.save(update_fields=["status", "status_reason", "completed_at", "updated_at"])
        return campaign_pending_cancel(campaign_id=locked.pk)


# A campaign is done when none of its rows can still move on their own.
_COMPLETE_SQL = """
UPDATE campaigns_campaign AS c
   SET status = 'completed', completed_at = now(), updated_at = now(), status_reason = ''
 WHERE c.status = 'running'
   AND (%(campaign_id)s::bigint IS NULL OR c.id = %(campaign_id)s)
   AND NOT EXISTS (SELECT 1 FROM delivery_message m
                    WHERE m.campaign_id = c.id
                      AND m.status IN ('pending', 'sending', 'unknown'))
RETURNING c.id
"""


def campaigns_complete_finished(*, campaign_id: int | None = None) -> list[int]:
    """Mark running campaigns with nothing left open as completed; return their ids."""
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE_SQL, {"campaign_id": campaign_id})
        return [row[0] for row in cursor.fetchall()]


def _kick(campaign_id: int) -> None:
    from delivery.dispatch import campaign_kick

    campaign_kick(campaign_id=campaign_id)
