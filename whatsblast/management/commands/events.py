"""``manage.py events``: route and deliver events to subscriptions, until stopped.

Any number may run; routing takes turns on an advisory lock and each subscription is
delivered by one worker at a time.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from delivery.events.worker import events_loop, events_pass


class Command(BaseCommand):
    help = "Deliver events to their subscriptions (runs until SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument(
            "--nice",
            type=int,
            default=10,
            help="lower the process's CPU priority by this much (default 10): on a busy host "
            "the senders come first and events wait a moment instead",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            totals = events_pass()
            self.stdout.write(
                f"routed {totals.routed}, delivered {totals.delivered}, "
                f"failed batches {totals.failed_batches}, dead-lettered {totals.dead_lettered}"
            )
            return
        if options["nice"] > 0:
            os.nice(options["nice"])
        running = True

        def stop(*_: object) -> None:
            nonlocal running
            running = False

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        events_loop(running=lambda: running)
