"""manage.py template add --number PNID --name NAME --language en_US [--body ...]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from campaigns.management.base import SubcommandCommand
from campaigns.models import TemplateCategory, TemplateStatus
from campaigns.services import template_add


class Command(SubcommandCommand):
    help = "Message templates."
    subcommands = {"add": "Record a template of the number's WABA; prints its id."}

    def add_add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--number",
            required=True,
            metavar="PNID",
            help="phone number id whose WABA owns the template",
        )
        parser.add_argument("--name", required=True, help="template name as approved by Meta")
        parser.add_argument("--language", required=True, help="language code, e.g. en_US")
        parser.add_argument(
            "--body", default="", help='body text; "{{1}}".."{{n}}" or "{{name}}" mark its params'
        )
        parser.add_argument(
            "--category",
            default=TemplateCategory.MARKETING,
            type=str.upper,
            choices=TemplateCategory.values,
        )
        parser.add_argument(
            "--status",
            default=TemplateStatus.APPROVED,
            type=str.upper,
            choices=TemplateStatus.values,
        )

    def handle_add(self, options: dict[str, Any]) -> None:
        template = template_add(
            phone_number_id=options["number"],
            name=options["name"],
            language=options["language"],
            body_text=options["body"],
            category=options["category"],
            status=options["status"],
        )
        self.stdout.write(str(template.pk))
