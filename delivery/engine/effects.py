"""What a batch of send results means beyond its own rows: the number, the campaign.

``delivery.engine.settle`` decides each row and gathers the wider consequences in
``Effects``; the sender records the rows, then applies these: rows to give back untouched,
a throttled number paused and slowed (or, after a quiet batch, sped up again), a broken
campaign paused with the reason.
"""

from __future__ import annotations

import logging

from campaigns.models import Campaign
from campaigns.state import campaign_pause
from delivery.engine import adaptive
from delivery.engine.ratelimit import TokenBucket
from delivery.engine.settle import Effects
from delivery.messages import release_messages

logger = logging.getLogger(__name__)


def batch_effects_apply(
    *, effects: Effects, bucket: TokenBucket, campaign: Campaign | None, sent: int
) -> bool:
    """Apply a recorded batch's effects; ``True`` when the campaign turned out broken."""
    if effects.released_ids:
        release_messages(ids=effects.released_ids)
    if effects.throttled:
        pause_s = adaptive.rate_throttled(bucket=bucket)
        logger.warning(
            "number %s throttled (130429 x%s): paused %.1fs",
            bucket.phone_number_id,
            effects.throttled,
            pause_s,
        )
    elif sent:
        adaptive.rate_recovered(bucket=bucket)
    if effects.campaign_broken_reason and campaign is not None:
        campaign_pause(campaign=campaign, reason=effects.campaign_broken_reason)
        logger.error("campaign %s paused: %s", campaign.pk, effects.campaign_broken_reason)
        return True
    return False
