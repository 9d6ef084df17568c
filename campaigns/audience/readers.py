"""Contact files (CSV or XLSX) read as a stream of E.164 contacts and rejected rows.

Nothing here touches the database; ``campaigns.audience.importing`` writes what this module
yields. Files are read row by row (CSV through ``csv.reader``, XLSX through openpyxl's
read-only mode), so memory does not grow with the file. The encoding is decided once per
file before any row is read (``campaigns.audience.encodings``).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from campaigns.audience.columns import Columns, columns_detect
from campaigns.audience.encodings import SNIFF_BYTES, detect_encoding, sniff_delimiter
from campaigns.audience.phones import INVALID_PHONE, PhoneNormaliser
from campaigns.audience.rows import ContactRow, ImportFileError, Rejection

NAME_MAX_LENGTH = 200  # campaigns.Contact.name
REJECTED_VALUE_MAX_LENGTH = 100


class ContactReader:
    """Iterate a contact file as ``ContactRow`` and ``Rejection`` items, in file order.

    Use as a context manager: opening detects the format, encoding and columns (and raises
    ``ImportFileError`` for a file that cannot be imported), closing releases the file.
    Blank rows are skipped and not counted.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        region: str | None = None,
        phone_column: str | None = None,
        name_column: str | None = None,
        encoding: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.normalise = PhoneNormaliser(region)
        self._phone_column = phone_column
        self._name_column = name_column
        self.encoding = encoding
        self.format = ""
        self.delimiter: str | None = None
        self.columns: Columns | None = None
        self._rows: Iterator[tuple[int, list[str]]] = iter(())
        self._close: Callable[[], None] = lambda: None
        self._pending: tuple[int, list[str]] | None = None

    def __enter__(self) -> ContactReader:
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._close()
        self._close = lambda: None

    def describe(self) -> dict[str, Any]:
        """How the file was read, for the import summary."""
        assert self.columns is not None
        return {
            "format": self.format,
            "encoding": self.encoding,
            "delimiter": self.delimiter,
            "header": self.columns.has_header,
            "phone_column": self.columns.phone_header,
            "name_column": (
                self.columns.headers[self.columns.name] if self.columns.name is not None else None
            ),
        }

    def _open(self) -> None:
        try:
            with self.path.open("rb") as f:
                magic = f.read(8)
        except OSError as exc:
            raise ImportFileError(f"cannot read {self.path}: {exc.strerror}") from exc
        if magic.startswith(b"PK\x03\x04"):
            self._open_xlsx()
        elif magic.startswith(b"\xd0\xcf\x11\xe0"):
            raise ImportFileError(
                "legacy Excel .xls files are not supported; save the sheet as .xlsx or CSV"
            )
        else:
            self._open_csv()
        first = next(self._rows, None)
        if first is None:
            raise ImportFileError("the file is empty: no header and no rows")
        line, cells = first
        self.columns = columns_detect(
            cells, phone_column=self._phone_column, name_column=self._name_column
        )
        if not self.columns.has_header:
            self._pending = (line, cells)

    def _open_csv(self) -> None:
        self.format = "csv"
        if self.encoding is None:
            self.encoding = detect_encoding(self.path)
        try:
            stream: TextIO = self.path.open(encoding=self.encoding, newline="")
        except LookupError as exc:
            raise ImportFileError(f"unknown encoding {self.encoding!r}") from exc
        self._close = stream.close
        try:
            sample = stream.read(SNIFF_BYTES)
        except UnicodeDecodeError as exc:
            raise ImportFileError(f"the file is not {self.encoding} text ({exc.reason})") from exc
        stream.seek(0)
        self.delimiter, skip_first_line = sniff_delimiter(sample)
        if skip_first_line:
            stream.readline()
        reader = csv.reader(stream, delimiter=self.delimiter)
        self._rows = _csv_rows(reader, first_line=2 if skip_first_line else 1)

    def _open_xlsx(self) -> None:
        import openpyxl  # heavy import; only XLSX files need it

        self.format = "xlsx"
        self.encoding = None
        try:
            workbook = openpyxl.load_workbook(self.path, read_only=True, data_only=True)
        except Exception as exc:  # zipfile, KeyError, XML errors: all mean "not a workbook"
            raise ImportFileError(f"not a readable XLSX workbook: {exc}") from exc
        self._close = workbook.close
        sheet = workbook.worksheets[0] if workbook.worksheets else None
        if sheet is None:
            raise ImportFileError("the workbook has no worksheet")
        self._rows = _xlsx_rows(sheet.iter_rows(values_only=True))

    def __iter__(self) -> Iterator[ContactRow | Rejection]:
        columns = self.columns
        if columns is None:
            raise RuntimeError("use ContactReader as a context manager")
        rows: Iterable[tuple[int, list[str]]] = self._rows
        if self._pending is not None:
            rows = _prepend(self._pending, self._rows)
            self._pending = None
        phone_at, name_at, attribute_at = columns.phone, columns.name, columns.attributes
        normalise = self.normalise
        for line, cells in rows:
            width = len(cells)
            raw = cells[phone_at] if phone_at < width else ""
            phone, reason = normalise(raw)
            if phone is None:
                value = raw.strip()[:REJECTED_VALUE_MAX_LENGTH]
                yield Rejection(line, value, reason or INVALID_PHONE, tuple(cells))
                continue
            name = (
                cells[name_at].strip()[:NAME_MAX_LENGTH]
                if name_at is not None and (name_at < width)
                else ""
            )
            attributes = {}
            for at, key in attribute_at:
                if at < width and (value := cells[at].strip()):
                    attributes[key] = value
            yield ContactRow(line, phone, name, attributes, cells)


def _prepend(
    first: tuple[int, list[str]], rest: Iterator[tuple[int, list[str]]]
) -> Iterator[tuple[int, list[str]]]:
    yield first
    yield from rest


def _csv_rows(reader: Any, *, first_line: int) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) for every non-blank row; ``line`` is where the row starts in the file."""
    line = first_line
    try:
        for cells in reader:
            if any(cells) and any(cell.strip() for cell in cells):
                yield line, cells
            line = reader.line_num + 1 + (first_line - 1)
    except csv.Error as exc:
        raise ImportFileError(f"line {line}: malformed CSV ({exc})") from exc
    except UnicodeDecodeError as exc:  # only with a forced --encoding; detection scans first
        raise ImportFileError(f"near line {line}: not {exc.encoding} text ({exc.reason})") from exc


def _xlsx_rows(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[int, list[str]]]:
    for line, values in enumerate(rows, start=1):
        cells = [_xlsx_text(v) for v in values]
        if any(cell.strip() for cell in cells):
            yield line, cells


def _xlsx_text(value: Any) -> str:
    if value is None:
        return ""
    # A phone number typed into Excel is stored as a number: 5511999990000.0 is not text.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).replace("\x00", "")
