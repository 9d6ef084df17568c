"""Contact files (CSV or XLSX) read as a stream of E.164 contacts and rejected rows.

Nothing here touches the database; ``campaigns.services.contacts_import`` writes what this
module yields. Files are read row by row (CSV through ``csv.reader``, XLSX through openpyxl's
read-only mode), so memory does not grow with the file.

Text encoding, decided once per file before any row is read:

1. a UTF-16 byte-order mark → UTF-16;
2. the whole file decodes as UTF-8 → UTF-8 (a leading BOM, as Excel writes, is dropped);
3. otherwise → Windows-1252, which is what Excel on Windows writes for "CSV" and a superset
   of Latin-1's printable range;
4. a file with NUL bytes, or with bytes Windows-1252 leaves undefined, is refused with a
   message asking for "CSV UTF-8". Reading it as Latin-1 would "work" and store garbage.

The check scans the file once in 1 MiB chunks (a 60 MB file costs well under a second), so
an encoding error never surfaces half-way through an import.
"""

from __future__ import annotations

import codecs
import csv
import functools
import io
import json
import queue
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, TextIO, TypeVar, cast

import phonenumbers
from phonenumbers import NumberParseException, PhoneNumberFormat
from phonenumbers.phonemetadata import PhoneMetadata

# What the database's check constraint accepts (campaigns.Contact.phone).
E164_RE = re.compile(r"^\+[1-9][0-9]{6,14}$")

MISSING_PHONE = "missing phone"
INVALID_PHONE = "invalid phone number"
NOT_POSSIBLE = "not a possible number"
NOT_VALID = "not a valid number"

NAME_MAX_LENGTH = 200  # campaigns.Contact.name
REJECTED_VALUE_MAX_LENGTH = 100

# Header spellings (lower-cased, accents and punctuation removed) in order of preference:
# a file with both "whatsapp" and "phone" columns is most likely meant for the first.
PHONE_HEADERS = (
    "whatsapp",
    "whatsappnumber",
    "whatsappphone",
    "wanumber",
    "mobile",
    "mobilephone",
    "mobilenumber",
    "cell",
    "cellphone",
    "celular",
    "movil",
    "portable",
    "handy",
    "msisdn",
    "phone",
    "phonenumber",
    "phoneno",
    "telephone",
    "telefone",
    "telefono",
    "tel",
    "fone",
    "number",
    "numero",
    "contact",
)
NAME_HEADERS = (
    "name",
    "fullname",
    "contactname",
    "nome",
    "nombre",
    "nom",
    "firstname",
    "givenname",
    "primeironome",
)

CSV_DELIMITERS = (",", ";", "\t")
SNIFF_BYTES = 64 * 1024
_SCAN_CHUNK = 1 << 20
_PHONE_LIKE_RE = re.compile(r"^\+?[0-9 ()./-]{6,}$")

# Excel prefixes formulas with these; a rejects file opened in a spreadsheet must not run
# a cell such as "=HYPERLINK(...)" that came from an uploaded file.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


class ImportFileError(Exception):
    """The file as a whole cannot be imported (empty, unreadable, no phone column...)."""


@dataclass(frozen=True, slots=True)
class ContactRow:
    line: int
    phone: str
    name: str
    attributes: dict[str, str]


@dataclass(frozen=True, slots=True)
class Rejection:
    line: int
    value: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "value": self.value, "reason": self.reason}


class PhoneNormaliser:
    """Raw text → E.164 with ``phonenumbers``, or the reason it cannot be.

    Numbers without a leading ``+`` are read as national numbers of ``region``; when that
    fails (or no region was given) and the text is all digits, it is read once more as an
    international number without its ``+`` ("5511999990000").

    ``phonenumbers.parse`` costs ~20 µs, most of an import's CPU. Plain input (``+`` or
    national digits with common separators) takes a shortcut that builds the number from
    the digits and asks only ``is_valid_number`` (~5 µs). The shortcut answers only when it
    can be sure ``parse`` would give the same number; otherwise ``parse`` decides.
    """

    def __init__(self, region: str | None) -> None:
        self.region = region.upper() if region else None
        self.country_code = (
            phonenumbers.country_code_for_region(self.region) if self.region else 0
        ) or None

    def __call__(self, raw: str) -> tuple[str, None] | tuple[None, str]:
        text = raw.strip()
        if not text:
            return None, MISSING_PHONE
        fast = self._fast(text)
        if fast is not None:
            return fast, None
        parsed, reason = self._parse(text, self.region)
        if parsed is None and not text.startswith("+") and _digits_only(text):
            retry, _ = self._parse("+" + text.lstrip("0"), None)
            if retry is not None:
                parsed, reason = retry, None
        if parsed is None:
            return None, reason or INVALID_PHONE
        e164 = phonenumbers.format_number(parsed, PhoneNumberFormat.E164)
        if not E164_RE.match(e164):
            return None, NOT_VALID
        return e164, None

    def _fast(self, text: str) -> str | None:
        compact = text.translate(_SEPARATORS)
        if compact.startswith("+"):
            digits = compact[1:]
            if not (digits.isascii() and digits.isdigit()):
                return None
            country_code, national = _split_country_code(digits)
        elif self.country_code and compact.isascii() and compact.isdigit():
            country_code, national = self.country_code, compact
        else:
            return None
        # A leading 0 is a national or international prefix, or an Italian-style leading
        # zero that phonenumbers keeps apart from the integer: all for ``parse``.
        if not country_code or not national or national[0] == "0":
            return None
        strip_prefix = _national_prefix_pattern(country_code)
        if strip_prefix is not None and strip_prefix.match(national):
            return None  # ``parse`` would strip or rewrite a national prefix here
        number = phonenumbers.PhoneNumber(country_code=country_code, national_number=int(national))
        if not phonenumbers.is_valid_number(number):
            return None  # ``parse`` gives the reason
        e164 = f"+{country_code}{national}"
        return e164 if E164_RE.match(e164) else None

    @staticmethod
    def _parse(text: str, region: str | None) -> tuple[Any, str | None]:
        try:
            parsed = phonenumbers.parse(text, region)
        except NumberParseException:
            return None, INVALID_PHONE
        if phonenumbers.is_valid_number(parsed):
            return parsed, None
        if not phonenumbers.is_possible_number(parsed):
            return None, NOT_POSSIBLE
        return None, NOT_VALID


