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
    """Every rejected row to a CSV file (line, value, reason), safe to open in Excel."""

    def __init__(self, path: str | Path) -> None:
        self._file = Path(path).open("w", encoding="utf-8", newline="")
        self._writer = csv.writer(self._file)
        self._writer.writerow(("line", "value", "reason"))

    def write(self, rejections: Iterable[Rejection]) -> None:
        self._writer.writerows(
            (r.line, spreadsheet_safe(r.value), spreadsheet_safe(r.reason)) for r in rejections
        )

    def close(self) -> None:
        self._file.close()
