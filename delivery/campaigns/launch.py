"""Launching a campaign: validate, then turn its audience into Message rows in one statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from campaigns.catalogue.params import (
    CONTACT_COLUMNS,
    mapping_has_click,
    mapping_validate,
    required_fields,
)
from campaigns.catalogue.sendable import template_unusable_reasons
from campaigns.models import (
    AbState,
    Campaign,
    CampaignStatus,
    CanaryState,
    TemplateStatus,
)
from delivery.campaigns.ab_launch import (
    arm_plan,
    campaign_variants,
    named_params_sql,
    variants_errors,
)
from delivery.campaigns.audience import Audience, AudienceError, campaign_audience
from delivery.campaigns.canary import CanaryHold, canary_hold
from delivery.campaigns.format_checks import ERROR as FORMAT_ERROR
from delivery.campaigns.format_checks import format_findings
from delivery.campaigns.languages import LanguageError
from delivery.campaigns.pools import campaign_pool, pool_homes_assign, pool_validate
from delivery.campaigns.schedule import launch_schedule
from delivery.campaigns.skips import SkipRules
from delivery.campaigns.tracked_links import tracked_link_errors
from delivery.engine.dispatch import campaign_kick, campaign_schedule
from delivery.messages import campaign_messages_create
from whatsblast.core import queues
from whatsblast.core.redis import get_redis


class LaunchError(ValueError):
    """The campaign cannot start as configured; the message says what to fix."""


@dataclass(frozen=True)
class LaunchSummary:
    campaign_id: int
    status: str
    recipients: int
    pending: int
    skipped: int
    already_started: bool
    # Pending rows whose recipient's send window is closed: due at its next opening.
    waiting_for_window: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Contacts that would be sent to but lack a mapped field: refused before launch, so a
# typo in the mapping costs an error message, not a million failed sends.
_MISSING_FIELD_SQL = """
SELECT count(*), (array_agg(COALESCE(c.phone, c.user_id) ORDER BY c.id))[1:5]
  FROM campaigns_contact AS c
 WHERE c.opted_out_at IS NULL
   AND {audience}
   AND {value_missing}
"""


def launch_audience(campaign: Campaign) -> Audience:
    """The campaign's audience, or ``LaunchError`` saying why it has none."""
    try:
        audience = campaign_audience(campaign)
    except AudienceError as exc:
        raise LaunchError(str(exc)) from exc
    if audience.empty:
        raise LaunchError("the campaign has no contact list and no segment")
    return audience


def launch_skips(campaign: Campaign, audience: Audience) -> SkipRules:
    """The campaign's skip rules, or ``LaunchError`` saying why its languages cannot go."""
    try:
        return SkipRules.for_campaign(campaign, audience)
    except LanguageError as exc:
        raise LaunchError(str(exc)) from exc


def campaign_validate(*, campaign: Campaign) -> None:
    """Raise ``LaunchError`` if the campaign cannot be launched as it stands."""
    template = campaign.template
    if template.status != TemplateStatus.APPROVED:
        raise LaunchError(
            f"template {template.name} ({template.language}) is {template.status}, "
            "only APPROVED templates can be sent"
        )
    unusable = template_unusable_reasons(template)
    if unusable:
        raise LaunchError(
            f"template {template} cannot be sent by this version: {'; '.join(unusable)}"
        )
    try:
        mapping_validate(template, campaign.param_mapping)
    except ValueError as exc:
        raise LaunchError(str(exc)) from exc
    variants = campaign_variants(campaign) if campaign.ab_test_percent else []
    ab_errors = variants_errors(campaign, [(v.template, v.param_mapping) for v in variants])
    if ab_errors:
        raise LaunchError("; ".join(ab_errors))
    sends = [(template, campaign.param_mapping), *((v.template, v.param_mapping) for v in variants)]
    mappings = [mapping for _, mapping in sends]
    if any(mapping_has_click(m) for m in mappings):
        link_errors = tracked_link_errors(campaign, sends)
        if link_errors:
            raise LaunchError("; ".join(link_errors))
    audience = launch_audience(campaign)
    skips = launch_skips(campaign, audience)
    refused = [
        f.text
        for f in format_findings(
            campaign=campaign, audience=audience, skips=skips, now=timezone.now()
        )
        if f.level == FORMAT_ERROR
    ]
    if refused:
        raise LaunchError(" ".join(refused))
    with connection.cursor() as cursor:
        for field in sorted({f for m in mappings for f in required_fields(m)}):
            if field in CONTACT_COLUMNS and field != "name":
                continue
            value_missing = (
                "c.name = ''"
                if field == "name"
                else "coalesce(c.attributes ->> %(field)s, '') = ''"
            )
            cursor.execute(
                _MISSING_FIELD_SQL.format(audience=audience.condition, value_missing=value_missing),
                {**audience.params, "field": field},
            )
            missing, examples = cursor.fetchone()
            if missing:
                raise LaunchError(
                    f"{missing} contact(s) have no value for mapped field '{field}' "
                    f"(e.g. {', '.join(examples)}); fix the mapping or the contacts"
                )


