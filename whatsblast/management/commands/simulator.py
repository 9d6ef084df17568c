"""``manage.py simulator``: the fake Cloud API as its own process (no database needed)."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from delivery.simulator import SimConfig, Simulator
from delivery.simulator.config import MODES
from delivery.simulator.server import serve


class Command(BaseCommand):
    help = "Run the Cloud API simulator (Graph API routes plus the /_sim/ control API)."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9009, help="0 picks a free port")
        parser.add_argument("--latency-ms", type=float, default=0.0)
        parser.add_argument("--jitter-ms", type=float, default=0.0)
        parser.add_argument("--distribution", choices=("uniform", "normal"), default="uniform")
        parser.add_argument("--mode", choices=MODES, default="normal")
        parser.add_argument("--5xx-fraction", dest="error_5xx_fraction", type=float, default=0)
        parser.add_argument("--timeout-fraction", type=float, default=0.0)
        parser.add_argument("--timeout-hold-s", type=float, default=30.0)
        parser.add_argument("--permanent-fraction", type=float, default=0.0)
        parser.add_argument("--async-failure-fraction", type=float, default=0.0)
        parser.add_argument("--no-pair-limit", action="store_true")
        parser.add_argument("--messaging-limit", type=int, default=None)
        parser.add_argument(
            "--number",
            action="append",
            default=[],
            metavar="PNID:TOKEN[:RATE]",
            help="register a phone number (repeatable)",
        )
        parser.add_argument(
            "--template",
            action="append",
            default=[],
            metavar="NAME:LANG[:BODY_PARAMS]",
            help="register a template with that many positional body params (repeatable)",
        )
        parser.add_argument("--auto-register", action="store_true", help="accept unknown numbers")
        parser.add_argument("--rate", type=float, default=80.0, help="rate of auto-registered")
        parser.add_argument("--callback-url", default=None, help="where status webhooks go")
        parser.add_argument("--app-secret", default=None, help="default WHATSAPP_APP_SECRET")
        parser.add_argument("--waba-id", default=None, help="entry id of status webhooks")
        parser.add_argument("--read-fraction", type=float, default=0.5)
        parser.add_argument("--webhook-batch-size", type=int, default=1)
        parser.add_argument("--record-bodies", type=int, default=10_000, help="bodies kept")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--config", type=Path, help="JSON file: config, numbers, templates")

    def handle(self, *args: Any, **options: Any) -> None:
        simulator = Simulator(self._config(options))
        for spec in options["number"]:
            pnid, token, *rest = spec.split(":")
            simulator.add_number(
                {"phone_number_id": pnid, "access_token": token, "rate": float(rest[0] or 80)}
                if rest
                else {"phone_number_id": pnid, "access_token": token}
            )
        for spec in options["template"]:
            name, language, *rest = spec.split(":")
            count = int(rest[0]) if rest else 0
            simulator.add_template({"name": name, "language": language, "body_params": count})
        if options["config"]:
            extra = json.loads(options["config"].read_text())
            for number in extra.get("numbers", []):
                simulator.add_number(number)
            for template in extra.get("templates", []):
                simulator.add_template(template)
        asyncio.run(self._run(simulator, options["host"], options["port"]))

    def _config(self, options: dict[str, Any]) -> SimConfig:
        changes: dict[str, Any] = {
            "latency_ms": options["latency_ms"],
            "jitter_ms": options["jitter_ms"],
            "latency_distribution": options["distribution"],
            "mode": options["mode"],
            "error_5xx_fraction": options["error_5xx_fraction"],
            "timeout_fraction": options["timeout_fraction"],
            "timeout_hold_s": options["timeout_hold_s"],
            "permanent_fraction": options["permanent_fraction"],
            "async_failure_fraction": options["async_failure_fraction"],
            "pair_limit_enabled": not options["no_pair_limit"],
            "messaging_limit": options["messaging_limit"],
            "auto_register": options["auto_register"],
            "default_rate": options["rate"],
            "callback_url": options["callback_url"],
            "app_secret": options["app_secret"] or settings.WHATSAPP_APP_SECRET or "",
            "read_fraction": options["read_fraction"],
            **({"waba_id": options["waba_id"]} if options["waba_id"] else {}),
            "webhook_batch_size": options["webhook_batch_size"],
            "body_cap": options["record_bodies"],
            "seed": options["seed"],
        }
        if options["config"]:
            changes.update(json.loads(options["config"].read_text()).get("config", {}))
        try:
            return SimConfig().updated(changes)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    async def _run(self, simulator: Simulator, host: str, port: int) -> None:
        runner, bound = await serve(simulator, host=host, port=port)
        # Scripts wait for this line and read the port from it.
        self.stdout.write(f"simulator listening on http://{host}:{bound}")
        self.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
