"""The quality guard: the whole run watched, not only its start (the canary judges that).

Meta lowers a number's messaging tier and quality when its users block it, report it or
stop its marketing. Over each running campaign's latest ``guard_window_sends`` sends, the
guard counts the recipients who opted out since the launch (a STOP reply, a
``user_preferences`` stop, a 131050) or whose send failed as undeliverable (131026, which
is how a block shows), and:

- past ``guard_slow_rate``: caps the campaign at ``guard_slow_per_second`` (the sender
  obeys ``guard_rate_cap``) with the reason on the campaign;
- past ``guard_pause_rate``, or when the number's quality rating falls to
  ``guard_pause_quality``: pauses it with the reason;
- back under the slow rate: lifts the cap.

It also counts the window's sends Meta answered ``held_for_quality_assessment`` (template
pacing) and names them in what it reports; they never slow or pause the campaign (see
``GuardWindow.held``). The marketer sees and edits every threshold on the campaign.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, QualityRating
from campaigns.state import campaigns_pause_for
from delivery.models import MessageStatus as S
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

BLOCK_LIKE_CODES = (131026, 131050)
_DUE_KEY = "wb:guard:due"
# Worse first: a pause quality of YELLOW also pauses on RED.
_QUALITY_ORDER: list[str] = [QualityRating.RED, QualityRating.YELLOW, QualityRating.GREEN]

# The latest sends of one campaign, and how many of them came back as an opt-out or a block.
# Opt-outs count when said after the launch (the row's created_at): an old opt-out was
# skipped at launch and never sent. Held sends: those Meta answered as held for quality
# assessment, read from the rows the window fetches anyway (no index involved).
_WINDOW_SQL = f"""
SELECT count(*),
       count(*) FILTER (WHERE c.opted_out_at >= r.created_at),
       count(*) FILTER (WHERE r.status = '{S.FAILED}' AND r.last_error_code = ANY(%(codes)s)
                          AND NOT coalesce(c.opted_out_at >= r.created_at, false)),
       count(*) FILTER (WHERE r.held_for_quality_assessment)
  FROM (SELECT m.contact_id, m.status, m.last_error_code, m.created_at,
               m.held_for_quality_assessment
          FROM delivery_message AS m
         WHERE m.campaign_id = %(campaign_id)s
           AND m.send_status IN ('{S.SENT}', '{S.FAILED}')
           AND (%(since)s::timestamptz IS NULL
                OR coalesce(m.sent_at, m.failed_at, m.created_at) >= %(since)s)
         ORDER BY m.id DESC
         LIMIT %(window)s) AS r
  LEFT JOIN campaigns_contact AS c ON c.id = r.contact_id
