"""A management command with subcommands: ``manage.py <command> <subcommand> [options]``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from campaigns.audience.rows import ImportFileError


class SubcommandCommand(BaseCommand):
    """Declare ``subcommands = {"name": "one-line help"}``; for each name define
    ``add_<name>_arguments(parser)`` and ``handle_<name>(options)`` (a "-" in the name is
    "_" in the methods').

    Handlers stay thin: parse options, call one service, print. A ``ValidationError`` or
    ``ImportFileError`` from the service becomes a ``CommandError`` (message on stderr,
    exit status 1) instead of a traceback.
    """

    subcommands: ClassVar[dict[str, str]] = {}

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="subcommand", required=True, metavar="SUBCOMMAND", title="subcommands"
        )
        for name, help_text in self.subcommands.items():
            subparser = sub.add_parser(name, help=help_text, description=help_text)
            getattr(self, f"add_{name.replace('-', '_')}_arguments")(subparser)

    def handle(self, *args: Any, **options: Any) -> None:
        handler = getattr(self, f"handle_{options['subcommand'].replace('-', '_')}")
        try:
            handler(options)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from exc
        except ImportFileError as exc:
            raise CommandError(str(exc)) from exc


def validation_message(exc: ValidationError) -> str:
    """One line per problem, prefixed with the field it concerns when there is one."""
    if hasattr(exc, "error_dict"):
        return "; ".join(
            f"{field}: {message}" if field != "__all__" else message
            for field, messages in exc.message_dict.items()
            for message in messages
        )
    return "; ".join(exc.messages)