def campaign_start(
    *, campaign: Campaign, at: datetime | None = None, now: datetime | None = None
) -> LaunchSummary:
    """Launch now (or schedule for ``at``). Starting a started campaign changes nothing.

    ``now`` is the launch instant the send windows are read at (default: the clock).
    """
    now = now or timezone.now()
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if campaign.status in (
            CampaignStatus.RUNNING,
            CampaignStatus.COMPLETED,
            CampaignStatus.CANCELLED,
            CampaignStatus.PAUSED,
        ):
            return _summary(campaign, already_started=True, now=now)
        campaign_validate(campaign=campaign)
        if at is not None and at > now:
            campaign.status = CampaignStatus.SCHEDULED
            campaign.scheduled_at = at
            campaign.save(update_fields=["status", "scheduled_at", "updated_at"])
            queues.after_commit(lambda: _schedule(campaign.pk, at), what="scheduled launch")
            return _summary(campaign, already_started=False, now=now)
        hold = _insert_messages(campaign, now=now)
        campaign.status = CampaignStatus.RUNNING
        campaign.status_reason = ""
        campaign.started_at = now
        # A canary holds every row after its first recipients until it is judged.
        campaign.canary_state = CanaryState.TESTING if hold.active else CanaryState.NONE
        # An A/B test holds the rest of the audience until its winner is decided.
        campaign.ab_state = AbState.TESTING if campaign.ab_test_percent else AbState.NONE
        campaign.save(
            update_fields=[
                "status",
                "status_reason",
                "started_at",
                "canary_state",
                "ab_state",
                "updated_at",
            ]
        )
        queues.after_commit(lambda: _kick(campaign.pk), what="campaign senders")
        return _summary(campaign, already_started=False, now=now)


def campaigns_start_together(
    *, campaigns: Sequence[Campaign], now: datetime | None = None
) -> list[LaunchSummary]:
    """Launch several campaigns in one transaction, so that they start at one instant.

    Launched one after another, each campaign's audience is inserted while the ones before
    it already send: ten regional campaigns meant to go out together started over a second
    or more, a 50-campaign morning over several, and each one's first sends came that much
    later. Here every audience is inserted first and one commit makes them all running:
    their rows share the transaction's ``now()`` and their senders are kicked together
    after it. All or none: a campaign that cannot start (``LaunchError``, naming it) keeps
    the others from starting, as the person asked for them together.
    """
    now = now or timezone.now()
    summaries: list[LaunchSummary] = []
    with transaction.atomic():
        # Locked in id order, as any other launcher locks them: no deadlock with a second
        # group launch or a single launch of one of them.
        for campaign in sorted(campaigns, key=lambda c: c.pk):
            try:
                summaries.append(campaign_start(campaign=campaign, now=now))
            except LaunchError as exc:
                raise LaunchError(f"{campaign}: {exc}") from exc
    return summaries


