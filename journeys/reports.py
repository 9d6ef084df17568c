"""What a journey did and where everyone is: the journey's figures and one person's view.

Per journey: how many entered (and how many were held out), how many are in it now and at
which step, how many left and why, what each step did (sent, skipped by reason, deferred),
what became of its messages (sent, delivered, read, failed, by step), conversions against
its holdout (the lift, with Newcombe's interval), and the entries it refused. Per person:
the journeys they are in or were in, where they are, what is next, and the history that
says why (the customer page).

A conversion is the journey's goal event (an event in, or a conversion reported by the
API or a file, of that name) from the person within the goal's days of entering:
the same rule for those held out and those not, so the two rates compare.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from journeys.definition import Definition
from journeys.models import ExitKind, HistoryKind, Journey, JourneyHistory, JourneyInstance
from journeys.running import definition_of
from whatsblast.core.proportions import Comparison, proportion_diff


@dataclass
class StepFigures:
    step: str
    type: str
    waiting: int = 0
    sent: int = 0
    skipped: int = 0
    deferred: int = 0
    # The step's messages by status (sent, delivered, read, failed, ...).
    messages: dict[str, int] = field(default_factory=dict)
    skip_reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class JourneyFigures:
    entered: int
    held_out: int
    active: int
    exited: dict[str, int]  # exit reason → people
    exit_kinds: dict[str, int]
    steps: list[StepFigures]
    refused: dict[str, int]
    sent: int
    goal_event: str
    converted: int
    converted_held_out: int
    lift: Comparison | None
    # People waiting at steps the current version no longer has (an edit in progress).
    elsewhere: int = 0

    def as_dict(self) -> dict[str, Any]:
        lift = None
        if self.lift is not None:
            lift = {
                "treated_rate": self.lift.rate_b,
                "holdout_rate": self.lift.rate_a,
                "difference": self.lift.difference,
                "interval": [self.lift.interval.low, self.lift.interval.high],
                "relative_lift": self.lift.relative_lift,
                "p_value": self.lift.p_value,
            }
        return {
            "entered": self.entered,
            "held_out": self.held_out,
            "active": self.active,
            "exited": self.exited,
            "exit_kinds": self.exit_kinds,
            "refused": self.refused,
            "sent": self.sent,
            "steps": [
                {
                    "step": s.step,
                    "type": s.type,
                    "waiting": s.waiting,
                    "sent": s.sent,
                    "skipped": s.skipped,
                    "deferred": s.deferred,
                    "messages": s.messages,
                    "skip_reasons": s.skip_reasons,
                }
                for s in self.steps
            ],
            "goal": {
                "event": self.goal_event or None,
                "converted": self.converted,
                "converted_held_out": self.converted_held_out,
                "lift": lift,
            },
        }


_COUNTS_SQL = """
SELECT count(*), count(*) FILTER (WHERE holdout), count(*) FILTER (WHERE state = 'active')
  FROM journeys_journeyinstance WHERE journey_id = %(j)s AND NOT test
"""
_WAITING_SQL = """
SELECT step, count(*) FROM journeys_journeyinstance
 WHERE journey_id = %(j)s AND state = 'active' AND NOT test GROUP BY step
"""
_EXITED_SQL = """
SELECT exit_kind, exit_reason, count(*) FROM journeys_journeyinstance
 WHERE journey_id = %(j)s AND state = 'exited' AND NOT test GROUP BY exit_kind, exit_reason
"""
_HISTORY_SQL = """
SELECT h.step, h.kind, CASE WHEN h.kind = 'skipped' THEN left(h.detail, 80) ELSE '' END,
       count(*)
  FROM journeys_journeyhistory AS h
  JOIN journeys_journeyinstance AS i ON i.id = h.instance_id
 WHERE h.journey_id = %(j)s AND h.kind IN ('sent', 'skipped', 'deferred') AND NOT i.test
 GROUP BY 1, 2, 3
"""
# The journey's messages by step and status: its instances' rows, through the unique
# (journey_instance_id, journey_step) index.
_MESSAGES_SQL = """
SELECT m.journey_step, m.status, count(*)
  FROM journeys_journeyinstance AS i
  JOIN delivery_message AS m ON m.journey_instance_id = i.id
 WHERE i.journey_id = %(j)s AND NOT i.test
 GROUP BY 1, 2
"""
# Who converted: the goal event (an event in, or a reported conversion) from the person
# within the goal's days of entering, held out or not.
_CONVERTED_SQL = """
SELECT i.holdout, count(*), count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM journeys_contactevent AS e
            WHERE e.contact_id = i.contact_id AND e.name = %(event)s
              AND e.occurred_at >= i.entered_at
              AND e.occurred_at < i.entered_at + make_interval(days => %(days)s))
       OR EXISTS (
           SELECT 1 FROM delivery_conversion AS v
            WHERE v.contact_id = i.contact_id AND v.event = %(event)s
              AND v.occurred_at >= i.entered_at
              AND v.occurred_at < i.entered_at + make_interval(days => %(days)s)))
  FROM journeys_journeyinstance AS i
 WHERE i.journey_id = %(j)s AND NOT i.test
 GROUP BY i.holdout
