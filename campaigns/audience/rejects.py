"""The rejected rows of an import, as a CSV a spreadsheet opens safely."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from campaigns.audience.rows import Rejection

# Excel prefixes formulas with these; a rejects file opened in a spreadsheet must not run
# a cell such as "=HYPERLINK(...)" that came from an uploaded file.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


# "+5511999990001": a phone number in E.164, digits after the plus. A spreadsheet reads it
# as a number, never as a formula, so it is written as it is (prefixed, every phone of an
# export began with a stray ').
_PHONE_RE = re.compile(r"\+[0-9]{1,15}")


def spreadsheet_safe(value: str) -> str:
    """Neutralise a cell a spreadsheet would run as a formula by prefixing ``'``; a phone
    number (``+`` and digits only) is left as it is."""
    if not value.startswith(_FORMULA_PREFIXES) or _PHONE_RE.fullmatch(value):
        return value
    return "'" + value


# The rejects file's own columns, before the rows' own: uploaded again (fixed), a file
# whose header starts with them is recognised as a rejects file (``rejects_own_columns``).
REJECTS_COLUMNS = ("line", "value", "reason", "default_country")


def rejects_own_columns(headers: Sequence[str]) -> int:
    """How many of the first ``headers`` are a rejects file's own columns: 0 for any other
    file. They are never a contact's attributes."""
    names = [h.strip().lower() for h in headers[: len(REJECTS_COLUMNS)]]
    if names[:3] != list(REJECTS_COLUMNS[:3]):
        return 0
    return len(REJECTS_COLUMNS) if names == list(REJECTS_COLUMNS) else 3


def rejects_default_country(headers: Sequence[str], row: Sequence[str]) -> str:
    """The default country of the upload a rejects file came from, read from its first row
    (``row``), or ''."""
    if rejects_own_columns(headers) < len(REJECTS_COLUMNS) or len(row) < len(REJECTS_COLUMNS):
        return ""
    return row[len(REJECTS_COLUMNS) - 1].strip().upper()


class RejectsWriter:
    """Every rejected row to a CSV file, safe to open in Excel, that can be fixed and
    uploaded again: line, value, reason, the upload's default country (``region``, so the
    fixed file is read as the original was), then the row's own columns under the file's
    own header (``columns``), so the fixed file maps like the original."""

    FIXED = REJECTS_COLUMNS

    def __init__(self, path: str | Path, *, region: str | None = None) -> None:
        self._file = Path(path).open("w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._file)
        self._width: int | None = None
        self._region = (region or "").upper()
        self._skip = 0  # a rejects file uploaded again: its own columns are not carried

    def columns(self, headers: Iterable[str]) -> None:
        """The file's header; before the first ``write``."""
        names = list(headers)
        self._skip = rejects_own_columns(names)
        names = names[self._skip :]
        self._width = len(names)
        taken = set(self.FIXED)
        own = []
        for name in names:  # a file's own "reason" column must not shadow ours
            while name in taken:
                name = f"{name} (file)"
            taken.add(name)
            own.append(spreadsheet_safe(name))
        self._writer.writerow((*self.FIXED, *own))

    def write(self, rejections: Iterable[Rejection]) -> None:
        if self._width is None:
            self.columns(())
        width = self._width or 0
        self._writer.writerows(
            (
                r.line,
                spreadsheet_safe(r.value),
                spreadsheet_safe(r.reason),
                self._region,
                *(
                    spreadsheet_safe(c)
                    for c in (list(r.cells)[self._skip :] + [""] * width)[:width]
                ),
            )
            for r in rejections
        )

    def close(self) -> None:
        if self._width is None:
            self.columns(())
        self._file.close()
