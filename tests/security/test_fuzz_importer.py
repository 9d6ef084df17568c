"""Hostile contact files: random CSV/XLSX bytes end in a result or a clear ImportFileError,
never a crash, and formula cells never reach an exported CSV unneutralised."""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaigns.audience.importing import contacts_import
from campaigns.audience.rows import ImportFileError
from campaigns.models import Contact

pytestmark = pytest.mark.django_db(transaction=True)

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
FORMULAS = ("=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3", '@HYPERLINK("http://x")')


def run_import(tmp_path: Path, name: str, data: bytes) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    try:
        return contacts_import(
            path=path, list_name="fuzz", region="BR", rejects_path=tmp_path / "rejects.csv"
        )
    except ImportFileError as exc:
        assert str(exc)  # a clear, non-empty reason
        return exc


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes_as_csv(tmp_path: Path, data: bytes) -> None:
    run_import(tmp_path, "contacts.csv", data)


@FUZZ
@given(
    rows=st.lists(st.lists(st.text(max_size=20), min_size=1, max_size=4), min_size=0, max_size=30),
    delimiter=st.sampled_from([",", ";", "\t"]),
)
def test_random_text_tables_as_csv(tmp_path: Path, rows: list[list[str]], delimiter: str) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter)
    writer.writerow(["phone", "name"])
    writer.writerows(rows)
    result = run_import(
        tmp_path, "contacts.csv", buffer.getvalue().encode("utf-8", "surrogatepass")
    )
    if not isinstance(result, ImportFileError):
        assert result.imported + result.merged + result.rejected == result.rows_total


@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes_as_xlsx(tmp_path: Path, data: bytes) -> None:
    # The format is read from the content, not the name: garbage is refused clearly or
    # read as (empty) text, never a traceback.
    result = run_import(tmp_path, "contacts.xlsx", data)
    if not isinstance(result, ImportFileError):
        assert result.imported == 0


def test_a_zip_bomb_shaped_xlsx_is_refused_clearly(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<nope/>")
        archive.writestr("xl/worksheets/sheet1.xml", "0" * 2_000_000)
    result = run_import(tmp_path, "contacts.xlsx", buffer.getvalue())
    assert isinstance(result, ImportFileError)


def test_formula_injection_is_neutralised_in_the_rejects_export(tmp_path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["phone", "name", "city"])
    writer.writerows([formula, "x", "y"] for formula in FORMULAS)  # rejected: not phones
    writer.writerow(["+5511987654321", '=HYPERLINK("http://evil")', "=1+1"])  # imported
    result = run_import(tmp_path, "contacts.csv", buffer.getvalue().encode())
    assert result.rejected == len(FORMULAS)
    with (tmp_path / "rejects.csv").open(newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    for formula in FORMULAS:
        assert "'" + formula in cells
    # Stored as typed (the database is not a spreadsheet); exports neutralise them.
    assert Contact.objects.get(phone="+5511987654321").name == '=HYPERLINK("http://evil")'
