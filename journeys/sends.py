"""A send step as it fires: every check made then, not when the journey was built.

A journey's step may fire days after it was written, so what holds at that moment
decides, in this order (the first that applies wins):

1. the contact opted out: the step is skipped and the person leaves the journey;
2. the step is late past the journey's lateness limit (the sweep was down, the journey
   paused): skipped, saying by how much;
3. the instance is held out: skipped (the journey's lift is measured against it);
4. the person's 24-hour window is open and the step has a free-form message for that
   case: that text (with its reply buttons) goes instead of the template;
5. the template as it is now: paused or not yet approved by Meta, the step waits (checked
   hourly, said once) until the lateness limit from when it first came due; rejected,
   disabled or deleted, it is skipped;
6. a marketing template (its latest category: one re-categorised since is capped and
   routed as marketing): not to US numbers; not to a person Meta's per-user limit
   (131049) holds, the step moving to when the hold ends;
7. a user-id-only contact for a template Meta will not send to user ids: skipped;
8. the send window, in the person's zone: outside it the step moves to the opening;
9. the mapping: a contact without a mapped field (and no fallback) is skipped.

What passes becomes a message of the step's campaign, due now: from there the engine's
guarantees hold (rate, reserve, the frequency cap at the claim, retries, no double send:
one message per instance and step is a database constraint).
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from campaigns.audience.regions import us_area_prefixes
from campaigns.catalogue.params import (
    ParamMappingError,
    mapping_with_properties,
    params_render,
    required_fields,
    required_properties,
)
from campaigns.models import Contact, Template, TemplateCategory, TemplateStatus
from delivery.campaigns.skips import US_NUMBER, US_USER_ID, user_id_refusal
from delivery.engine.transactional import REPLY_BUTTONS
from delivery.messages import JourneyMessage
from delivery.models import MessageKind
from journeys.definition import SendStep
from journeys.models import ExitKind, HistoryKind
from journeys.running import RunningJourney
from journeys.timing import duration_text, local_text, window_opening
from journeys.work import Instance, Work

# Meta's states in which a template may come back: the step waits for it.
TEMPLATE_WAITING = frozenset(
    {
        TemplateStatus.PAUSED,
        TemplateStatus.PENDING,
        TemplateStatus.IN_APPEAL,
        TemplateStatus.LIMIT_EXCEEDED,
    }
)
TEMPLATE_RECHECK = timedelta(hours=1)
HOLDOUT = "holdout: not sent, to measure the journey's lift"


class Fired(enum.Enum):
    MOVED = "moved"  # done with the step (sent or skipped): on to the next
    PARKED = "parked"  # waits at the step until its new due time
    LEFT = "left"  # the instance left the journey


@dataclass
class SendFacts:
    """What a round's send steps read, once for the round."""

    contacts: dict[int, Contact]
    holds: dict[int, datetime]
    windows_open: set[int]
    zones: dict[int, str]
    templates: dict[tuple[int, str], Template | None] = field(default_factory=dict)
    # Messages the round's instances already have, by (instance, step): a step reached
    # again under a new version does not send again.
    already: dict[tuple[int, str], int] = field(default_factory=dict)


