"""manage.py phonenumber add --id PNID --display +15550001 --token TOKEN [...]"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from campaigns.catalogue.numbers import phone_number_add
from delivery.graph_reads import phone_number_graph_read
from whatsblast.management.base import SubcommandCommand

# `--token -`: read the token from stdin, so it stays out of shell history and `ps`.
STDIN = "-"


class Command(SubcommandCommand):
    help = "Business phone numbers."
    subcommands = {"add": "Register a business phone number; prints its phone number id."}

    def add_add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--id",
            dest="phone_number_id",
            required=True,
            metavar="PNID",
            help="Meta's phone number id",
        )
        parser.add_argument("--display", required=True, help="display number, e.g. +15550001")
        parser.add_argument(
            "--token", required=True, help="Cloud API access token; '-' reads it from stdin"
        )
        parser.add_argument(
            "--waba", metavar="WABA_ID", help='WhatsApp Business Account id (default: "default")'
        )
        parser.add_argument("--rate", type=int, default=80, help="msg/s, 1..1000 (default 80)")
        parser.add_argument(
            "--reserve",
            type=float,
            default=0.2,
            help="share of the rate kept for transactional sends (default 0.2)",
        )
        parser.add_argument(
            "--api-base-url", default="", help="overrides WHATSAPP_API_BASE_URL for this number"
        )
        parser.add_argument(
            "--no-read",
            action="store_true",
            help="do not read the number's quality, limit and throughput from Meta now",
        )

    def handle_add(self, options: dict[str, Any]) -> None:
        token = options["token"]
        if token == STDIN:
            token = sys.stdin.readline().strip()
            if not token:
                raise CommandError("no token on stdin")
        number = phone_number_add(
            phone_number_id=options["phone_number_id"],
            display_phone_number=options["display"],
            access_token=token,
            waba_id=options["waba"],
            rate_per_second=options["rate"],
            transactional_reserve=options["reserve"],
            api_base_url=options["api_base_url"],
        )
        if not options["no_read"]:
            read = phone_number_graph_read(phone_number=number)
            number.refresh_from_db()
            if read.ok:
                self.stderr.write(
                    f"read from Meta: {number.display_phone_number} "
                    f"({number.verified_name or 'no name'}, {number.name_status or '?'}), "
                    f"quality {number.quality_rating}, throughput "
                    f"{number.throughput_level or '?'}, limit {number.account.messaging_limit_tier}"
                )
            else:
                self.stderr.write(f"not read from Meta ({read.error}); the token may not work")
        self.stdout.write(number.phone_number_id)
