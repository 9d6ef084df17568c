"""``manage.py services status|stop``: the embedded PostgreSQL and Redis.

They start on their own when DATABASE_URL / REDIS_URL are unset and stay up for every
later process; this stops them cleanly (``make demo`` starts them again next time).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from whatsblast.core import embedded


class Command(BaseCommand):
    help = "Show or stop the embedded PostgreSQL and Redis under WHATSBLAST_DATA_DIR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("status", "stop"))

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "stop":
            # Django's own connection would keep PostgreSQL waiting for it.
            from django.db import connections

            connections.close_all()
            stopped = embedded.stop_all(settings.DATA_DIR)
            self.stdout.write(json.dumps({"stopped": stopped}))
        else:
            self.stdout.write(json.dumps(embedded.status(settings.DATA_DIR)))
