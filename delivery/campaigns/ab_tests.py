"""A/B tests after launch: each arm's figures, the decision, and the winner sent to the rest.

The launch (delivery.campaigns.ab_launch) put each recipient in an arm or in the held
remainder. From then on:

* ``ab_summary`` reads each arm's figures in one statement: recipients, messages sent
  (accepted by Meta: sent, delivered or read, the denominator of every rate) and successes
  by the campaign's metric (read; a click by a person, not a link-preview fetcher; a reply;
  a conversion attributed to the message). Each rate carries its Wilson interval, each arm
  its probability of being the best (Beta posteriors, whatsblast.core.proportions) and its
  difference from arm A with Newcombe's interval and a two-proportion z-test's p-value.
* The maintenance tick (``ab_tests_check``) decides a testing campaign once its decision
  time has come (``ab_decide_after_hours`` after the launch) and either every arm has sent
  ``ab_decide_min_sample`` messages or no arm has a message left to send. The leader is
  the arm most likely to be the best. With ``ab_auto_winner`` it is the winner at once;
  otherwise the campaign waits for the marketer's pick (``ab_winner_pick``), which may
  also come earlier and may choose any arm.
* Once decided, the tick releases the remainder a batch at a time: each held row gets the
  winner's template and its params rendered again from the winner's mapping, and is due
  now. From there it is an ordinary pending row, sent under the same rate, cap, window and
  no-double-send guarantees as every other.

An arm's row keeps its ``variant``; a remainder row's stays null, so the arms' figures are
the test's alone and the remainder's template says what it was sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis
from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import AbMetric, AbState, Campaign, CampaignStatus, CampaignVariant
from delivery.campaigns.ab_launch import campaign_variants, named_params_sql
from delivery.campaigns.canary import HOLD_AT, RELEASE_BATCH
from delivery.messages import remainder_release
from whatsblast.core.proportions import (
    Comparison,
    Interval,
    probability_to_beat,
    proportion_diff,
    wilson_interval,
)
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

# A testing campaign past its decision time is looked at again at most this often: each
# look reads every arm's rows.
RECHECK_SECONDS = 30
# Posterior draws for the probability to be best: within ~0.4 points, the same every time.
DRAWS = 20_000
# Past its decision time the test sends its leader whatever the evidence (the rest of the
# audience should not wait for ever); below this probability the decision says it was not
# conclusive, so nobody reads a coin toss as a finding.
CLEAR_WINNER = 0.95


class AbTestError(ValueError):
    """The A/B action cannot be taken; the message says why."""


# What counts as a success for each metric, over the arm's message ``m`` (sent rows only).
_SUCCESS_SQL = {
    AbMetric.READ: "m.status = 'read'",
    AbMetric.CLICK: (
        "EXISTS (SELECT 1 FROM delivery_click AS k WHERE k.campaign_id = m.campaign_id"
        " AND k.message_id = m.id AND NOT k.is_preview)"
    ),
    AbMetric.REPLY: (
        "EXISTS (SELECT 1 FROM webhooks_inboundmessage AS i WHERE i.campaign_id = m.campaign_id"
        " AND i.contact_id = m.contact_id)"
    ),
    AbMetric.CONVERSION: (
        "EXISTS (SELECT 1 FROM delivery_conversion AS v WHERE v.message_id = m.id)"
    ),
}

# Every arm's figures in one pass over the test's rows (the partial index
# message_ab_arm_idx holds only rows with an arm: the test's share, not the campaign).
_ARMS_SQL = """
SELECT m.variant,
       count(*) FILTER (WHERE m.status <> 'skipped'),
       count(*) FILTER (WHERE m.status IN ('sent', 'delivered', 'read')),
       count(*) FILTER (WHERE m.status IN ('sent', 'delivered', 'read') AND {success}),
       count(*) FILTER (WHERE m.send_status IN ('pending', 'sending', 'unknown'))
  FROM delivery_message AS m
 WHERE m.campaign_id = %(id)s AND m.variant IS NOT NULL
 GROUP BY m.variant
"""  # noqa: S608 - {success} is one of the constants above

# The remainder still held for the winner (the partial pending index, held rows last).
_HELD_SQL = """
SELECT count(*) FROM delivery_message
 WHERE campaign_id = %(id)s AND send_status = 'pending' AND next_attempt_at >= %(hold)s
   AND variant IS NULL
