"""manage.py segment create --name N --rules JSON | segment count NAME [--json] | segment list

A segment is a saved rule over contacts, evaluated when used; the rules' JSON is described
in ``delivery/segments/rules.py``. A rule that cannot be used is refused with its path and
what would be right (``rules.all[1].op: 'bigger' does not apply to 'age': use one of …``),
and nothing is saved.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from campaigns.models import Segment
from delivery.segments.rules import RuleError
from delivery.segments.services import segment_match, segment_save
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "Saved rules over contacts: create one, count what it matches, list them."
    subcommands = {
        "create": "Create (or replace) a segment from its rules; prints its id.",
        "count": "How many contacts a segment matches now.",
        "list": "Every segment, with its rules.",
    }

    def add_create_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--rules",
            required=True,
            help='JSON, e.g. {"all": [{"field": "city", "op": "eq", "value": "Recife"}]}',
        )
        parser.add_argument("--description", default="")

    def handle_create(self, options: dict[str, Any]) -> None:
        try:
            segment = segment_save(
                name=options["name"], rules=options["rules"], description=options["description"]
            )
        except RuleError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(segment.pk))

    def add_count_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the segment's name")
        parser.add_argument("--json", action="store_true", help="count and a sample, as JSON")
        parser.add_argument("--sample", type=int, default=5, help="contacts in the sample")

    def handle_count(self, options: dict[str, Any]) -> None:
        segment = Segment.objects.filter(name=options["name"]).first()
        if segment is None:
            raise CommandError(f"no segment is named {options['name']!r}: manage.py segment list")
        try:
            match = segment_match(segment.rules, sample=options["sample"] if options["json"] else 0)
        except RuleError as exc:  # e.g. a list it names was deleted since
            raise CommandError(f"segment {segment.name!r}: {exc}") from exc
        if options["json"]:
            self.stdout.write(json.dumps({"segment": segment.name, **match.as_dict()}))
        else:
            self.stdout.write(f"{match.count:,}")

    def add_list_arguments(self, parser: CommandParser) -> None:
        pass

    def handle_list(self, options: dict[str, Any]) -> None:
        for segment in Segment.objects.all():
            self.stdout.write(f"{segment.pk}\t{segment.name}\t{json.dumps(segment.rules)}")
