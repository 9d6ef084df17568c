"""A campaign's send window and default zone, read from its fields."""

from __future__ import annotations

from campaigns.models import Campaign
from campaigns.windows.daily import SendWindow
from campaigns.windows.zones import DEFAULT_ZONE, zone_valid


def campaign_window(campaign: Campaign) -> SendWindow | None:
    if campaign.window_start is None or campaign.window_end is None:
        return None
    return SendWindow(campaign.window_start, campaign.window_end)


def campaign_default_zone(campaign: Campaign) -> str:
    return zone_valid(campaign.time_zone) or DEFAULT_ZONE