"""


def journey_figures(journey: Journey) -> JourneyFigures:
    definition = definition_of(journey.pk, journey.version)
    args = {"j": journey.pk}
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS_SQL, args)
        entered, held_out, active = cursor.fetchone()
        cursor.execute(_WAITING_SQL, args)
        waiting = {str(s): int(n) for s, n in cursor.fetchall()}
        cursor.execute(_EXITED_SQL, args)
        exited: dict[str, int] = defaultdict(int)
        kinds: dict[str, int] = defaultdict(int)
        for kind, reason, n in cursor.fetchall():
            exited[str(reason) or str(kind)] += int(n)
            kinds[str(kind)] += int(n)
        cursor.execute(_HISTORY_SQL, args)
        history = cursor.fetchall()
        cursor.execute(_MESSAGES_SQL, args)
        messages = cursor.fetchall()
        converted = {False: (0, 0), True: (0, 0)}
        if definition.goal_event:
            cursor.execute(
                _CONVERTED_SQL,
                {**args, "event": definition.goal_event, "days": definition.goal_days},
            )
            for holdout, n, won in cursor.fetchall():
                converted[bool(holdout)] = (int(n), int(won))
    steps = _steps(definition, waiting, history, messages)
    (treated, treated_won), (control, control_won) = converted[False], converted[True]
    lift = (
        proportion_diff(control_won, control, treated_won, treated) if treated and control else None
    )
    known = set(definition.step_ids()) | {"end"}
    return JourneyFigures(
        entered=int(entered),
        held_out=int(held_out),
        active=int(active),
        exited=dict(exited),
        exit_kinds=dict(kinds),
        steps=steps,
        refused={str(k): int(v) for k, v in (journey.entries_refused or {}).items()},
        sent=sum(s.sent for s in steps),
        goal_event=definition.goal_event,
        converted=treated_won,
        converted_held_out=control_won,
        lift=lift,
        elsewhere=sum(n for s, n in waiting.items() if s not in known),
    )


def _steps(
    definition: Definition,
    waiting: dict[str, int],
    history: list[tuple[Any, ...]],
    messages: list[tuple[Any, ...]],
) -> list[StepFigures]:
    steps = {
        s.id: StepFigures(s.id, s.type, waiting=waiting.get(s.id, 0)) for s in definition.steps
    }
    for step, kind, reason, n in history:
        figures = steps.get(str(step))
        if figures is None:
            continue
        if kind == HistoryKind.SENT:
            figures.sent += int(n)
        elif kind == HistoryKind.DEFERRED:
            figures.deferred += int(n)
        else:
            figures.skipped += int(n)
            figures.skip_reasons[str(reason)] = figures.skip_reasons.get(str(reason), 0) + int(n)
    for step, status, n in messages:
        figures = steps.get(str(step))
        if figures is not None:
            figures.messages[str(status)] = int(n)
    return list(steps.values())


# --- one person -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PersonJourney:
    journey: Journey
    instance: JourneyInstance
    history: list[JourneyHistory]

    @property
    def where(self) -> str:
        instance = self.instance
        if instance.state != "active":
            kind = ExitKind(instance.exit_kind).label if instance.exit_kind else "left"
            return f"left: {instance.exit_reason or kind}"
        return f"at {instance.step}"

    @property
    def next_at(self) -> datetime | None:
        return self.instance.due_at if self.instance.state == "active" else None


def contact_journeys(contact_id: int, *, limit: int = 20, history: int = 30) -> list[PersonJourney]:
    """The contact's journeys, the latest entry first, each with its history (its last
    ``history`` entries, oldest first)."""
    instances = list(
        JourneyInstance.objects.filter(contact_id=contact_id)
        .select_related("journey")
        .order_by("-entered_at", "-id")[:limit]
    )
    # Each instance's latest ``history`` entries, in one query: numbered newest first
    # within each instance, the first ones kept.
    latest = (
        JourneyHistory.objects.filter(instance__in=instances)
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("instance_id")], order_by=F("id").desc())
        )
        .filter(rank__lte=history)
        .order_by("instance_id", "id")
    )
    by_instance: dict[int, list[JourneyHistory]] = {}
    for row in latest:
        by_instance.setdefault(int(row.instance_id), []).append(row)
    return [PersonJourney(i.journey, i, by_instance.get(int(i.pk), [])) for i in instances]
