"""What a contact file yields: contacts, rejected rows, and the error that stops a file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class ImportFileError(Exception):
    """The file as a whole cannot be imported (empty, unreadable, no phone column...)."""


@dataclass(frozen=True, slots=True)
class ContactRow:
    line: int
    phone: str
    name: str
    attributes: dict[str, str]
    # The row's cells as the file had them: a duplicate the policy rejects goes back to the
    # rejects file with them.
    cells: Sequence[str] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class Rejection:
    line: int
    value: str
    reason: str
    # The row's cells as the file had them: the rejects file gives them back to be fixed.
    cells: tuple[str, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "value": self.value, "reason": self.reason}
