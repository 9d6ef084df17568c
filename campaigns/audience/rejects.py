"""The rejected rows of an import, as a CSV a spreadsheet opens safely."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from campaigns.audience.rows import Rejection

# Excel prefixes formulas with these; a rejects file opened in a spreadsheet must not run
# a cell such as "=HYPERLINK(...)" that came from an uploaded file.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: str) -> str:
    """Neutralise a cell a spreadsheet would run as a formula by prefixing ``'``."""
    return "'" + value if value.startswith(_FORMULA_PREFIXES) else value


class RejectsWriter:
    """Every rejected row to a CSV file, safe to open in Excel, that can be fixed and
    uploaded again: line, value, reason, then the row's own columns under the file's own
    header (``columns``), so the fixed file maps like the original."""

    FIXED = ("line", "value", "reason")

    def __init__(self, path: str | Path) -> None:
        self._file = Path(path).open("w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._file)
        self._width: int | None = None

    def columns(self, headers: Iterable[str]) -> None:
        """The file's header; before the first ``write``."""
        names = list(headers)
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
                *(spreadsheet_safe(c) for c in (list(r.cells) + [""] * width)[:width]),
            )
            for r in rejections
        )

    def close(self) -> None:
        if self._width is None:
            self.columns(())
        self._file.close()
