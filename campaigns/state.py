"""A campaign's own status, changed without touching its messages.

Pausing is only a status change: every sender looks at the status before each batch and
stops claiming; rows already claimed finish or are released by their sender. Webhooks
(a paused template, a restricted account), the engine (a broken campaign) and people call
these. Transitions that also move messages (resume, cancel, complete) are
``delivery.campaigns.lifecycle``.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Q

from campaigns.models import BusinessAccount, Campaign, CampaignStatus, Template

# Campaigns that are (or are about to be) sending: the ones a broken template or a
# restricted account must stop.
ACTIVE_STATUSES = (CampaignStatus.SCHEDULED, CampaignStatus.RUNNING)


def campaigns_pause_for(
    *,
    reason: str,
    template: Template | None = None,
    account: BusinessAccount | None = None,
    campaign_ids: Sequence[int] | None = None,
) -> int:
    """Pause every active campaign using ``template``, sending from ``account``, or listed.

    Returns how many campaigns were paused. The engine stops claiming for a paused
    campaign at its next batch; rows already claimed finish or are released.
    """
    if template is None and account is None and not campaign_ids:
        raise ValueError("campaigns_pause_for needs a template, an account or campaigns")
    scope = Q()
    if template is not None:
        scope |= Q(template=template)
    if account is not None:
        scope |= Q(phone_number__account=account)
    if campaign_ids:
        scope |= Q(pk__in=list(campaign_ids))
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
