"""The first rows of an XLSX workbook's first sheet, read without opening the workbook.

openpyxl, even in read-only mode, loads every shared string when it opens a workbook:
about 2.5 s per 200,000 text cells, so a million-row sheet would hold an upload request
for many seconds. A preview needs a dozen rows: this reads the sheet's XML as a stream
until it has them, and the shared strings only up to the highest one those rows use.
Cells read as the import reads them (``campaigns.importers``), except dates, shown as
Excel's serial numbers.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from xml.etree import ElementTree as ET

from campaigns.audience.rows import ImportFileError

# Uploaded XML parsed with the standard library (S314 below): ElementTree resolves no external
# entities, and the expat it runs on (2.4+) refuses entity-expansion bombs.

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
DOC_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
DEFAULT_SHEET = "xl/worksheets/sheet1.xml"
_CELL_REF = re.compile(r"^([A-Z]+)(\d+)$")
_DIMENSION = re.compile(r"^[A-Z]+\d+:[A-Z]+(\d+)$")


@dataclass
class XlsxHead:
    rows: list[list[str]]
    # The last row the sheet's <dimension> names, when the writer recorded one (Excel does).
    last_row: int | None


def xlsx_head(path: Path, *, rows: int) -> XlsxHead:
    """The first ``rows`` non-blank rows; ``ImportFileError`` when it is no workbook."""
    try:
        with zipfile.ZipFile(path) as archive:
            sheet = _first_sheet(archive)
            with archive.open(sheet) as stream:
                raw, last_row = _sheet_head(stream, rows)
            wanted = [int(value) for row in raw for kind, value in row.values() if kind == "s"]
            strings = _shared_strings(archive, max(wanted)) if wanted else []
    except ImportFileError:
        raise
    except (zipfile.BadZipFile, KeyError, ET.ParseError, ValueError, OSError) as exc:
        raise ImportFileError(f"not a readable XLSX workbook: {exc}") from exc
    return XlsxHead([_texts(row, strings) for row in raw], last_row)


def _first_sheet(archive: zipfile.ZipFile) -> str:
    workbook = ET.fromstring(archive.read("xl/workbook.xml"))  # noqa: S314
    sheet = workbook.find(f"{MAIN}sheets/{MAIN}sheet")
    if sheet is None:
        raise ImportFileError("the workbook has no worksheet")
    rel_id = sheet.get(f"{DOC_REL}id")
    try:
        rels = ET.fromstring(archive.read("xl/_rels/workbook.xml.rels"))  # noqa: S314
    except KeyError:
        return DEFAULT_SHEET
    for rel in rels.iter(f"{PKG_REL}Relationship"):
        if rel.get("Id") == rel_id:
            target = rel.get("Target", "")
            if target.startswith("/"):
                return target.lstrip("/")
            return posixpath.normpath(posixpath.join("xl", target))
    return DEFAULT_SHEET


def _sheet_head(
    stream: IO[bytes], limit: int
) -> tuple[list[dict[int, tuple[str, str]]], int | None]:
    found: list[dict[int, tuple[str, str]]] = []
    row: dict[int, tuple[str, str]] = {}
    last_row: int | None = None
    for _, element in ET.iterparse(stream, events=("end",)):  # noqa: S314
        tag = element.tag
        if tag == f"{MAIN}dimension":
            match = _DIMENSION.match(element.get("ref", ""))
            last_row = int(match.group(1)) if match else None
        elif tag == f"{MAIN}c":
            row[_column(element.get("r"), len(row))] = _cell(element)
            element.clear()
        elif tag == f"{MAIN}row":
            if any(value.strip() for _, value in row.values()):
                found.append(row)
                if len(found) >= limit:
                    break
            row = {}
            element.clear()
    return found, last_row


def _column(ref: str | None, position: int) -> int:
    match = _CELL_REF.match(ref or "")
    if match is None:
        return position  # writers may leave references out: cells then come in order
    index = 0
    for letter in match.group(1):
        index = index * 26 + (ord(letter) - ord("A") + 1)
    return index - 1


def _cell(element: ET.Element) -> tuple[str, str]:
    kind = element.get("t", "n")
    if kind == "inlineStr":
        return "str", "".join(t.text or "" for t in element.iter(f"{MAIN}t"))
    value = element.find(f"{MAIN}v")
    return kind, (value.text or "") if value is not None else ""


def _shared_strings(archive: zipfile.ZipFile, highest: int) -> list[str]:
    strings: list[str] = []
    with archive.open("xl/sharedStrings.xml") as stream:
        for _, element in ET.iterparse(stream, events=("end",)):  # noqa: S314
            if element.tag == f"{MAIN}si":
                # Rich text comes in runs; phonetic guides (rPh) are not part of the text.
                runs = [r for r in element.iter() if r.tag in (f"{MAIN}t",)]
                phonetic = {id(t) for p in element.iter(f"{MAIN}rPh") for t in p.iter()}
                strings.append("".join(r.text or "" for r in runs if id(r) not in phonetic))
                element.clear()
                if len(strings) > highest:
                    break
    return strings


def _texts(row: dict[int, tuple[str, str]], strings: list[str]) -> list[str]:
    width = max(row) + 1 if row else 0
    cells = [""] * width
    for index, (kind, value) in row.items():
        cells[index] = _text(kind, value, strings)
    return cells


def _text(kind: str, value: str, strings: list[str]) -> str:
    if kind == "s":
        return strings[int(value)] if value else ""
    if kind == "b":
        return "True" if value == "1" else "False"
    if kind == "n" and value:
        number = float(value)
        # As the import: 5511999990000 typed into Excel is a phone number, not a float.
        return str(int(number)) if number.is_integer() else str(number)
    return value.replace("\x00", "")