def _insert_messages(campaign: Campaign, *, now: datetime) -> CanaryHold:
    template = campaign.template
    audience = launch_audience(campaign)
    skips = launch_skips(campaign, audience)
    # params_expr holds only placeholders and fixed column names.
    params_expr, named = named_params_sql(template, campaign.param_mapping, "p")
    variants = campaign_variants(campaign) if campaign.ab_test_percent else []
    arms = arm_plan(campaign, variants, default_params_expr=params_expr) if variants else None
    # The first next_attempt_at is now(), or for a campaign with a send window each row's
    # zone's next opening (see campaigns.window_schedule): the zone comes from equality
    # joins on the contact's phone prefix and attributes, the opening from a small per-zone
    # table computed in Python, so the launch stays one set-based INSERT.
    schedule = launch_schedule(campaign=campaign, now=now)
    hold = canary_hold(campaign=campaign, audience=audience, skips=skips)
    pool = campaign_pool(campaign)
    pool_validate(campaign, pool)
    number_expr, number_params = pool_homes_assign(pool, audience=audience, skips=skips)
    with connection.cursor() as cursor:
        schedule.load(cursor)
    template_expr = skips.languages.template_id_sql("c") if skips.languages else "%(template_id)s"
    next_attempt_expr = hold.wrap(schedule.next_attempt_expr)
    if arms is not None:
        template_expr, params_expr = arms.template_expr, arms.params_expr
        next_attempt_expr = arms.next_attempt(next_attempt_expr)
    campaign_messages_create(
        number_expr=number_expr,
        params_expr=params_expr,
        schedule_joins=schedule.joins,
        next_attempt_expr=next_attempt_expr,
        skip_reason_expr=skips.reason_sql("c"),
        audience_expr=audience.condition,
        template_expr=template_expr,
        arm_join=arms.arm_join if arms else "",
        variant_expr="ab.arm" if arms else "NULL",
        args={
            "campaign_id": campaign.pk,
            "phone_number_id": campaign.phone_number_id,
            "template_id": template.pk,
            **skips.params,
            **named,
            **schedule.params,
            **hold.params,
            **number_params,
            **(arms.params if arms else {}),
        },
    )
    return hold


def _summary(campaign: Campaign, *, already_started: bool, now: datetime) -> LaunchSummary:
    # Only a windowed campaign has rows waiting for a window (without one, the rows carry
    # the database's now(), which is not comparable with ``now``).
    windowed = campaign.window_start is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE send_status = 'pending'), "
            "count(*) FILTER (WHERE send_status = 'skipped'), "
            "count(*) FILTER (WHERE %s AND send_status = 'pending' AND next_attempt_at > %s) "
            "FROM delivery_message WHERE campaign_id = %s",
            [windowed, now, campaign.pk],
        )
        total, pending, skipped, waiting = cursor.fetchone()
    return LaunchSummary(
        campaign.pk, campaign.status, total, pending, skipped, already_started, waiting
    )


def _kick(campaign_id: int) -> None:
    campaign_kick(campaign_id=campaign_id)


def _schedule(campaign_id: int, at: datetime) -> None:
    campaign_schedule(campaign_id=campaign_id, at=at)


def campaign_start_scheduled(*, campaign_id: int) -> LaunchSummary | None:
    """Launch a scheduled campaign that is due; ``None`` when it is not (or no longer) due.

    The flip from scheduled and the launch commit together: a launch interrupted half-way
    (a killed job, a lost database) leaves the campaign scheduled, to be tried again,
    never a draft nobody will start. A campaign that can no longer launch as configured
    is paused with the reason instead.
    """
    try:
        with transaction.atomic():
            campaign = (
                Campaign.objects.select_for_update()
                .filter(
                    pk=campaign_id,
                    status=CampaignStatus.SCHEDULED,
                    scheduled_at__lte=timezone.now(),
                )
                .first()
            )
            if campaign is None:
                return None
            campaign.status = CampaignStatus.DRAFT  # due now: launch as from a draft
            campaign.save(update_fields=["status", "updated_at"])
            return campaign_start(campaign=campaign)
    except LaunchError as exc:
        Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.SCHEDULED).update(
            status=CampaignStatus.PAUSED, status_reason=f"scheduled launch refused: {exc}"[:500]
        )
        return None


def schedules_due_queue() -> int:
    """Queue the launch of due scheduled campaigns (RQ's scheduler may have lost them).

    Launching runs in its own job, not in the tick: a million recipients take longer than
    a tick may run. A Redis mark lets one launch job per campaign through per 10 minutes.
    """
    queued = 0
    due = Campaign.objects.filter(
        status=CampaignStatus.SCHEDULED, scheduled_at__lte=timezone.now()
    ).values_list("pk", flat=True)
    for campaign_id in due:
        if get_redis().set(f"wb:launch-queued:{campaign_id}", 1, nx=True, ex=600):
            queues.enqueue(queues.CAMPAIGN_START_SCHEDULED, campaign_id)
            queued += 1
    return queued
