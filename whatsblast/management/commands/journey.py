"""manage.py journey create|edit|check|live|pause|resume|archive|status|list|dry-run

A journey is a JSON definition (docs/journeys.md, journeys/definition.py); the commands
take it from a file (``-`` for standard input). A definition that cannot run is refused
with every problem by its path (``steps[2].timeout: how long to wait at most``), nothing
saved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from campaigns.catalogue.numbers import phone_number_get
from campaigns.models import Contact
from journeys.definition import DefinitionError
from journeys.dry_run import journey_dry_run
from journeys.models import Journey
from journeys.reports import journey_figures
from journeys.versions import (
    JourneyStateError,
    definition_check,
    journey_archive,
    journey_create,
    journey_edit,
    journey_go_live,
    journey_pause,
    journey_resume,
)
from whatsblast.management.base import SubcommandCommand


def _definition(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CommandError(f"{path}: not JSON ({exc})") from exc


def _problems(exc: DefinitionError) -> CommandError:
    return CommandError("\n".join(f"{at}: {what}" for at, what in exc.problems.items()))


def _journey(ref: str) -> Journey:
    found = (
        Journey.objects.filter(pk=int(ref)).first()
        if ref.isdigit()
        else Journey.objects.filter(name=ref).first()
    )
    if found is None:
        raise CommandError(f"no journey {ref!r}: manage.py journey list")
    return found


class Command(SubcommandCommand):
    help = "Journeys: create and edit them from a JSON file, run them, read their figures."
    subcommands = {
        "create": "Create a draft journey from a definition file; prints its id.",
        "edit": "Change a journey's definition (a new version once it has been live).",
        "check": "Check a definition for a number without saving it.",
        "live": "Put a journey live.",
        "pause": "Pause a live journey.",
        "resume": "Resume a paused journey.",
        "archive": "End a journey: everyone in it leaves.",
        "status": "A journey's figures: who entered, where they are, what it sent.",
        "list": "Every journey, a line each.",
        "dry-run": "When each step would fire for some contacts, in their own time.",
    }

    def add_create_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--number", required=True, help="the sending number's Meta id")
        parser.add_argument("--file", required=True, help="the definition (JSON); - for stdin")
        parser.add_argument("--description", default="")

    def handle_create(self, options: dict[str, Any]) -> None:
        try:
            journey = journey_create(
                name=options["name"],
                phone_number=phone_number_get(options["number"]),
                definition=_definition(options["file"]),
                description=options["description"],
            )
        except DefinitionError as exc:
            raise _problems(exc) from exc
        self.stdout.write(str(journey.pk))

    def add_edit_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("journey", help="id or name")
        parser.add_argument("--file", required=True)
        parser.add_argument("--note", default="")

    def handle_edit(self, options: dict[str, Any]) -> None:
        journey = _journey(options["journey"])
        try:
            version = journey_edit(
                journey=journey, definition=_definition(options["file"]), note=options["note"]
            )
        except DefinitionError as exc:
            raise _problems(exc) from exc
        except JourneyStateError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"version {version.number}")

    def add_check_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--number", required=True)
        parser.add_argument("--file", required=True)

    def handle_check(self, options: dict[str, Any]) -> None:
        try:
            definition_check(phone_number_get(options["number"]), _definition(options["file"]))
        except DefinitionError as exc:
            raise _problems(exc) from exc
        self.stdout.write("ok")

    def _status_change(self, options: dict[str, Any], action: Any) -> None:
        journey = _journey(options["journey"])
        try:
            changed = action(journey=journey)
        except (JourneyStateError, DefinitionError) as exc:
            raise CommandError(str(exc)) from exc
        journey.refresh_from_db()
        self.stdout.write(
            f"{journey.status}" + (f" ({changed} left)" if isinstance(changed, int) else "")
        )

    def add_live_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("journey", help="id or name")

    def handle_live(self, options: dict[str, Any]) -> None:
        self._status_change(options, journey_go_live)

    add_pause_arguments = add_live_arguments
    add_resume_arguments = add_live_arguments
    add_archive_arguments = add_live_arguments

    def handle_pause(self, options: dict[str, Any]) -> None:
        self._status_change(options, journey_pause)

    def handle_resume(self, options: dict[str, Any]) -> None:
        self._status_change(options, journey_resume)

    def handle_archive(self, options: dict[str, Any]) -> None:
        self._status_change(options, journey_archive)

    def add_status_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("journey", help="id or name")
        parser.add_argument("--json", action="store_true")

    def handle_status(self, options: dict[str, Any]) -> None:
        journey = _journey(options["journey"])
        figures = journey_figures(journey).as_dict()
        if options["json"]:
            self.stdout.write(json.dumps({"journey": journey.name, **figures}))
            return
        self.stdout.write(
            f"{journey.name} ({journey.status}, version {journey.version}): "
            f"{figures['entered']:,} entered, {figures['active']:,} in it, "
            f"{figures['sent']:,} sent"
        )
        for step in figures["steps"]:
            self.stdout.write(
                f"  {step['step']:<20} {step['type']:<7} waiting {step['waiting']:>7,}  "
                f"sent {step['sent']:>7,}  skipped {step['skipped']:>6,}"
            )
        for reason, n in sorted(figures["exited"].items(), key=lambda item: -item[1]):
            self.stdout.write(f"  left: {reason}: {n:,}")

    def add_list_arguments(self, parser: CommandParser) -> None:
        pass

    def handle_list(self, options: dict[str, Any]) -> None:
        for journey in Journey.objects.select_related("phone_number"):
            self.stdout.write(
                f"{journey.pk}\t{journey.name}\t{journey.status}\tv{journey.version}\t"
                f"{journey.phone_number.phone_number_id}"
            )

    def add_dry_run_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("journey", help="id or name")
        parser.add_argument("--contact", action="append", default=[], help="a phone, repeatable")
        parser.add_argument("--properties", default="{}", help="example event properties (JSON)")

    def handle_dry_run(self, options: dict[str, Any]) -> None:
        journey = _journey(options["journey"])
        try:
            properties = json.loads(options["properties"])
        except ValueError as exc:
            raise CommandError(f"--properties: not JSON ({exc})") from exc
        contacts = list(Contact.objects.filter(phone__in=options["contact"]))
        for person in journey_dry_run(journey, contacts=contacts, properties=properties):
            self.stdout.write(f"{person.contact} ({person.zone})")
            for step in person.steps:
                note = f"  [{step.note}]" if step.note else ""
                self.stdout.write(f"  {step.local}  {step.step}: {step.what}{note}")