"""


@dataclass(frozen=True)
class ArmResult:
    position: int
    label: str
    template: str  # "name (language)"
    recipients: int
    sent: int
    successes: int
    rate: float
    interval: tuple[float, float]  # Wilson 95%
    probability_best: float
    comparison: Comparison | None  # against arm A; None for A itself
    open: int = 0  # rows still to be sent


@dataclass(frozen=True)
class AbSummary:
    metric: str
    metric_label: str
    state: str
    arms: list[ArmResult]
    leader: int | None
    winner: int | None
    decided_at: datetime | None
    decision: str
    held: int
    decide_at: datetime | None
    ready: bool

    def as_dict(self) -> dict[str, Any]:
        """For JSON: the arms with their figures, the state and the decision."""
        return {
            "metric": self.metric,
            "state": self.state,
            "leader": "ABCDE"[self.leader] if self.leader is not None else None,
            "winner": "ABCDE"[self.winner] if self.winner is not None else None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "decision": self.decision,
            "held": self.held,
            "decide_at": self.decide_at.isoformat() if self.decide_at else None,
            "ready": self.ready,
            "arms": [
                {
                    "variant": arm.label,
                    "template": arm.template,
                    "recipients": arm.recipients,
                    "sent": arm.sent,
                    "successes": arm.successes,
                    "rate": round(arm.rate, 6),
                    "interval": [round(arm.interval[0], 6), round(arm.interval[1], 6)],
                    "probability_best": round(arm.probability_best, 4),
                    "p_value_against_a": (
                        round(arm.comparison.p_value, 6)
                        if arm.comparison and arm.comparison.p_value is not None
                        else None
                    ),
                }
                for arm in self.arms
            ],
        }


def ab_summary(campaign: Campaign, *, now: datetime | None = None) -> AbSummary | None:
    """The campaign's A/B test as it stands; ``None`` when it runs none."""
    if not campaign.ab_test_percent:
        return None
    variants = campaign_variants(campaign)
    if not variants:
        return None
    counts = _arm_counts(campaign)
    arms = _arm_results(variants, counts)
    leader = (
        max(arms, key=lambda a: a.probability_best).position if any(a.sent for a in arms) else None
    )
    decide_at = (
        campaign.started_at + timedelta(hours=float(campaign.ab_decide_after_hours))
        if campaign.started_at
        else None
    )
    with connection.cursor() as cursor:
        cursor.execute(_HELD_SQL, {"id": campaign.pk, "hold": HOLD_AT})
        held = int(cursor.fetchone()[0])
    winner = campaign.ab_winner.position if campaign.ab_winner_id and campaign.ab_winner else None
    return AbSummary(
        metric=campaign.ab_metric,
        metric_label=AbMetric(campaign.ab_metric).label,
        state=campaign.ab_state,
        arms=arms,
        leader=leader,
        winner=winner,
        decided_at=campaign.ab_decided_at,
        decision=campaign.ab_decision,
        held=held,
        decide_at=decide_at,
        ready=_ready(campaign, arms, decide_at, now or timezone.now()),
    )


def _arm_counts(campaign: Campaign) -> dict[int, tuple[int, int, int, int]]:
    success = _SUCCESS_SQL[AbMetric(campaign.ab_metric)]
    with connection.cursor() as cursor:
        cursor.execute(_ARMS_SQL.format(success=success), {"id": campaign.pk})
        return {int(v): (int(r), int(s), int(k), int(o)) for v, r, s, k, o in cursor.fetchall()}


def _arm_results(
    variants: list[CampaignVariant], counts: dict[int, tuple[int, int, int, int]]
) -> list[ArmResult]:
    figures = [counts.get(int(v.position), (0, 0, 0, 0)) for v in variants]
    best = probability_to_beat([(k, s) for _, s, k, _ in figures], draws=DRAWS, seed=0)
    base_sent, base_successes = figures[0][1], figures[0][2]
    arms = []
    for index, (variant, (recipients, sent, successes, still_open)) in enumerate(
        zip(variants, figures, strict=True)
    ):
        interval = wilson_interval(successes, sent) if sent else Interval(0.0, 0.0)
        comparison = (
            proportion_diff(base_successes, base_sent, successes, sent)
            if index and base_sent and sent
            else None
        )
        arms.append(
            ArmResult(
                position=int(variant.position),
                label=variant.label,
                template=f"{variant.template.name} ({variant.template.language})",
                recipients=recipients,
                sent=sent,
                successes=successes,
                rate=successes / sent if sent else 0.0,
                interval=(interval.low, interval.high),
                probability_best=best[index],
                comparison=comparison,
                open=still_open,
            )
        )
    return arms


def _ready(
    campaign: Campaign, arms: list[ArmResult], decide_at: datetime | None, now: datetime
) -> bool:
    """Whether the test may be decided: its time has come, and every arm has its sample
    or nothing left to send."""
    if decide_at is None or now < decide_at or not any(a.sent for a in arms):
        return False
    sampled = all(a.sent >= campaign.ab_decide_min_sample for a in arms)
    return sampled or not any(a.open for a in arms)


