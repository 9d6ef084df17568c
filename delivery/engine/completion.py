"""A running campaign completes when none of its rows can still move on their own.

Asked at the end of every sender chain and by every maintenance tick; the statement is its
own guard, so any number of askers complete a campaign once. A journey's send step is a
campaign that runs while its journey is live, however long it has nothing to send: it is
never completed here (journeys.step_campaigns ends it).
"""

from __future__ import annotations

from django.db import connection

from campaigns.models import CampaignKind, CampaignStatus
from delivery.models import OPEN_STATUSES

# A campaign is done when none of its rows can still move on their own.
_COMPLETE_SQL = f"""
UPDATE campaigns_campaign AS c
   SET status = '{CampaignStatus.COMPLETED}', completed_at = now(), updated_at = now(),
       first_completed_at = coalesce(c.first_completed_at, now()),
       status_reason = ''
 WHERE c.status = '{CampaignStatus.RUNNING}'
   AND c.kind <> '{CampaignKind.JOURNEY_STEP}'
   AND (%(campaign_id)s::bigint IS NULL OR c.id = %(campaign_id)s)
   AND NOT EXISTS (SELECT 1 FROM delivery_message m
                    WHERE m.campaign_id = c.id
                      AND m.send_status IN ({", ".join(f"'{s}'" for s in OPEN_STATUSES)}))
RETURNING c.id
"""  # noqa: S608 - built from constants


def campaigns_complete_finished(*, campaign_id: int | None = None) -> list[int]:
    """Mark running campaigns with nothing left open as completed; return their ids."""
    with connection.cursor() as cursor:
        cursor.execute(_COMPLETE_SQL, {"campaign_id": campaign_id})
        return [row[0] for row in cursor.fetchall()]
