"""Send windows at claim time: nobody is messaged outside their window, whatever the path.

A row may come due outside its recipient's window: the campaign overran the window, a
retry or a reconciled resend fell at night, the campaign was resumed late. The guard looks
at each claimed row and puts those whose window is closed back as pending, due at its next
opening, without spending an attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

from django.db import connection

from campaigns.models import Campaign
from campaigns.windows.campaign import campaign_default_zone, campaign_window
from campaigns.windows.daily import SendWindow
from campaigns.windows.zones import recipient_zone
from delivery.messages import release_messages


class Claimed(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def to(self) -> str: ...
    @property
    def contact_id(self) -> int | None: ...


ClaimedT = TypeVar("ClaimedT", bound=Claimed)


class WindowGuard:
    """Keeps a windowed campaign's sends inside each recipient's window."""

    def __init__(self, campaign: Campaign, window: SendWindow) -> None:
        self.window = window
        self.attribute = campaign.time_zone_attribute
        self.default_zone = campaign_default_zone(campaign)
        self.held = 0

    @classmethod
    def for_campaign(cls, campaign: Campaign) -> WindowGuard | None:
        window = campaign_window(campaign)
        return cls(campaign, window) if window is not None else None

    def admit(self, rows: Sequence[ClaimedT], *, now: datetime) -> list[ClaimedT]:
        """The rows whose window is open at ``now``; the others go back until it opens."""
        if not rows:
            return []
        attributes = self._attribute_values([r.contact_id for r in rows if r.contact_id])
        openings: dict[str, datetime] = {}
        admitted: list[ClaimedT] = []
        held_ids: list[int] = []
        held_at: list[datetime] = []
        for row in rows:
            zone = recipient_zone(
                phone=row.to,
                attribute_value=attributes.get(row.contact_id),
                default_zone=self.default_zone,
            )
            if zone not in openings:
                openings[zone] = self.window.next_opening(ZoneInfo(zone), now)
            if openings[zone] <= now:
                admitted.append(row)
            else:
                held_ids.append(row.id)
                held_at.append(openings[zone])
        if held_ids:
            # Back untouched (no attempt spent), due at the opening.
            release_messages(ids=held_ids, at=held_at)
            self.held += len(held_ids)
        return admitted

    def _attribute_values(self, contact_ids: list[int]) -> dict[int | None, Any]:
        if not self.attribute or not contact_ids:
            return {}
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, attributes ->> %s FROM campaigns_contact WHERE id = ANY(%s)",
                [self.attribute, contact_ids],
            )
            return dict(cursor.fetchall())
