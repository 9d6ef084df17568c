"""``manage.py webhooks apply|stats``: run the applier now, or show the backlog, as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from webhooks.applier import events_drain
from webhooks.selectors import webhook_stats


class Command(BaseCommand):
    help = "Apply stored webhook events now (apply) or print the webhook backlog (stats)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("apply", "stats"))
        parser.add_argument(
            "--budget", type=float, default=None, help="seconds to spend applying (apply)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "apply":
            result: dict[str, Any] = events_drain(budget_seconds=options["budget"]).as_dict()
        else:
            result = webhook_stats()
        self.stdout.write(json.dumps(result))
