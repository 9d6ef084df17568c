"""manage.py contacts import FILE --list NAME [--region BR]: prints a JSON summary."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from campaigns.audience.importing import IMPORT_BATCH_SIZE, MAX_LISTED_REJECTIONS, contacts_import
from campaigns.models import DuplicatePolicy
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "Contacts and contact lists."
    subcommands = {
        "import": "Import a CSV or XLSX file of contacts into a list; prints a JSON summary.",
    }

    def add_import_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="CSV (, ; or tab separated) or XLSX")
        parser.add_argument(
            "--list",
            dest="list_name",
            required=True,
            metavar="NAME",
            help="contact list to add the contacts to (created if missing)",
        )
        parser.add_argument("--region", help="region for numbers without a country code, e.g. BR")
        parser.add_argument(
            "--phone-column",
            metavar="HEADER",
            help="header of the phone column (default: recognised by name)",
        )
        parser.add_argument(
            "--name-column",
            metavar="HEADER",
            help="header of the name column (default: recognised by name)",
        )
        parser.add_argument(
            "--encoding", help="CSV text encoding (default: UTF-8, else Windows-1252)"
        )
        parser.add_argument(
            "--rejects",
            metavar="FILE",
            help="write every rejected row (line, value, reason, its cells) to this CSV",
        )
        parser.add_argument(
            "--duplicates",
            choices=DuplicatePolicy.values,
            default=DuplicatePolicy.LAST.value,
            help="a number on several rows of the file: the last row wins (its non-blank "
            "cells over the earlier ones'), the first row wins, or every such row is "
            "rejected (default: last)",
        )
        parser.add_argument(
            "--max-rejections",
            type=int,
            default=MAX_LISTED_REJECTIONS,
            metavar="N",
            help="rejected rows listed in the summary",
        )
        parser.add_argument(
            "--batch-size", type=int, default=IMPORT_BATCH_SIZE, help="rows per database batch"
        )

    def handle_import(self, options: dict[str, Any]) -> None:
        result = contacts_import(
            path=options["file"],
            list_name=options["list_name"],
            region=options["region"],
            phone_column=options["phone_column"],
            name_column=options["name_column"],
            encoding=options["encoding"],
            rejects_path=options["rejects"],
            max_listed_rejections=max(options["max_rejections"], 0),
            batch_size=max(options["batch_size"], 1),
            duplicate_policy=options["duplicates"],
        )
        self.stdout.write(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
