"""Campaign state transitions that other apps trigger (webhooks, the engine, the admin)."""

from __future__ import annotations

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
    return (
        Campaign.objects.filter(scope, status__in=ACTIVE_STATUSES)
        .update(status=CampaignStatus.PAUSED, status_reason=reason[:500])
    )