def send_fire(
    *,
    step: SendStep,
    instance: Instance,
    journey: RunningJourney,
    facts: SendFacts,
    work: Work,
) -> Fired:
    now = work.now
    definition = journey.definition
    contact = facts.contacts.get(instance.contact_id)
    if contact is None:
        work.exit(instance, ExitKind.ERROR, "the contact is gone")
        return Fired.LEFT
    if contact.opted_out_at is not None:
        work.log(instance, HistoryKind.SKIPPED, "opted out: not sent")
        work.exit(instance, ExitKind.OPTED_OUT, "opted out", skip_unsent=True)
        return Fired.LEFT
    earlier = facts.already.get((instance.id or 0, step.id))
    if earlier is not None:
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"already sent at this step (message {earlier}), before a new version: not again",
            message_id=earlier,
        )
        return Fired.MOVED
    due = instance.due_at or now
    late = (now - due).total_seconds()
    if late > definition.lateness_s:
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"late: due {due:%Y-%m-%d %H:%M} UTC, reached {duration_text(late)} after, past "
            f"the journey's limit of {duration_text(definition.lateness_s)}: not sent",
        )
        return Fired.MOVED
    if instance.holdout:
        work.log(instance, HistoryKind.SKIPPED, HOLDOUT)
        return Fired.MOVED
    if step.window_text and instance.contact_id in facts.windows_open:
        return _freeform(step, instance, journey, contact, work)
    template = facts.templates.get((journey.id, step.id))
    if template is None or template.removed_upstream_at is not None:
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"template {step.template} is not on the account any more: not sent",
        )
        return Fired.MOVED
    if template.status in TEMPLATE_WAITING:
        return _template_wait(instance, template, definition.lateness_s, work)
    if template.status != TemplateStatus.APPROVED:
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"template {template} is {template.status.lower()}: not sent",
        )
        return Fired.MOVED
    if template.category == TemplateCategory.MARKETING:
        us = _us_reason(contact)
        if us:
            work.log(instance, HistoryKind.SKIPPED, us)
            return Fired.MOVED
        held_until = facts.holds.get(instance.contact_id)
        if held_until is not None and held_until > now:
            return _defer(
                instance,
                held_until,
                "Meta's per-user marketing limit (131049): no marketing to this person before "
                f"{held_until:%Y-%m-%d %H:%M} UTC",
                work,
            )
    if contact.phone is None and user_id_refusal(template):
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"user id only: Meta does not send {user_id_refusal(template)} to user ids",
        )
        return Fired.MOVED
    zone = facts.zones.get(instance.contact_id, "UTC")
    opening = window_opening(definition.window, zone, now)
    if opening > now:
        return _defer(
            instance,
            opening,
            f"outside the send window {definition.window} in {zone}: goes at "
            f"{local_text(opening, zone)}",
            work,
        )
    missing = _missing(step, contact, instance)
    if missing:
        work.log(instance, HistoryKind.SKIPPED, f"{missing}, which the mapping needs: not sent")
        return Fired.MOVED
    try:
        params = params_render(
            template, mapping_with_properties(step.mapping, instance.properties), contact
        )
    except (ParamMappingError, KeyError, ValueError) as exc:
        work.log(instance, HistoryKind.SKIPPED, f"the mapping cannot be filled: {exc}")
        return Fired.MOVED
    work.send(
        instance,
        JourneyMessage(
            kind=MessageKind.CAMPAIGN,
            campaign_id=journey.step_campaigns[step.id],
            contact_id=contact.pk,
            phone_number_id=journey.journey.phone_number_id,
            template_id=template.pk,
            to=contact.recipient,
            params=params,
            text="",
            journey_instance_id=instance.id or 0,
            journey_step=step.id,
            due_at=timezone.now(),
        ),
    )
    work.log(
        instance,
        HistoryKind.SENT,
        f"template {template} queued",
        send_step=step.id,
    )
    instance.resumed.pop("deferred", None)
    return Fired.MOVED


def _missing(step: SendStep, contact: Contact, instance: Instance) -> str:
    """What the mapping reads without a fallback that this person or event lacks ('')."""
    for name in required_fields(step.mapping):
        if not str(contact.field_value(name) or "").strip():
            return f"the contact has no {name}"
    for name in required_properties(step.mapping):
        if not str(instance.properties.get(name) or "").strip():
            return f"the event gave no {name}"
    return ""


def _freeform(
    step: SendStep, instance: Instance, journey: RunningJourney, contact: Contact, work: Work
) -> Fired:
    """Inside the 24-hour window: the step's own text (and buttons), a service message."""
    params = {REPLY_BUTTONS: [list(b) for b in step.window_buttons]} if step.window_buttons else {}
    work.send(
        instance,
        JourneyMessage(
            kind=MessageKind.TRANSACTIONAL,
            campaign_id=None,
            contact_id=contact.pk,
            phone_number_id=journey.journey.phone_number_id,
            template_id=None,
            to=contact.recipient,
            params=params,
            text=step.window_text,
            journey_instance_id=instance.id or 0,
            journey_step=step.id,
            due_at=timezone.now(),
        ),
    )
    what = "buttons" if step.window_buttons else "text"
    work.log(
        instance,
        HistoryKind.SENT,
        f"the 24-hour window is open: free-form {what} instead of the template",
        send_step=step.id,
    )
    return Fired.MOVED


def _template_wait(instance: Instance, template: Template, lateness_s: int, work: Work) -> Fired:
    now = work.now
    since = instance.step_due_at or instance.due_at or now
    if (now - since).total_seconds() > lateness_s:
        work.log(
            instance,
            HistoryKind.SKIPPED,
            f"template {template} stayed {template.status.lower()} past the journey's "
            f"lateness limit ({duration_text(lateness_s)}): not sent",
        )
        return Fired.MOVED
    reason = f"template {template} is {template.status.lower()} at Meta: waiting (checked hourly)"
    return _defer(instance, now + TEMPLATE_RECHECK, reason, work)


def _defer(instance: Instance, until: datetime, reason: str, work: Work) -> Fired:
    """The step waits until ``until``; the reason is written once, not at every recheck."""
    if instance.resumed.get("deferred") != reason:
        work.log(instance, HistoryKind.DEFERRED, reason)
        instance.resumed["deferred"] = reason
    instance.due_at = until
    work.touch(instance)
    return Fired.PARKED


def _us_reason(contact: Contact) -> str:
    """Meta delivers no marketing template to US numbers (+1 and a US area code) or user
    ids issued for them; Canada and the Caribbean share +1 and are sent."""
    if contact.phone:
        return US_NUMBER if contact.phone[:5] in _us_prefixes() else ""
    return US_USER_ID if (contact.user_id or "").startswith("US.") else ""


@functools.cache
def _us_prefixes() -> frozenset[str]:
    return frozenset(us_area_prefixes())
