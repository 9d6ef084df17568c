"""manage.py roles sync [--json] | roles grant USERNAME ROLE"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from whatsblast.auth.roles import ROLE_PERMISSIONS, role_grant, roles_sync
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "The admin's roles: Marketing, Support and Operators groups."
    subcommands = {
        "sync": "Create the groups and give them the permissions whatsblast.auth.roles names.",
        "grant": "Put a user in a role's group (and make them staff).",
    }

    def add_sync_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle_sync(self, options: dict[str, Any]) -> None:
        report = roles_sync()
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
            return
        for group, count in report.permissions.items():
            self.stdout.write(f"{group}: {count} permissions")
        for group, names in report.missing.items():
            self.stderr.write(f"{group}: not yet in the database: {', '.join(names)}")

    def add_grant_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=list(ROLE_PERMISSIONS))

    def handle_grant(self, options: dict[str, Any]) -> None:
        role_grant(username=options["username"], role=options["role"])
        self.stdout.write(f"{options['username']} is in {options['role']}")
