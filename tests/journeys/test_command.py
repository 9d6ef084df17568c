"""``manage.py journey``: a journey from a file, refused with every problem, run, read."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from campaigns.models import Contact
from journeys.models import Journey, JourneyStatus
from tests.factories import make_phone_number
from tests.journeys.support import template_on

pytestmark = pytest.mark.django_db

DEFINITION = {
    "entry": {"type": "event", "event": "signed_up"},
    "steps": [
        {"id": "wait", "type": "wait", "delay": {"hours": 2}},
        {"id": "hello", "type": "send", "template": "welcome",
         "mapping": {"body": {"1": {"field": "name"}}}},
    ],
}  # fmt: skip


def manage(*args: str) -> str:
    out = StringIO()
    call_command("journey", *args, stdout=out)
    return out.getvalue().strip()


def test_create_run_and_read_a_journey_from_a_file(tmp_path: Path) -> None:
    number = make_phone_number(phone_number_id="106540352242922")
    template_on(number, "welcome")
    path = tmp_path / "welcome.json"
    path.write_text(json.dumps(DEFINITION))
    journey_id = manage("create", "--name", "welcome", "--number", number.phone_number_id,
                        "--file", str(path))  # fmt: skip
    assert Journey.objects.get(pk=int(journey_id)).status == JourneyStatus.DRAFT
    assert manage("live", "welcome") == "live"
    status = json.loads(manage("status", journey_id, "--json"))
    assert status["journey"] == "welcome" and status["entered"] == 0
    assert manage("list").startswith(f"{journey_id}\twelcome\tlive\tv1")
    Contact.objects.create(phone="+63281230001", name="Ana")
    dry = manage("dry-run", "welcome", "--contact", "+63281230001")
    assert dry.splitlines()[0] == "+63281230001 (Asia/Manila)"
    assert "hello: sends welcome" in dry
    assert manage("pause", "welcome") == "paused"
    assert manage("archive", "welcome") == "archived (0 left)"


def test_a_definition_that_cannot_run_is_refused_with_every_problem(tmp_path: Path) -> None:
    number = make_phone_number()
    template_on(number, "welcome")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**DEFINITION, "window": "late"}))
    with pytest.raises(CommandError) as caught:
        manage("check", "--number", number.phone_number_id, "--file", str(path))
    assert str(caught.value).splitlines() == [
        "window: 'late' is not a window like 09:00-20:00",
    ]
    number = make_phone_number()
    path.write_text(json.dumps(DEFINITION))
    with pytest.raises(CommandError) as caught:
        manage("create", "--name", "w", "--number", number.phone_number_id, "--file", str(path))
    assert str(caught.value) == f"steps[1].template: no template 'welcome' on {number}'s account"
    assert not Journey.objects.exists()


def test_every_problem_at_once_the_databases_too(tmp_path: Path) -> None:
    """A definition with a malformed setting and a template the account lacks: both are
    named in one answer, not one per attempt."""
    number = make_phone_number()
    path = tmp_path / "two.json"
    path.write_text(json.dumps({**DEFINITION, "window": "late"}))
    with pytest.raises(CommandError) as caught:
        manage("check", "--number", number.phone_number_id, "--file", str(path))
    assert str(caught.value).splitlines() == [
        "window: 'late' is not a window like 09:00-20:00",
        f"steps[1].template: no template 'welcome' on {number}'s account",
    ]