def _decision_text(summary: AbSummary, arm: ArmResult, *, picked: bool) -> str:
    low, high = arm.interval
    others = ", ".join(
        f"{a.label} {a.rate:.1%}" for a in summary.arms if a.position != arm.position
    )
    how = "picked by the marketer" if picked else "decided automatically"
    clear = "" if arm.probability_best >= CLEAR_WINNER else " (not conclusive: below 95%)"
    return (
        f"Variant {arm.label} ({arm.template}), {how}: {summary.metric_label.lower()} "
        f"{arm.rate:.1%} (95% interval {low:.1%} to {high:.1%}, {arm.sent:,} sent) "
        f"against {others}; probability to be the best {arm.probability_best:.1%}{clear}."
    )[:500]


def _decide(campaign: Campaign, summary: AbSummary, position: int, *, picked: bool) -> bool:
    """Record ``position`` as the winner of a campaign still testing or waiting; whether
    this call did (a second tick, or a pick racing the tick, changes nothing)."""
    arm = next(a for a in summary.arms if a.position == position)
    variant = CampaignVariant.objects.get(campaign=campaign, position=position)
    with transaction.atomic():
        won = Campaign.objects.filter(
            pk=campaign.pk, ab_state__in=(AbState.TESTING, AbState.WAITING_PICK)
        ).update(
            ab_state=AbState.DECIDED,
            ab_winner=variant,
            ab_decided_at=timezone.now(),
            ab_decision=_decision_text(summary, arm, picked=picked),
        )
    if won:
        logger.info("campaign %s A/B winner %s", campaign.pk, arm.label)
    return bool(won)


def ab_winner_pick(*, campaign: Campaign, position: int) -> None:
    """The marketer's pick: variant ``position`` goes to the rest (``AbTestError`` when it
    cannot: no test, already decided, an arm that does not exist, a finished campaign)."""
    campaign = Campaign.objects.get(pk=campaign.pk)
    if not campaign.ab_test_percent:
        raise AbTestError("this campaign runs no A/B test")
    if campaign.ab_state == AbState.DECIDED:
        raise AbTestError("the winner is already decided")
    if campaign.ab_state not in (AbState.TESTING, AbState.WAITING_PICK):
        raise AbTestError("the A/B test starts when the campaign is launched")
    if campaign.status in (CampaignStatus.CANCELLED, CampaignStatus.COMPLETED):
        raise AbTestError(f"the campaign is {campaign.status}")
    summary = ab_summary(campaign)
    if summary is None or position not in {a.position for a in summary.arms}:
        raise AbTestError(f"the campaign has no variant {position}")
    if not _decide(campaign, summary, position, picked=True):
        raise AbTestError("the winner was decided meanwhile")


@dataclass
class AbReport:
    decided: list[int]
    waiting: list[int]
    released: int

    def as_dict(self) -> dict[str, Any]:
        return {"decided": self.decided, "waiting": self.waiting, "released": self.released}


def ab_tests_check(*, now: datetime | None = None) -> AbReport:
    """The maintenance tick's pass: decide testing campaigns that are ready, then give the
    decided campaigns' remainder the winner (``RELEASE_BATCH`` rows per campaign)."""
    now = now or timezone.now()
    report = AbReport([], [], 0)
    testing = Campaign.objects.filter(
        status=CampaignStatus.RUNNING, ab_state=AbState.TESTING, started_at__isnull=False
    )
    for campaign in testing:
        started = campaign.started_at
        if started is None or now < started + timedelta(hours=campaign.ab_decide_after_hours):
            continue
        if not _recheck_due(campaign.pk):
            continue
        summary = ab_summary(campaign, now=now)
        if summary is None or not summary.ready or summary.leader is None:
            continue
        if campaign.ab_auto_winner:
            if _decide(campaign, summary, summary.leader, picked=False):
                report.decided.append(campaign.pk)
        elif Campaign.objects.filter(pk=campaign.pk, ab_state=AbState.TESTING).update(
            ab_state=AbState.WAITING_PICK
        ):
            report.waiting.append(campaign.pk)
    decided = Campaign.objects.filter(
        status=CampaignStatus.RUNNING, ab_state=AbState.DECIDED, ab_winner__isnull=False
    ).select_related("ab_winner__template")
    for campaign in decided:
        report.released += ab_remainder_release(campaign=campaign)
    return report


def _recheck_due(campaign_id: int) -> bool:
    """Whether the test may be looked at now (once per ``RECHECK_SECONDS``); without Redis,
    always: the look is only a read."""
    try:
        return bool(get_redis().set(f"wb:ab-check:{campaign_id}", 1, nx=True, ex=RECHECK_SECONDS))
    except redis.RedisError:
        return True


def ab_remainder_release(*, campaign: Campaign, limit: int = RELEASE_BATCH) -> int:
    """Give up to ``limit`` held remainder rows the winner and make them due; how many."""
    winner = campaign.ab_winner
    if winner is None:
        return 0
    params_expr, params = named_params_sql(winner.template, winner.param_mapping, "w")
    return remainder_release(
        campaign_id=campaign.pk,
        hold_at=HOLD_AT,
        template_id=winner.template_id,
        params_expr=params_expr,
        params=params,
        limit=limit,
    )
