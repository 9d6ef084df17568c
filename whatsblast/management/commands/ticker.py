"""``manage.py ticker``: enqueue the maintenance pass every few seconds, forever.

The ticker holds no state: everything it starts is rebuilt from PostgreSQL, so after a
Redis restart (queues, leases and schedules gone) the next tick puts every running
campaign back in motion. Several tickers may run; a Redis key lets one tick through per
interval.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from redis.exceptions import RedisError

from whatsblast.core import queues
from whatsblast.core.redis import get_redis
from whatsblast.tick import maintenance_tick


class Command(BaseCommand):
    help = "Enqueue the maintenance pass (reconcile, schedules, kicks) every --every seconds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--every", type=float, default=2.0, help="seconds between ticks")
        parser.add_argument("--once", action="store_true", help="run one pass in-process")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            self.stdout.write(str(maintenance_tick()))
            return
        every: float = options["every"]
        running = True

        def stop(*_: object) -> None:
            nonlocal running
            running = False

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while running:
            try:
                if get_redis().set("wb:tick", 1, nx=True, px=int(every * 1000)):
                    queues.enqueue(queues.MAINTENANCE_TICK, timeout_s=max(60, int(every * 10)))
            except RedisError as exc:
                self.stderr.write(f"ticker: Redis unavailable ({exc}); retrying")
            time.sleep(every)
