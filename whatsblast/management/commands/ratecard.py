"""manage.py ratecard load FILE [--currency USD] | ratecard show

``load`` replaces the rate card with Meta's published per-message rates, read from Meta's
own file (CSV or XLSX, one per currency, linked from "Pricing on the WhatsApp Business
Platform", https://developers.facebook.com/docs/whatsapp/pricing): a header row ``Market,
Currency, Marketing, Utility, Authentication, Authentication-International, Service`` under
a title and effective date, one row per market, then the "Rest of ..." groups and "Other".
Markets become calling-code prefixes (``delivery.campaigns.rate_cards``). A malformed file
changes nothing and the error names its line and column. A sample in that layout, with its
source recorded, is ``delivery/campaigns/fixtures/meta-rate-card-usd-sample.csv``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from campaigns.models import RateCard
from delivery.campaigns.pricing import money_text
from delivery.campaigns.rate_cards import rate_card_load
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "Meta's per-message rates, which price campaigns and their estimates."
    subcommands = {
        "load": "Replace the rate card with Meta's published file (CSV or XLSX).",
        "show": "Print the rate card.",
    }

    def add_load_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="Meta's rate card for one currency, CSV or XLSX")
        parser.add_argument(
            "--currency", default="", help="the card's currency when the file has no column"
        )

    def handle_load(self, options: dict[str, Any]) -> None:
        loaded = rate_card_load(options["file"], currency=options["currency"])
        self.stdout.write(loaded.text())

    def add_show_arguments(self, parser: CommandParser) -> None:
        pass

    def handle_show(self, options: dict[str, Any]) -> None:
        rows = RateCard.objects.order_by("country_prefix", "category")
        if not rows:
            self.stdout.write("No rate card loaded: manage.py ratecard load FILE")
            return
        for row in rows:
            price = money_text(row.price, row.currency)
            self.stdout.write(f"{row.country_prefix:<8} {row.category:<15} {price}")
