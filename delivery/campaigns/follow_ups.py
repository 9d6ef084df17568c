"""Follow-ups in one step: a draft to the people a campaign reached in a given way.

"Follow up with those who got it but did not read it" is a segment over the campaign's
outcome (``delivery.segments``) and a draft campaign addressed to it, from the same number,
with the same template and mapping to start from (the marketer usually picks another),
the same send window, cap and exclusions (the staff list stays out of the follow-up too).
The segment is saved under a name that says what it is, so it can be read, counted and
reused; it is read when the draft launches, so a reply that comes in meanwhile counts.

Besides the fixed choices (``FOLLOW_UPS``), a campaign whose template has quick-reply
buttons offers one "tapped <button>" choice per button (``campaign_follow_ups``), keyed
``tapped:<button text>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.guard import GUARD_SETTINGS
from delivery.segments.services import segment_match, segment_save

TAPPED_PREFIX = "tapped:"


@dataclass(frozen=True)
class FollowUp:
    key: str
    label: str  # "delivered but not read": reads after "Follow up with those who …"
    button: str = ""  # a "tapped:" follow-up: the quick reply's text

    def rules(self, campaign_id: int) -> dict[str, Any]:
        outcome: dict[str, Any] = {"campaign": campaign_id}
        if self.button:
            return {**outcome, "outcome": "tapped", "button": self.button}
        if self.key == "read_no_reply":
            return {
                "all": [
                    {**outcome, "outcome": "read"},
                    {"not": {**outcome, "outcome": "replied"}},
                ]
            }
        return {**outcome, "outcome": self.key}


FOLLOW_UPS = (
    FollowUp("delivered_not_read", "delivered but not read"),
    FollowUp("delivered_not_clicked", "delivered but did not click"),
    FollowUp("read_no_reply", "read but did not reply"),
    FollowUp("replied", "replied"),
    FollowUp("failed", "failed"),
)
FOLLOW_UPS_BY_KEY = {f.key: f for f in FOLLOW_UPS}

# The campaign's settings a follow-up starts from (its audience is the segment; its lists,
# status and run are its own).
_COPIED = (
    "phone_number_id",
    "template_id",
    "param_mapping",
    "share_weight",
    "max_attempts",
    "ambiguous_policy",
    "window_start",
    "window_end",
    "time_zone",
    "time_zone_attribute",
    "frequency_cap",
    "frequency_cap_defer",
    "languages",
    "language_field",
    "language_fallback",
    # A tracked link in the mapping keeps working, and conversions count over the same
    # window. An A/B test and a holdout are the original's experiment, not copied.
    "link_destination",
    "link_utm",
    "attribution_days",
    *GUARD_SETTINGS,
)


class FollowUpError(ValueError):
    """The follow-up cannot be made; the message says why."""


def tapped_follow_up(button: str) -> FollowUp:
    """Follow up with those who tapped the quick reply ``button`` (its text)."""
    text = button.strip()
    return FollowUp(f"{TAPPED_PREFIX}{text}", f"tapped “{text}”", text)


def campaign_buttons(campaign: Campaign) -> list[str]:
    """The quick-reply texts of the campaign's templates (its own and its A/B arms'), in
    the template's order, each once (case-insensitively, as the segment compares them)."""
    templates = [campaign.template, *(v.template for v in campaign.variants.all())]
    seen: dict[str, str] = {}
    for template in templates:
        for button in template.buttons or []:
            if not isinstance(button, dict):
                continue
            text = str(button.get("text") or "").strip()
            if str(button.get("type", "")).upper() == "QUICK_REPLY" and text:
                seen.setdefault(text.casefold(), text)
    return list(seen.values())


def campaign_follow_ups(campaign: Campaign) -> tuple[FollowUp, ...]:
    """Every follow-up the campaign offers: the fixed ones, then one per quick reply."""
    return (*FOLLOW_UPS, *(tapped_follow_up(b) for b in campaign_buttons(campaign)))


def follow_up_counts(*, campaign: Campaign) -> dict[str, int]:
    """How many contacts each follow-up would address now (``campaign_follow_ups``)."""
    return {f.key: segment_match(f.rules(campaign.pk)).count for f in campaign_follow_ups(campaign)}


def _follow_up_for(campaign: Campaign, key: str) -> FollowUp:
    follow_up = FOLLOW_UPS_BY_KEY.get(key)
    if follow_up is not None:
        return follow_up
    if key.startswith(TAPPED_PREFIX) and key[len(TAPPED_PREFIX) :].strip():
        # Any button text is accepted, not only the template's: a tap's text is what the
        # user saw, and an interactive reply's may be none of the template's.
        return tapped_follow_up(key[len(TAPPED_PREFIX) :])
    known = ", ".join([*FOLLOW_UPS_BY_KEY, f"{TAPPED_PREFIX}<button>"])
    raise FollowUpError(f"no follow-up {key!r}: choose one of {known}")


def campaign_follow_up(*, campaign: Campaign, key: str) -> Campaign:
    """A draft addressed to the contacts of ``campaign`` whose outcome is ``key`` (a key of
    ``FOLLOW_UPS``, or ``tapped:<button text>``)."""
    follow_up = _follow_up_for(campaign, key)
    if campaign.status == CampaignStatus.DRAFT or campaign.started_at is None:
        raise FollowUpError("the campaign has not been sent: there is nobody to follow up yet")
    with transaction.atomic():
        segment = segment_save(
            name=f"#{campaign.pk} {campaign.name}: {follow_up.label}"[:200],
            rules=follow_up.rules(campaign.pk),
            description=f"Contacts of campaign #{campaign.pk} ({campaign.name}) who "
            f"{follow_up.label}.",
        )
        draft = Campaign.objects.create(
            name=f"{campaign.name}: follow-up, {follow_up.label}"[:200],
            status=CampaignStatus.DRAFT,
            follow_up_of=campaign,
            **{name: getattr(campaign, name) for name in _COPIED},
        )
        draft.segments.set([segment])
        draft.exclude_lists.set(campaign.exclude_lists.all())
        draft.exclude_segments.set(campaign.exclude_segments.all())
        draft.pool_numbers.set(campaign.pool_numbers.all())
    return draft
