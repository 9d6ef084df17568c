"""What a batch of send results means beyond its own rows: the number, the campaign.

``delivery.engine.settle`` decides each row and gathers the wider consequences in
``Effects``; the sender records the rows, then applies these: a throttled number paused and
slowed (or, after a quiet batch, sped up again), a broken campaign paused with the reason,
rows to give back untouched.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from campaigns.models import Campaign
from campaigns.state import campaign_pause
from delivery.engine import adaptive
from delivery.engine.ratelimit import TokenBucket
from delivery.engine.settle import Effects
from delivery.marketing_holds import marketing_holds_record
from delivery.messages import release_messages

logger = logging.getLogger(__name__)


def number_effects_apply(
    *, bucket: TokenBucket, throttled: int, sent: int, spam_limited: int = 0
) -> None:
    """130429s in a batch pause the number and lower its rate; a clean batch raises it.

    A 131048 (spam rate limit) halves the rate, pauses a minute and holds the rate down.
    """
    if spam_limited:
        pause_s = adaptive.rate_spam_limited(bucket=bucket)
        logger.warning(
            "number %s spam-limited (131048 x%s): rate halved, paused %.0fs",
            bucket.phone_number_id,
            spam_limited,
            pause_s,
        )
    elif throttled:
        pause_s = adaptive.rate_throttled(bucket=bucket)
        logger.warning(
            "number %s throttled (130429 x%s): paused %.1fs",
            bucket.phone_number_id,
            throttled,
            pause_s,
        )
    elif sent:
        adaptive.rate_recovered(bucket=bucket)


def campaign_effects_apply(*, effects: Effects, campaign: Campaign | None) -> bool:
    """Give back released rows; hold people Meta's per-user marketing limit refused
    (delivery.marketing_holds); pause a broken campaign. ``True`` when it was broken."""
    if effects.released_ids:
        release_messages(ids=effects.released_ids)
    if effects.marketing_limited:
        now = timezone.now()
        marketing_holds_record([(c, now, m) for c, m in effects.marketing_limited])
    if effects.campaign_broken_reason and campaign is not None:
        campaign_pause(campaign=campaign, reason=effects.campaign_broken_reason)
        logger.error("campaign %s paused: %s", campaign.pk, effects.campaign_broken_reason)
        return True
    return False
