"""A live edit of a journey with 1,200 people waiting: a wait shortened, another changed
and moved before a step people already passed, two steps removed.

Nobody is sent a step twice (the welcome some already had is not sent again when the new
version puts it after their wait), nobody is left waiting at a step that no longer
exists: they leave, saying why; everyone else goes on in the new version, on its timing.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import Count

from campaigns.models import Contact
from delivery.models import Message
from journeys.models import ExitKind, InstanceState, JourneyHistory, JourneyInstance
from journeys.versions import journey_edit
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, post, run, template_on

pytestmark = pytest.mark.django_db

NAME = {"body": {"1": {"field": "name"}}}


def onboarding(*, first: int, second: int, survey: bool) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"id": "settle", "type": "wait", "delay": {"hours": first}},
        {"id": "welcome", "type": "send", "template": "welcome", "mapping": NAME},
        {"id": "breathe", "type": "wait", "delay": {"hours": second}},
        {"id": "tips", "type": "send", "template": "tips", "mapping": NAME},
    ]
    if survey:
        steps += [
            {"id": "later", "type": "wait", "delay": {"hours": 24}},
            {"id": "survey", "type": "send", "template": "survey", "mapping": NAME},
        ]
    return {"entry": {"type": "event", "event": "signed_up"}, "steps": steps}


def version_2() -> dict[str, Any]:
    """The first wait down to 2 h, the second to 12 h and before the welcome, no survey."""
    return {
        "entry": {"type": "event", "event": "signed_up"},
        "steps": [
            {"id": "settle", "type": "wait", "delay": {"hours": 2}},
            {"id": "breathe", "type": "wait", "delay": {"hours": 12}},
            {"id": "welcome", "type": "send", "template": "welcome", "mapping": NAME},
            {"id": "tips", "type": "send", "template": "tips", "mapping": NAME},
        ],
    }


def enter(phones: list[str], at: datetime) -> None:
    post([{"phone": p, "name": "signed_up"} for p in phones], now=at)
    run(at)


def test_nobody_sent_twice_nobody_stranded() -> None:
    number = make_phone_number()
    for name in ("welcome", "tips", "survey"):
        template_on(number, name)
    journey = journey_live(number, onboarding(first=24, second=48, survey=True), name="onboarding")
    group_c = [f"+551198700{i:04d}" for i in range(200)]
    group_b = [f"+551198710{i:04d}" for i in range(600)]
    group_a = [f"+551198720{i:04d}" for i in range(400)]
    Contact.objects.bulk_create(Contact(phone=p, name="Ana") for p in group_a + group_b + group_c)
    t0 = datetime.fromisoformat("2026-12-01T12:00:00+00:00")

    enter(group_c, t0)
    run(t0 + timedelta(hours=24))  # C: welcome, then the 48 h wait
    enter(group_b, t0 + timedelta(hours=48))
    run(t0 + timedelta(hours=72))  # C: tips, then waits for the survey; B: welcome
    enter(group_a, t0 + timedelta(hours=74))

    waiting = dict(
        JourneyInstance.objects.filter(state=InstanceState.ACTIVE)
        .values_list("step")
        .annotate(n=Count("id"))
    )
    assert waiting == {"later": 200, "breathe": 600, "settle": 400}

    edit_at = t0 + timedelta(hours=75)
    version = journey_edit(
        journey=journey, definition=version_2(), note="shorter, no survey", now=edit_at
    )
    assert version.number == 2

    # C waited at a removed step: they leave, saying so.
    removed = JourneyInstance.objects.filter(contact__phone__in=group_c)
    assert set(removed.values_list("state", "exit_kind")) == {
        (InstanceState.EXITED, ExitKind.STEP_REMOVED)
    }
    assert set(removed.values_list("exit_reason", flat=True)) == {
        "its step 'later' was removed in version 2"
    }
    # B's 48 h wait is now 12 h from when it began (t0 + 72 h); A's 24 h is 2 h from t0 + 74 h.
    due = {
        phone: at
        for phone, at in JourneyInstance.objects.filter(state=InstanceState.ACTIVE).values_list(
            "contact__phone", "due_at"
        )
    }
    assert {due[p] for p in group_b} == {t0 + timedelta(hours=84)}
    assert {due[p] for p in group_a} == {t0 + timedelta(hours=76)}
    assert set(JourneyInstance.objects.values_list("version", flat=True)) == {2}

    for hours in (76, 84, 88, 100):
        run(t0 + timedelta(hours=hours))

    assert not JourneyInstance.objects.filter(state=InstanceState.ACTIVE).exists()
    sent = Counter(Message.objects.values_list("to", "journey_step"))
    assert set(sent.values()) == {1}  # nobody got a step twice
    steps_of: dict[str, set[str]] = {}
    for to, step in sent:
        steps_of.setdefault(to, set()).add(step)
    assert {p: steps_of[p] for p in group_a} == {p: {"welcome", "tips"} for p in group_a}
    assert {p: steps_of[p] for p in group_b} == {p: {"welcome", "tips"} for p in group_b}
    assert {p: steps_of[p] for p in group_c} == {p: {"welcome", "tips"} for p in group_c}
    assert not Message.objects.filter(journey_step="survey").exists()
    # B reached the welcome again in version 2: skipped, saying why.
    skipped = JourneyHistory.objects.filter(step="welcome", kind="skipped")
    assert skipped.count() == 600
    assert all("already sent at this step" in h.detail for h in skipped)
    # Every instance left with a reason.
    reasons = Counter(JourneyInstance.objects.values_list("exit_kind", flat=True))
    assert reasons == {ExitKind.COMPLETED: 1000, ExitKind.STEP_REMOVED: 200}