"""  # noqa: S608 - constants only


@dataclass(frozen=True)
class GuardWindow:
    sends: int
    opted_out: int
    blocked: int
    # Sends Meta answered ``held_for_quality_assessment``: a warning, never a reason to slow
    # or pause. Holding is Meta's own canary on the template (new, unpaused or not GREEN):
    # it releases the held messages when early feedback is good or unclear (its stated
    # goal: paced campaign messages delivered within an hour, 99th percentile), and drops
    # them with 132015 only when it pauses the template. That outcome already stops the
    # campaign (``webhooks.failures`` pauses the template and its campaigns on 132015), and
    # the opt-outs and blocks behind it are what ``rate`` measures. Pausing or capping on
    # held sends would only delay messages Meta is about to deliver; naming them tells the
    # marketer why "sent" may run ahead of "delivered" for a while.
    held: int = 0

    @property
    def rate(self) -> float:
        return (self.opted_out + self.blocked) / self.sends if self.sends else 0.0

    @property
    def held_share(self) -> float:
        return self.held / self.sends if self.sends else 0.0

    def describe(self) -> str:
        return (
            f"{self.rate:.1%} of the latest {self.sends} sends opted out or were blocked "
            f"({self.opted_out} opt-outs, {self.blocked} undeliverable)" + self.held_note()
        )

    def held_note(self) -> str:
        """The note on held sends ("; N of them held …"), or "" when Meta held none."""
        if not self.held:
            return ""
        return (
            f"; {self.held} of them ({self.held_share:.1%}) held by Meta for quality "
            "assessment (template pacing: delivered later, or dropped with 132015)"
        )


def guard_window(*, campaign: Campaign) -> GuardWindow:
    with connection.cursor() as cursor:
        cursor.execute(
            _WINDOW_SQL,
            {
                "campaign_id": campaign.pk,
                "window": campaign.guard_window_sends,
                "since": campaign.guard_since,
                "codes": list(BLOCK_LIKE_CODES),
            },
        )
        sends, opted, blocked, held = cursor.fetchone()
    return GuardWindow(int(sends), int(opted), int(blocked), int(held))


def _quality_too_low(rating: str, pause_at: str) -> bool:
    if not pause_at or rating not in _QUALITY_ORDER or pause_at not in _QUALITY_ORDER:
        return False
    return _QUALITY_ORDER.index(rating) <= _QUALITY_ORDER.index(pause_at)


def campaign_guard(*, campaign: Campaign) -> str:
    """Judge one running campaign; returns what was done: "", "slowed", "eased", "paused"."""
    number = campaign.phone_number
    if _quality_too_low(number.quality_rating, campaign.guard_pause_quality):
        reason = (
            f"Quality guard: number {number.display_phone_number} quality is "
            f"{number.quality_rating} (pause at {campaign.guard_pause_quality})"
        )
        return _pause(campaign, reason)
    window = guard_window(campaign=campaign)
    if window.sends < campaign.guard_min_sample:
        return ""
    if window.rate >= campaign.guard_pause_rate:
        reason = f"Quality guard: {window.describe()}; pauses at {campaign.guard_pause_rate:.1%}"
        return _pause(campaign, reason)
    if window.rate >= campaign.guard_slow_rate:
        if campaign.guard_rate_cap is not None:
            return ""
        cap = float(campaign.guard_slow_per_second)
        reason = (
            f"Quality guard slowed to {cap:g}/s: {window.describe()}; "
            f"slows at {campaign.guard_slow_rate:.1%}, pauses at {campaign.guard_pause_rate:.1%}"
        )
        Campaign.objects.filter(pk=campaign.pk).update(
            guard_rate_cap=cap, guard_reason=reason[:500]
        )
        logger.warning("campaign %s: %s", campaign.pk, reason)
        return "slowed"
    if campaign.guard_rate_cap is not None:
        reason = f"Quality guard eased: {window.describe()}"
        Campaign.objects.filter(pk=campaign.pk).update(guard_rate_cap=None, guard_reason=reason)
        return "eased"
    return ""


def _pause(campaign: Campaign, reason: str) -> str:
    paused = campaigns_pause_for(campaign_ids=[campaign.pk], reason=reason)
    Campaign.objects.filter(pk=campaign.pk).update(guard_reason=reason[:500])
    if paused:
        logger.warning("campaign %s paused: %s", campaign.pk, reason)
    return "paused" if paused else ""


GUARD_SETTINGS = (
    "guard_enabled",
    "guard_window_sends",
    "guard_min_sample",
    "guard_slow_rate",
    "guard_pause_rate",
    "guard_slow_per_second",
    "guard_pause_quality",
)


def guard_settings_update(*, campaign: Campaign, values: dict[str, object]) -> Campaign:
    """New thresholds: the cap is lifted and the guard judges afresh from now."""
    unknown = set(values) - set(GUARD_SETTINGS)
    if unknown:
        raise ValueError(f"not guard settings: {sorted(unknown)}")
    for name, value in values.items():
        setattr(campaign, name, value)
    campaign.full_clean(exclude=[f.name for f in Campaign._meta.fields if f.name not in values])
    if float(campaign.guard_slow_rate) > float(campaign.guard_pause_rate):
        raise ValueError("the slow rate must not be above the pause rate")
    campaign.guard_rate_cap = None
    campaign.guard_reason = ""
    campaign.guard_since = timezone.now()
    campaign.save(
        update_fields=[*values, "guard_rate_cap", "guard_reason", "guard_since", "updated_at"]
    )
    return campaign


def guard_summary(*, campaign: Campaign) -> dict[str, object]:
    """The thresholds, the guard's latest word, and its warning about held sends (what
    Meta holds of the window it watches, read now: one small indexed query), for the
    campaign page."""
    if not campaign.guard_enabled:
        return {"enabled": False, "text": "Quality guard off.", "reason": ""}
    quality = (
        f"; pauses when the number's quality is {campaign.guard_pause_quality}"
        if campaign.guard_pause_quality
        else ""
    )
    text = (
        f"Quality guard: over the latest {campaign.guard_window_sends} sends (from "
        f"{campaign.guard_min_sample}), opt-outs and blocks: slows at "
        f"{campaign.guard_slow_rate:.1%} to {campaign.guard_slow_per_second:g}/s, pauses at "
        f"{campaign.guard_pause_rate:.1%}{quality}."
    )
    window = guard_window(campaign=campaign)
    return {
        "enabled": True,
        "text": text,
        "reason": campaign.guard_reason,
        "rate_cap": campaign.guard_rate_cap,
        "held": window.held,
        "held_warning": guard_held_warning(window),
    }


def guard_held_warning(window: GuardWindow) -> str:
    """The guard's warning-level word on held sends ("" when none): named, never acted on."""
    if not window.held:
        return ""
    return (
        f"Warning: Meta held {window.held} of the latest {window.sends} sends "
        f"({window.held_share:.1%}) for quality assessment. Meta is pacing the template; "
        "the guard does not slow or pause for this, as Meta delivers held messages later, "
        "and a template Meta pauses (132015) pauses the campaign by itself."
    )


def guards_run() -> dict[str, list[int]]:
    """Judge every running campaign whose guard is on; campaign ids by what was done.

    At most once per ``GUARD_INTERVAL_SECONDS`` whatever the number of tickers (each
    judgement reads the latest sends of every running campaign).
    """
    done: dict[str, list[int]] = {"slowed": [], "eased": [], "paused": []}
    interval = float(settings.GUARD_INTERVAL_SECONDS)
    if interval > 0:
        try:
            if not get_redis().set(_DUE_KEY, 1, nx=True, px=int(interval * 1000)):
                return done
        except redis.RedisError:
            pass  # judge anyway: the guard must not stop for a missing Redis
    running = Campaign.objects.filter(
        status=CampaignStatus.RUNNING, guard_enabled=True
    ).select_related("phone_number")
    for campaign in running:
        action = campaign_guard(campaign=campaign)
        if action:
            done[action].append(int(campaign.pk))
    return done
