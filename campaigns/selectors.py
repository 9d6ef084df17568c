"""Reads for campaigns that span relations or aggregate."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from campaigns.models import Campaign
from delivery.models import OPEN_STATUSES, Message, MessageStatus

RATE_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class CampaignProgress:
    campaign_id: int
    name: str
    status: str
    total: int
    counts: dict[str, int]
    # Messages still to settle: pending, sending, or unknown (being reconciled).
    remaining: int
    sent_last_minute: int
    rate_per_second: float
    eta_seconds: float | None
    measured_at: datetime

    @property
    def eta(self) -> datetime | None:
        if self.eta_seconds is None:
            return None
        return self.measured_at + timedelta(seconds=self.eta_seconds)

    def as_dict(self) -> dict[str, Any]:
        eta = self.eta
        return {
            "campaign_id": self.campaign_id,
            "name": self.name,
            "status": self.status,
            "total": self.total,
            "counts": self.counts,
            "remaining": self.remaining,
            "sent_last_minute": self.sent_last_minute,
            "rate_per_second": self.rate_per_second,
            "eta_seconds": self.eta_seconds,
            "eta": eta.isoformat() if eta else None,
            "measured_at": self.measured_at.isoformat(),
        }


def campaign_progress(*, campaign: Campaign) -> CampaignProgress:
    """Message counts by status, send rate over the last minute and the time left at that rate.

    One aggregate query over the campaign's messages (the (campaign, status) index), with a
    filtered count per status. The rate counts messages Meta accepted (``sent_at``) in the
    last minute; the ETA is the open messages at that rate, ``None`` while nothing is moving.
    """
    now = timezone.now()
    aggregates: dict[str, Any] = {
        status: Count("id", filter=Q(status=status)) for status in MessageStatus.values
    }
    aggregates["sent_last_minute"] = Count("id", filter=Q(sent_at__gte=now - RATE_WINDOW))
    row = Message.objects.filter(campaign=campaign).aggregate(**aggregates)
    sent_last_minute = row.pop("sent_last_minute")
    counts = {status: int(row[status]) for status in MessageStatus.values}
    remaining = sum(counts[s] for s in OPEN_STATUSES)
    rate = sent_last_minute / RATE_WINDOW.total_seconds()
    return CampaignProgress(
        campaign_id=campaign.pk,
        name=campaign.name,
        status=campaign.status,
        total=sum(counts.values()),
        counts=counts,
        remaining=remaining,
        sent_last_minute=sent_last_minute,
        rate_per_second=round(rate, 2),
        eta_seconds=_eta_seconds(remaining=remaining, rate=rate),
        measured_at=now,
    )


def _eta_seconds(*, remaining: int, rate: float) -> float | None:
    if not remaining:
        return 0.0
    if not rate:
        return None  # nothing moved in the window: no honest estimate
    return round(remaining / rate, 1)
