"""The campaign behind each send step: how a journey's sends reach the engine.

A send step's messages are rows of a campaign of its own (``Campaign.kind`` journey_step),
running while the journey is live, so the senders serve them as any campaign: the number's
rate and its campaign share, the transactional reserve, the frequency cap at the claim,
the send window, the Marketing Messages API by the template's latest category, retries,
reconciliation, dead letters, the report. The campaign carries the step's template (the
one its new messages use), mapping (so a tracked link is tokenised), window, zones and
cap; it is kept across versions while the step exists, cancelled (its unsent rows with
it) when a version removes the step or the journey is archived. It never completes on its
own (delivery.engine.completion leaves journey steps alone).
"""

from __future__ import annotations

from django.db import transaction

from campaigns.models import Campaign, CampaignKind, CampaignStatus, Template, TemplateStatus
from delivery.campaigns.lifecycle import campaign_cancel
from journeys.definition import Definition, SendStep
from journeys.models import Journey, JourneyStatus, JourneyStepCampaign

STEP_REMOVED = "journey step removed"


def step_template(journey: Journey, step: SendStep) -> Template | None:
    """The template a send step names on the journey's account: its language's, else the
    only version of the name, else the approved one first."""
    candidates = Template.objects.filter(
        account_id=journey.phone_number.account_id, name=step.template
    )
    if step.language:
        return candidates.filter(language=step.language).first()
    found = list(candidates.order_by("language"))
    if len(found) <= 1:
        return found[0] if found else None
    approved = [t for t in found if t.status == TemplateStatus.APPROVED]
    return (approved or found)[0]


def _campaign_status(journey: Journey) -> str:
    return CampaignStatus.RUNNING if journey.status == JourneyStatus.LIVE else CampaignStatus.PAUSED


def step_campaigns_sync(journey: Journey, definition: Definition) -> dict[str, int]:
    """Make each send step's campaign match the definition and the journey's status;
    cancel the campaigns of steps the definition no longer has. The step → campaign map."""
    wanted = {step.id: step for step in definition.send_steps()}
    with transaction.atomic():
        existing = {
            link.step: link
            for link in JourneyStepCampaign.objects.select_related("campaign").filter(
                journey=journey
            )
        }
        result: dict[str, int] = {}
        for step_id, step in wanted.items():
            template = step_template(journey, step)
            if template is None:
                raise ValueError(f"step {step_id}: no template {step.template!r} on the account")
            link = existing.get(step_id)
            fields = _campaign_fields(journey, definition, step, template)
            if link is None:
                campaign = Campaign.objects.create(**fields)
                JourneyStepCampaign.objects.create(journey=journey, step=step_id, campaign=campaign)
            else:
                campaign = link.campaign
                for name, value in fields.items():
                    setattr(campaign, name, value)
                if campaign.status == CampaignStatus.CANCELLED:
                    campaign.status = CampaignStatus.PAUSED  # a step brought back
                campaign.save()
            result[step_id] = int(campaign.pk)
        for step_id, link in existing.items():
            if step_id not in wanted and link.campaign.status != CampaignStatus.CANCELLED:
                campaign_cancel(campaign=link.campaign, reason=STEP_REMOVED)
    return result


def step_campaigns_status(journey: Journey) -> int:
    """Put the journey's step campaigns in the status its own says (live: running; paused,
    draft: paused; archived: cancelled, with their unsent rows). How many changed."""
    links = JourneyStepCampaign.objects.select_related("campaign").filter(journey=journey)
    changed = 0
    for link in links:
        campaign = link.campaign
        if campaign.status == CampaignStatus.CANCELLED:
            continue
        if journey.status == JourneyStatus.ARCHIVED:
            campaign_cancel(campaign=campaign, reason="journey archived")
            changed += 1
            continue
        status = _campaign_status(journey)
        if campaign.status != status:
            Campaign.objects.filter(pk=campaign.pk).update(
                status=status,
                status_reason="" if status == CampaignStatus.RUNNING else "journey paused",
                started_at=campaign.started_at or journey.live_since,
            )
            changed += 1
    return changed


def _campaign_fields(
    journey: Journey, definition: Definition, step: SendStep, template: Template
) -> dict[str, object]:
    window = definition.window
    return {
        "name": f"{journey.name} · {step.id}"[:200],
        "kind": CampaignKind.JOURNEY_STEP,
        "phone_number": journey.phone_number,
        "template": template,
        "param_mapping": step.mapping,
        "status": _campaign_status(journey),
        "started_at": journey.live_since,
        "window_start": window.start if window else None,
        "window_end": window.end if window else None,
        "time_zone": definition.time_zone,
        "time_zone_attribute": definition.time_zone_field,
        "frequency_cap": definition.frequency_cap,
        "frequency_cap_defer": definition.frequency_cap_defer,
        "link_destination": step.link,
        "attribution_days": definition.goal_days,
    }
