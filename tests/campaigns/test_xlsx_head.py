"""The XLSX preview reader gives the rows the import (openpyxl) reads, without loading it all."""

from __future__ import annotations

import zipfile
from pathlib import Path

import openpyxl
import pytest

from campaigns.audience.readers import _xlsx_rows
from campaigns.audience.rows import ImportFileError
from campaigns.audience.xlsx_head import xlsx_head


def through_openpyxl(path: Path, rows: int) -> list[list[str]]:
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        found = [
            cells for _, cells in _xlsx_rows(workbook.worksheets[0].iter_rows(values_only=True))
        ]
    finally:
        workbook.close()
    return [_trimmed(r) for r in found[:rows]]


def _trimmed(cells: list[str]) -> list[str]:
    while cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def test_the_first_rows_match_what_the_import_reads(tmp_path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Leads"
    sheet.append(["Name", "Phone", "Score", "VIP", "Note"])
    sheet.append(["Ana", 5511999990001, 4.5, True, None])
    sheet.append([None, None, None, None, None])  # a blank row: skipped
    sheet.append(["Bo", "+55 11 99999-0002", 3, False, "=not a formula"])
    sheet.append(["Çéline", 5511999990003.0, None, None, "multi\nline"])
    sheet["G7"] = "far right"
    for i in range(40):
        sheet.append([f"P{i}", 5511999991000 + i])
    extra = workbook.create_sheet("Other")
    extra.append(["ignored"])
    path = tmp_path / "leads.xlsx"
    workbook.save(path)

    head = xlsx_head(path, rows=8)

    assert [_trimmed(r) for r in head.rows] == through_openpyxl(path, 8)
    assert head.rows[1][:4] == ["Ana", "5511999990001", "4.5", "True"]
    assert head.last_row == 47  # G7, then 40 rows appended after it


def test_a_sheet_written_without_a_dimension_has_no_row_estimate(tmp_path: Path) -> None:
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet()
    sheet.append(["phone"])
    sheet.append([5511999990001])
    path = tmp_path / "w.xlsx"
    workbook.save(path)

    head = xlsx_head(path, rows=5)

    assert head.rows == [["phone"], ["5511999990001"]] and head.last_row is None


def cut_at(xml: bytes, marker: bytes, nth: int) -> bytes:
    """``xml`` up to its ``nth`` ``marker``, then bytes no XML parser takes."""
    at = -1
    for _ in range(nth):
        at = xml.index(marker, at + 1)
    return xml[:at] + b"<<&&not xml at all\x00"


def test_a_large_sheet_is_previewed_without_reading_it_all(tmp_path: Path) -> None:
    """The preview stops reading the sheet once it has its rows, and the shared strings once
    it has the ones those rows use: the same workbook with both parts damaged past their
    100th entry previews alike, while the import (openpyxl) cannot open it."""
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet()
    sheet.append(["name", "phone"])
    for i in range(20_000):
        sheet.append([f"Person {i}", 5511910000000 + i])
    whole = tmp_path / "big.xlsx"
    workbook.save(whole)
    damaged = tmp_path / "damaged.xlsx"
    with zipfile.ZipFile(whole) as source, zipfile.ZipFile(damaged, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = cut_at(data, b"<row ", 100)
            elif item.filename == "xl/sharedStrings.xml":
                data = cut_at(data, b"<si>", 100)
            target.writestr(item, data)

    head = xlsx_head(damaged, rows=11)

    assert head.rows == xlsx_head(whole, rows=11).rows == through_openpyxl(whole, 11)
    assert head.rows[1] == ["Person 0", "5511910000000"] and len(head.rows) == 11
    with pytest.raises(Exception, match=r"(?i)not well-formed|invalid token|syntax"):
        through_openpyxl(damaged, 11)


@pytest.mark.parametrize(
    "content",
    [b"PK\x03\x04 not really a zip", None],
)
def test_not_a_workbook_is_refused(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "bad.xlsx"
    if content is None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("hello.txt", "a zip, but no workbook")
    else:
        path.write_bytes(content)
    with pytest.raises(ImportFileError, match="not a readable XLSX workbook"):
        xlsx_head(path, rows=5)
