"""manage.py apikey create|revoke|list: keys for the API (/api/v1/), each with its scopes."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from delivery.api.keys import api_key_create, api_key_revoke
from delivery.models import ApiKey, ApiScope
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "API keys for /api/v1 (scopes: send, contacts, campaigns, read)."
    subcommands = {
        "create": "Create a key; prints it once on stdout (only its hash is stored).",
        "revoke": "Revoke a key at once.",
        "list": "List keys: id, prefix, name, scopes, numbers, quota, last use, revoked.",
    }

    def add_create_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="who or what uses the key")
        parser.add_argument(
            "--number",
            action="append",
            default=[],
            metavar="PNID",
            help="phone number id the key may send from (repeatable)",
        )
        parser.add_argument(
            "--all-numbers", action="store_true", help="may use every number, present and future"
        )
        parser.add_argument(
            "--rps", type=int, default=None, help="request quota per second (default: setting)"
        )
        parser.add_argument(
            "--scope",
            action="append",
            choices=ApiScope.values,
            default=None,
            help="what the key may do (repeatable; default send): send, contacts, campaigns, read",
        )
        parser.add_argument("--json", action="store_true", help="print id, prefix and key as JSON")

    def handle_create(self, options: dict[str, Any]) -> None:
        api_key, raw_key = api_key_create(
            name=options["name"],
            phone_number_ids=options["number"],
            all_numbers=options["all_numbers"],
            requests_per_second=options["rps"],
            scopes=options["scope"] or [ApiScope.SEND],
        )
        if options["json"]:
            self.stdout.write(
                json.dumps({"id": api_key.pk, "prefix": api_key.prefix, "key": raw_key})
            )
        else:
            self.stdout.write(raw_key)
        self.stderr.write(
            f"API key {api_key.pk} ({api_key.prefix}) created; the key is shown only this once."
        )

    def add_revoke_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("id", type=int)

    def handle_revoke(self, options: dict[str, Any]) -> None:
        try:
            api_key = api_key_revoke(api_key_id=options["id"])
        except ApiKey.DoesNotExist:
            raise CommandError(f"no API key with id {options['id']}") from None
        self.stdout.write(str(api_key.pk))

    def add_list_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")

    def handle_list(self, options: dict[str, Any]) -> None:
        rows: list[dict[str, Any]] = [
            {
                "id": key.pk,
                "prefix": key.prefix,
                "name": key.name,
                "numbers": "all"
                if key.all_numbers
                else sorted(n.phone_number_id for n in key.phone_numbers.all()),
                "scopes": list(key.scopes),
                "requests_per_second": key.requests_per_second,
                "last_used_at": key.last_used_at.isoformat() if key.last_used_at else None,
                "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
            }
            for key in ApiKey.objects.prefetch_related("phone_numbers").order_by("pk")
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows))
            return
        for row in rows:
            numbers = row["numbers"] if row["numbers"] == "all" else ",".join(row["numbers"])
            state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "active"
            self.stdout.write(
                f"{row['id']}\t{row['prefix']}\t{row['name']}\t{','.join(row['scopes'])}"
                f"\t{numbers or '-'}\t{state}"
            )
