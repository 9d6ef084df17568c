"""Send windows applied to a campaign's recipients: at launch, at claim time, in the ETA.

* Launch: each recipient's first ``next_attempt_at`` is ``now`` when its window is open,
  else the window's next opening. The zones are few (a few hundred at most) while the
  recipients are millions, so the openings are computed per zone in Python and the INSERT
  joins each row to its zone's opening (``launch_schedule``): set-based, no loop per row.
* Claim: the sender's ``delivery.engine.window_guard`` puts rows claimed outside their
  window back, due at its opening.
* ETA: recipients per zone and their open hours (``campaign_window_eta``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.db import connection, transaction
from django.db.models import Q, Sum

from campaigns.models import Campaign, CampaignStatus
from campaigns.windows.campaign import campaign_default_zone, campaign_window
from campaigns.windows.daily import WindowEta, window_eta
from campaigns.windows.zones import (
    ZoneSql,
    iana_zones,
    lookup_table_load,
    prefix_zones,
    zone_sql,
    zone_tables_load,
)
from delivery.campaigns.audience import AudienceError, campaign_audience
from delivery.campaigns.pools import campaign_pool

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper


# --- launch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchSchedule:
    """What the launch INSERT needs to give each row its first ``next_attempt_at``."""

    joins: str  # joins on the contact alias
    next_attempt_expr: str
    params: dict[str, Any]
    campaign: Campaign | None = None
    openings: dict[str, datetime] | None = None

    def load(self, cursor: CursorWrapper) -> None:
        """Create the lookup tables the joins read (inside the launch's transaction)."""
        if self.campaign is None or self.openings is None:
            return
        zone_tables_load(
            cursor,
            default_zone=campaign_default_zone(self.campaign),
            attribute=self.campaign.time_zone_attribute,
        )
        lookup_table_load(
            cursor,
            "wb_tz_open",
            list(self.openings),
            list(self.openings.values()),
            value_type="timestamptz",
        )


def launch_schedule(*, campaign: Campaign, now: datetime, alias: str = "c") -> LaunchSchedule:
    """``now`` for recipients inside their window, their zone's next opening for the rest.

    The openings are computed here per zone (a few hundred at most), and the INSERT joins
    each row to its zone's opening in ``wb_tz_open``.
    """
    window = campaign_window(campaign)
    if window is None:
        return LaunchSchedule("", "now()", {})
    default = campaign_default_zone(campaign)
    zones = _zone_sql(campaign, alias)
    candidates = prefix_zones(default)
    if campaign.time_zone_attribute:
        candidates |= set(iana_zones().values())
    openings = {zone: window.next_opening(ZoneInfo(zone), now) for zone in sorted(candidates)}
    return LaunchSchedule(
        joins=f"{zones.joins}\n  LEFT JOIN wb_tz_open AS tzo ON tzo.key = {zones.expr}",
        next_attempt_expr="coalesce(tzo.value, %(tz_now)s)",
        params={**zones.params, "tz_now": now},
        campaign=campaign,
        openings=openings,
    )


def _zone_sql(campaign: Campaign, alias: str, phone: str | None = None) -> ZoneSql:
    return zone_sql(
        phone=phone or f"{alias}.phone",
        attributes=f"{alias}.attributes",
        attribute=campaign.time_zone_attribute,
        default_zone=campaign_default_zone(campaign),
    )


# --- ETA ---------------------------------------------------------------------------------------

# Recipients still to send, per zone. The zone is computed from the row's own phone and,
# for the attribute override, its contact's attributes.
_PENDING_BY_ZONE_SQL = """
SELECT {zone} AS zone, count(*)
  FROM delivery_message AS m
  LEFT JOIN campaigns_contact AS c ON c.id = m.contact_id
  {joins}
 WHERE m.campaign_id = %(campaign_id)s AND m.send_status IN ('pending', 'sending', 'unknown')
 GROUP BY 1
"""

# Before launch: the audience the launch would make pending rows for.
_AUDIENCE_BY_ZONE_SQL = """
SELECT {zone} AS zone, count(*)
  FROM campaigns_contact AS c
  {joins}
 WHERE c.opted_out_at IS NULL
   AND {audience}
 GROUP BY 1
"""


def recipients_by_zone(*, campaign: Campaign) -> dict[str, int]:
    """Recipients still to send per zone: pending rows once launched, else the audience."""
    if campaign.started_at is not None:
        zones = _zone_sql(campaign, "c", phone='m."to"')
        sql = _PENDING_BY_ZONE_SQL.format(zone=zones.expr, joins=zones.joins)
        params: dict[str, Any] = {"campaign_id": campaign.pk}
    else:
        zones = _zone_sql(campaign, "c")
        try:
            audience = campaign_audience(campaign)
        except AudienceError:  # the pre-flight names the broken segment
            return {}
        sql = _AUDIENCE_BY_ZONE_SQL.format(
            zone=zones.expr, joins=zones.joins, audience=audience.condition
        )
        params = audience.params
    with transaction.atomic(), connection.cursor() as cursor:
        zone_tables_load(
            cursor,
            default_zone=campaign_default_zone(campaign),
            attribute=campaign.time_zone_attribute,
        )
        cursor.execute(sql, {**zones.params, **params})
        return {zone: int(n) for zone, n in cursor.fetchall()}


def campaign_share_rate(*, campaign: Campaign) -> float:
    """Messages a second this campaign may expect: on each number of its pool, its weight's
    part of the number's campaign share, shared with the other running campaigns there."""
    total = 0.0
    for number in campaign_pool(campaign):
        rate = min(number.effective_rate or number.rate_per_second, number.rate_per_second)
        share = rate * (1 - number.transactional_reserve)
        others = (
            Campaign.objects.filter(status=CampaignStatus.RUNNING)
            .filter(Q(phone_number=number) | Q(pool_numbers=number))
            .exclude(pk=campaign.pk)
            .distinct()
            .aggregate(weights=Sum("share_weight"))["weights"]
            or 0
        )
        total += share * campaign.share_weight / (campaign.share_weight + others)
    return total


def campaign_window_eta(*, campaign: Campaign, now: datetime) -> WindowEta:
    """When the campaign's remaining recipients will have been sent, windows included."""
    return window_eta(
        recipients_by_zone=recipients_by_zone(campaign=campaign),
        window=campaign_window(campaign),
        rate=campaign_share_rate(campaign=campaign),
        now=now,
    )