# Separators people type in phone numbers; anything else (letters, "ext.") goes to ``parse``.
_SEPARATORS = str.maketrans("", "", " -()./\u00a0")


def _split_country_code(digits: str) -> tuple[int | None, str]:
    # Country calling codes are prefix-free, 1 to 3 digits long, and never start with 0.
    if digits.startswith("0"):
        return None, digits
    for length in (1, 2, 3):
        code = int(digits[:length] or 0)
        if code in phonenumbers.COUNTRY_CODE_TO_REGION_CODE:
            return code, digits[length:]
    return None, digits


@functools.cache
def _national_prefix_pattern(country_code: int) -> re.Pattern[str] | None:
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(country_code, ())
    metadata = PhoneMetadata.metadata_for_region_or_calling_code(
        country_code, regions[0] if regions else ""
    )
    pattern = metadata.national_prefix_for_parsing if metadata is not None else None
    return re.compile(pattern) if pattern else None


def _digits_only(text: str) -> bool:
    return bool(text) and all(ch.isdigit() or ch in " ()-./" for ch in text)


def header_key(text: str) -> str:
    """ "Téléphone " → "telephone", "Phone Number" → "phonenumber": for matching only."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed.lower() if ch.isalnum() and ch.isascii())


@dataclass
class Columns:
    """Which cell holds what, decided from the header (or from the first row)."""

    phone: int
    name: int | None
    attributes: list[tuple[int, str]]
    has_header: bool
    headers: list[str] = field(default_factory=list)

    @property
    def phone_header(self) -> str:
        return self.headers[self.phone] if self.has_header else f"column {self.phone + 1}"


def columns_detect(
    first_row: list[str], *, phone_column: str | None = None, name_column: str | None = None
) -> Columns:
    """Pick the phone, name and attribute columns from the first row of the file.

    The first row is a header unless no phone column is named or recognised and one of its
    cells looks like a phone number: then the file has no header and that cell's column is
    the phone column (a bare list of numbers, one per line, imports as it is).
    """
    headers = _unique_headers(first_row)
    keys = [header_key(h) for h in headers]
    phone = _find_column(headers, keys, phone_column, PHONE_HEADERS, "phone")
    has_header = True
    if phone is None:
        looks_like_phone = [i for i, cell in enumerate(first_row) if _PHONE_LIKE_RE.match(cell)]
        if looks_like_phone:
            phone, has_header = looks_like_phone[0], False
        elif len([h for h in first_row if h.strip()]) == 1:
            phone = next(i for i, h in enumerate(first_row) if h.strip())
        else:
            raise ImportFileError(
                "no phone column found among "
                f"{', '.join(repr(h) for h in headers)}; name it with --phone-column"
            )
    if not has_header:
        headers = [f"column_{i + 1}" for i in range(len(first_row))]
        name = _find_column(headers, headers, name_column, (), "name") if name_column else None
    else:
        name = _find_column(headers, keys, name_column, NAME_HEADERS, "name")
    attributes = [(i, h) for i, h in enumerate(headers) if i not in (phone, name)]
    return Columns(phone, name, attributes, has_header, headers)


def _unique_headers(row: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    headers = []
    for i, cell in enumerate(row):
        header = cell.strip() or f"column_{i + 1}"
        count = seen.get(header, 0)
        seen[header] = count + 1
        headers.append(header if count == 0 else f"{header}_{count + 1}")
    return headers


def _find_column(
    headers: list[str],
    keys: list[str],
    given: str | None,
    aliases: tuple[str, ...],
    what: str,
) -> int | None:
    if given:
        for candidates in (headers, keys):
            wanted = given.strip() if candidates is headers else header_key(given)
            if wanted in candidates:
                return candidates.index(wanted)
        raise ImportFileError(
            f"{what} column {given!r} not found among {', '.join(repr(h) for h in headers)}"
        )
    for alias in aliases:
        if alias in keys:
            return keys.index(alias)
    return None


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
                yield Rejection(line, value, reason or INVALID_PHONE)
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
            yield ContactRow(line, phone, name, attributes)


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


def sniff_delimiter(sample: str) -> tuple[str, bool]:
    """The delimiter of the header line, and whether line 1 is Excel's ``sep=`` hint.

    Counts ``,`` ``;`` and tab outside quotes in the first non-empty line; the most frequent
    wins, ``,`` on ties or when none appears (a one-column file).
    """
    lines = sample.lstrip("\ufeff").splitlines()
    if lines and lines[0].lower().startswith("sep=") and len(lines[0]) == 5:
        return lines[0][4], True
    header = next((line for line in lines if line.strip()), "")
    counts = dict.fromkeys(CSV_DELIMITERS, 0)
    quoted = False
    for ch in header:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in counts:
            counts[ch] += 1
    best = max(CSV_DELIMITERS, key=lambda d: counts[d])
    return (best if counts[best] else ","), False


def detect_encoding(path: Path) -> str:
    """See the module docstring: UTF-16 by BOM, else UTF-8, else Windows-1252, else refuse."""
    with path.open("rb") as f:
        head = f.read(4)
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return "utf-16"
        for encoding in ("utf-8-sig", "cp1252"):
            f.seek(0)
            if _decodes(f, encoding):
                return encoding
    raise ImportFileError(
        "the file is not text in UTF-8 or Windows-1252 (binary data or an unknown encoding); "
        'save it as "CSV UTF-8" or name the encoding with --encoding'
    )


def _decodes(f: io.BufferedReader, encoding: str) -> bool:
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        while chunk := f.read(_SCAN_CHUNK):
            if b"\x00" in chunk:
                return False
            decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


# --- batching ---------------------------------------------------------------------------------


@dataclass
class ContactBatch:
    """Up to ``size`` rows of the file, phone numbers merged within the batch.

    ``contacts`` maps E.164 → [name, attributes]; a later row for the same number adds its
    attributes (its values win) and replaces the name unless its own name is blank.
    """

    rows: int = 0
    duplicates: int = 0
    contacts: dict[str, list[Any]] = field(default_factory=dict)
    rejections: list[Rejection] = field(default_factory=list)
    payload: str = ""

    def add(self, item: ContactRow | Rejection) -> None:
        self.rows += 1
        if isinstance(item, Rejection):
            self.rejections.append(item)
            return
        seen = self.contacts.get(item.phone)
        if seen is None:
            self.contacts[item.phone] = [item.name, item.attributes]
            return
        self.duplicates += 1
        if item.name:
            seen[0] = item.name
        if item.attributes:
            seen[1] = {**seen[1], **item.attributes}


def contact_batches(
    items: Iterable[ContactRow | Rejection], *, size: int
) -> Iterator[ContactBatch]:
    batch = ContactBatch()
    for item in items:
        batch.add(item)
        if batch.rows >= size:
            yield batch
            batch = ContactBatch()
    if batch.rows:
        yield batch


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_payload(batch: ContactBatch) -> ContactBatch:
    """Fill ``batch.payload`` with the batch's contacts in COPY text format.

    Columns: phone, name, attributes (JSON). Backslash, tab and line breaks are escaped as
    COPY's text format requires; building this string here keeps the work off the thread
    that talks to the database.
    """
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    lines = [
        f"{phone}\t{name.translate(_COPY_ESCAPES)}\t{dumps(attrs).translate(_COPY_ESCAPES)}\n"
        for phone, (name, attrs) in batch.contacts.items()
    ]
    batch.payload = "".join(lines)
    return batch


# --- rejects file -------------------------------------------------------------------------------


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


# --- read-ahead ---------------------------------------------------------------------------------

T = TypeVar("T")


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


class ReadAhead(Generic[T]):
    """Iterate ``items`` in a background thread, at most ``depth`` items ahead.

    Parsing a file is CPU-bound Python; writing a batch is mostly waiting on PostgreSQL,
    which releases the GIL. Running the two side by side takes the database time off the
    import's wall time while ``depth`` bounds the memory held in between. An exception in
    the producer is raised in the consumer. Use as a context manager: leaving it stops and
    joins the producer, so the file it reads can be closed safely afterwards.
    """

    def __init__(self, items: Iterable[T], *, depth: int = 2) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(items,), name="import-read-ahead", daemon=True
        )
        self._thread.start()

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _produce(self, items: Iterable[T]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            self._put(_Failure(exc))
            return
        self._put(_DONE)

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> Iterator[T]:
        while True:
            item = self._queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield cast(T, item)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
