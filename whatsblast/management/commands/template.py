"""manage.py template add --number PNID --name NAME --language en_US [--body ...]
    [--header-image|--header-video|--header-document URL] [--quick-reply TEXT ...]
    [--url-button TEXT URL [EXAMPLE_URL] ...] [--phone-button TEXT +PHONE]
manage.py template sync [--waba WABA_ID] [--json]"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from campaigns.catalogue.templates import TemplateExtras, UrlButton, template_add
from campaigns.models import BusinessAccount, HeaderFormat, TemplateCategory, TemplateStatus
from delivery.cloud.template_sync import TemplateSyncReport, templates_sync, templates_sync_all
from whatsblast.management.base import SubcommandCommand


class Command(SubcommandCommand):
    help = "Message templates."
    subcommands = {
        "add": "Record a template of the number's WABA; prints its id.",
        "sync": "Read every template (or one WABA's) from Meta: new, changed, removed upstream.",
    }

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
        header = parser.add_mutually_exclusive_group()
        for media in ("image", "video", "document"):
            header.add_argument(
                f"--header-{media}",
                metavar="URL",
                help=f"{'an' if media == 'image' else 'a'} {media} header; the URL is the example "
                "Meta reviews (https://…)",
            )
        parser.add_argument(
            "--quick-reply",
            dest="quick_replies",
            action="append",
            default=[],
            metavar="TEXT",
            help="a quick-reply button (repeat for each, up to 10 buttons in all)",
        )
        parser.add_argument(
            "--url-button",
            dest="url_buttons",
            action="append",
            default=[],
            nargs="+",
            metavar="TEXT URL [EXAMPLE_URL]",
            help="a URL button; a URL ending in {{1}} takes a value per send and needs "
            "EXAMPLE_URL, the URL with a sample value (at most 2)",
        )
        parser.add_argument(
            "--phone-button",
            dest="phone_buttons",
            action="append",
            default=[],
            nargs=2,
            metavar=("TEXT", "+PHONE"),
            help="a button that calls +PHONE (at most 1)",
        )

    def handle_add(self, options: dict[str, Any]) -> None:
        template = template_add(
            phone_number_id=options["number"],
            name=options["name"],
            language=options["language"],
            body_text=options["body"],
            category=options["category"],
            status=options["status"],
            extras=template_extras(options),
        )
        self.stdout.write(str(template.pk))

    def add_sync_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--waba", metavar="WABA_ID", help="only this business account")
        parser.add_argument("--json", action="store_true", help="print a JSON list of reports")

    def handle_sync(self, options: dict[str, Any]) -> None:
        if options["waba"]:
            account = BusinessAccount.objects.filter(waba_id=options["waba"]).first()
            if account is None:
                raise CommandError(f"no business account with WABA id {options['waba']!r}")
            reports = [templates_sync(account=account)]
        else:
            reports = templates_sync_all()
        if options["json"]:
            self.stdout.write(json.dumps([r.as_dict() for r in reports], indent=2))
        else:
            for report in reports:
                self.stdout.write(sync_text(report))
        failed = [r for r in reports if not r.ok]
        if failed:
            raise CommandError("; ".join(f"WABA {r.waba_id}: {r.error}" for r in failed))


def template_extras(options: dict[str, Any]) -> TemplateExtras:
    """The header and buttons ``template add`` was given."""
    header_format, header_example = HeaderFormat.NONE, ""
    for media in (HeaderFormat.IMAGE, HeaderFormat.VIDEO, HeaderFormat.DOCUMENT):
        if options.get(f"header_{media.lower()}"):
            header_format, header_example = media, options[f"header_{media.lower()}"]
    url_buttons = []
    for values in options["url_buttons"]:
        if len(values) not in (2, 3):
            raise CommandError(
                "--url-button takes TEXT URL and, for a URL ending in {{1}}, EXAMPLE_URL"
            )
        url_buttons.append(UrlButton(*values))
    return TemplateExtras(
        header_format=header_format,
        header_example=header_example,
        quick_replies=list(options["quick_replies"]),
        url_buttons=url_buttons,
        phone_buttons=[(text, phone) for text, phone in options["phone_buttons"]],
    )


def sync_text(report: TemplateSyncReport) -> str:
    if not report.ok:
        return f"WABA {report.waba_id}: sync failed"
    lines = [
        f"WABA {report.waba_id}: {report.listed} templates listed ({report.pages} pages), "
        f"{report.created} new, {report.changed} changed, {report.removed} removed upstream, "
        f"{report.campaigns_paused} campaigns paused"
    ]
    lines.extend(
        f"  {name}: not usable by campaigns: {'; '.join(problems)}"
        for name, problems in sorted(report.unusable.items())
    )
    return "\n".join(lines)
