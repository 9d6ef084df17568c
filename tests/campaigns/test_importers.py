"""The contact file reader: formats, encodings, columns, phone normalisation (no database)."""

from __future__ import annotations

import threading
from pathlib import Path

import openpyxl
import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaigns.audience.batches import contact_batches, copy_payload
from campaigns.audience.encodings import sniff_delimiter
from campaigns.audience.phones import (
    INVALID_PHONE,
    MISSING_PHONE,
    NOT_POSSIBLE,
    NOT_VALID,
    PhoneNormaliser,
)
from campaigns.audience.read_ahead import ReadAhead
from campaigns.audience.readers import ContactReader
from campaigns.audience.rejects import spreadsheet_safe
from campaigns.audience.rows import ContactRow, ImportFileError, Rejection


def read(path: Path, **options: str) -> tuple[ContactReader, list[ContactRow | Rejection]]:
    with ContactReader(path, **options) as reader:
        return reader, list(reader)


def write(tmp_path: Path, content: str | bytes, name: str = "contacts.csv") -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", newline="")
    else:
        path.write_bytes(content)
    return path


def test_good_rows_become_e164_contacts_with_attributes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "Name,Phone,City,Plan\n"
        "Ana,+55 11 99999-0001,São Paulo,gold\n"
        "Bia,(21) 99999-0002,,silver\n"
        ",5511999990003,Recife,\n",
    )
    reader, rows = read(path, region="BR")
    assert rows == [
        ContactRow(2, "+5511999990001", "Ana", {"City": "São Paulo", "Plan": "gold"}),
        ContactRow(3, "+5521999990002", "Bia", {"Plan": "silver"}),
        ContactRow(4, "+5511999990003", "", {"City": "Recife"}),
    ]
    assert reader.describe() == {
        "format": "csv",
        "encoding": "utf-8-sig",
        "delimiter": ",",
        "header": True,
        "phone_column": "Phone",
        "name_column": "Name",
    }


def test_bad_phones_are_rejected_with_line_and_reason(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "phone,name\n+5511999990001,ok\n12,short\nhello,text\n,blank\n+5510999990001,no area\n",
    )
    _, rows = read(path, region="BR")
    assert rows[1:] == [
        Rejection(3, "12", NOT_POSSIBLE),
        Rejection(4, "hello", INVALID_PHONE),
        Rejection(5, "", MISSING_PHONE),
        Rejection(6, "+5510999990001", NOT_VALID),
    ]


def test_without_region_national_numbers_are_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "phone\n(11) 99999-0001\n+5511999990001\n")
    _, rows = read(path)
    assert isinstance(rows[0], Rejection) and rows[0].line == 2
    assert rows[1] == ContactRow(3, "+5511999990001", "", {})


def test_utf8_bom_is_dropped_from_the_header(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufeffphone,nome\n+5511999990001,João\n".encode())
    reader, rows = read(path)
    assert reader.describe()["phone_column"] == "phone"
    assert rows == [ContactRow(2, "+5511999990001", "João", {})]


@pytest.mark.parametrize(
    ("content", "delimiter"),
    [
        ("telefone;nome;cidade\n+5511999990001;Ana;Rio, RJ\n", ";"),
        ("telefone\tnome\tcidade\n+5511999990001\tAna\tRio, RJ\n", "\t"),
        ('telefone,nome,cidade\n+5511999990001,Ana,"Rio, RJ"\n', ","),
        ("sep=;\ntelefone;nome;cidade\n+5511999990001;Ana;Rio, RJ\n", ";"),
    ],
)
def test_delimiter_is_sniffed(tmp_path: Path, content: str, delimiter: str) -> None:
    reader, rows = read(write(tmp_path, content))
    assert reader.delimiter == delimiter
    line = 3 if content.startswith("sep=") else 2
    assert rows == [ContactRow(line, "+5511999990001", "Ana", {"cidade": "Rio, RJ"})]


def test_sniff_ignores_delimiters_inside_quotes() -> None:
    assert sniff_delimiter('"a;b;c";phone,x\n') == (",", False)
    assert sniff_delimiter("phone\n+1\n") == (",", False)


def test_empty_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match="empty"):
        read(write(tmp_path, b""))
    with pytest.raises(ImportFileError, match="empty"):
        read(write(tmp_path, "\ufeff\n\n  \n".encode()))


def test_header_only_file_has_no_rows(tmp_path: Path) -> None:
    _, rows = read(write(tmp_path, "phone,name\n"))
    assert rows == []


def test_one_column_file_with_header(tmp_path: Path) -> None:
    reader, rows = read(write(tmp_path, "celular\n+5511999990001\n\n+5511999990002\n"))
    assert reader.describe()["phone_column"] == "celular"
    assert [r.line for r in rows] == [2, 4]  # the blank line is skipped, not counted


def test_one_column_file_with_unknown_header_uses_that_column(tmp_path: Path) -> None:
    reader, rows = read(write(tmp_path, "contatos\n+5511999990001\n"))
    assert reader.describe()["phone_column"] == "contatos"
    assert rows == [ContactRow(2, "+5511999990001", "", {})]


def test_one_column_file_of_bare_numbers_has_no_header(tmp_path: Path) -> None:
    reader, rows = read(write(tmp_path, "+5511999990001\n11 99999-0002\n"), region="BR")
    assert reader.describe()["header"] is False
    assert [r.phone for r in rows if isinstance(r, ContactRow)] == [
        "+5511999990001",
        "+5511999990002",
    ]
    assert rows[0].line == 1


def test_headerless_file_with_several_columns_keeps_them_as_attributes(tmp_path: Path) -> None:
    _, rows = read(write(tmp_path, "Ana,+5511999990001,gold\n"))
    assert rows == [ContactRow(1, "+5511999990001", "", {"column_1": "Ana", "column_3": "gold"})]


def test_phone_column_is_recognised_in_many_languages(tmp_path: Path) -> None:
    for header in ("Téléphone", "Teléfono", "MSISDN", "WhatsApp Number", "Mobile"):
        reader, _ = read(write(tmp_path, f"id,{header}\n1,+5511999990001\n"))
        assert reader.describe()["phone_column"] == header


def test_whatsapp_column_preferred_over_phone(tmp_path: Path) -> None:
    reader, rows = read(write(tmp_path, "phone,whatsapp\n+5511999990001,+5511999990002\n"))
    assert reader.describe()["phone_column"] == "whatsapp"
    assert rows[0].phone == "+5511999990002"  # type: ignore[union-attr]
    assert rows[0].attributes == {"phone": "+5511999990001"}  # type: ignore[union-attr]


def test_phone_column_can_be_named(tmp_path: Path) -> None:
    path = write(tmp_path, "id,primary,backup\n1,+5511999990001,+5511999990002\n")
    with pytest.raises(ImportFileError, match="no phone column found among 'id', 'primary'"):
        read(path)
    reader, rows = read(path, phone_column="backup")
    assert rows[0].phone == "+5511999990002"  # type: ignore[union-attr]
    with pytest.raises(ImportFileError, match="phone column 'other' not found"):
        read(path, phone_column="other")


def test_duplicate_and_blank_headers_get_distinct_keys(tmp_path: Path) -> None:
    _, rows = read(write(tmp_path, "phone,tag,tag,\n+5511999990001,a,b,c\n"))
    assert rows[0].attributes == {"tag": "a", "tag_2": "b", "column_4": "c"}  # type: ignore[union-attr]


def test_multiline_quoted_field_reports_the_line_the_row_starts_on(tmp_path: Path) -> None:
    path = write(tmp_path, 'phone,note\n+5511999990001,"two\nlines"\nbad,x\n')
    _, rows = read(path)
    assert rows[0] == ContactRow(2, "+5511999990001", "", {"note": "two\nlines"})
    assert rows[1] == Rejection(4, "bad", INVALID_PHONE)


def test_windows_1252_file_is_read_as_such(tmp_path: Path) -> None:
    path = write(tmp_path, "telefone;nome\n+5511999990001;João Ação\n".encode("cp1252"))
    reader, rows = read(path)
    assert reader.encoding == "cp1252"
    assert rows[0].name == "João Ação"  # type: ignore[union-attr]


def test_undecodable_file_is_refused_clearly(tmp_path: Path) -> None:
    # 0x81 and 0x8d are invalid UTF-8 here and undefined in Windows-1252.
    path = write(tmp_path, b"phone,name\n+5511999990001,\x81\x8d\n")
    with pytest.raises(ImportFileError, match='not text in UTF-8 or Windows-1252.*"CSV UTF-8"'):
        read(path)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match="not text"):
        read(write(tmp_path, b"phone\n\x00\x01\x02"))
    with pytest.raises(ImportFileError, match="legacy Excel .xls"):
        read(write(tmp_path, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest"))


def test_utf16_with_bom_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, "phone\tname\n+5511999990001\tZoë\n".encode("utf-16"))
    reader, rows = read(path)
    assert reader.encoding == "utf-16"
    assert rows == [ContactRow(2, "+5511999990001", "Zoë", {})]


def test_encoding_can_be_forced(tmp_path: Path) -> None:
    path = write(tmp_path, "phone,name\n+5511999990001,Zoë\n".encode("latin-1"))
    _, rows = read(path, encoding="latin-1")
    assert rows[0].name == "Zoë"  # type: ignore[union-attr]
    with pytest.raises(ImportFileError, match="unknown encoding"):
        read(path, encoding="klingon")


def test_xlsx_is_read_including_numeric_phone_cells(tmp_path: Path) -> None:
    path = tmp_path / "contacts.xlsx"
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.append(["Nome", "Celular", "Pontos"])
    sheet.append(["Ana", 5511999990001, 10])
    sheet.append(["Bia", "(21) 99999-0002", 2.5])
    sheet.append([None, None, None])
    sheet.append(["Caio", "12", None])
    workbook.save(path)
    reader, rows = read(path, region="BR")
    assert reader.describe()["format"] == "xlsx"
    assert rows == [
        ContactRow(2, "+5511999990001", "Ana", {"Pontos": "10"}),
        ContactRow(3, "+5521999990002", "Bia", {"Pontos": "2.5"}),
        Rejection(5, "12", NOT_POSSIBLE),
    ]


def test_broken_xlsx_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFileError, match="not a readable XLSX"):
        read(write(tmp_path, b"PK\x03\x04garbage", name="broken.xlsx"))


def test_batches_keep_every_row_in_file_order() -> None:
    rows: list[ContactRow | Rejection] = [
        ContactRow(2, "+5511999990001", "Ana", {"city": "SP", "plan": "a"}),
        ContactRow(3, "+5511999990001", "", {"plan": "b"}),
        Rejection(4, "x", INVALID_PHONE),
        ContactRow(5, "+5511999990002", "Bia", {}),
    ]
    (batch,) = contact_batches(rows, size=10)
    # Repeated numbers are resolved across the whole file in SQL, not per batch.
    assert batch.rows == 4
    assert [(r.line, r.phone) for r in batch.contacts] == [
        (2, "+5511999990001"),
        (3, "+5511999990001"),
        (5, "+5511999990002"),
    ]
    assert [r.line for r in batch.rejections] == [4]
    assert [b.rows for b in contact_batches(rows, size=3)] == [3, 1]
    # Last row wins merges the batch's own repeats for its upsert; staging keeps each line.
    copy_payload(batch, merged=True)
    assert batch.payload == "2\t+5511999990001\n3\t+5511999990001\n5\t+5511999990002\n"
    assert batch.merged_payload == (
        '+5511999990001\tAna\t{"city":"SP","plan":"b"}\n+5511999990002\tBia\t{}\n'
    )


def test_copy_payload_escapes_copy_text_format() -> None:
    (batch,) = contact_batches(
        [ContactRow(2, "+5511999990001", "a\tb\\c", {"note": "x\ny"})], size=10
    )
    assert copy_payload(batch).payload == (
        '2\t+5511999990001\ta\\tb\\\\c\t{"note":"x\\\\ny"}\t\\N\n'
    )
    (batch,) = contact_batches(
        [ContactRow(7, "+5511999990001", "a", {}, ["+5511999990001", "a\tb"])], size=10
    )
    assert copy_payload(batch, with_cells=True).payload == (
        '7\t+5511999990001\ta\t{}\t["+5511999990001","a\\\\tb"]\n'
    )


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        ("=1+1", "'=1+1"),
        ("+5511", "+5511"),  # a phone number: + and digits only
        ("+55 11", "'+55 11"),
        ("+1+1", "'+1+1"),
        ("+5511)", "'+5511)"),
        ("-2", "'-2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("ok", "ok"),
        ("", ""),
    ],
)
def test_spreadsheet_safe(value: str, safe: str) -> None:
    assert spreadsheet_safe(value) == safe


def test_read_ahead_hands_producer_errors_to_the_consumer() -> None:
    def produce() -> object:
        yield 1
        raise ValueError("boom")

    seen = []
    with pytest.raises(ValueError, match="boom"), ReadAhead(produce()) as ahead:
        seen.extend(ahead)
    assert seen == [1]


def test_read_ahead_stops_its_producer_when_left_early() -> None:
    produced = []

    def produce() -> object:
        for i in range(1_000_000):
            produced.append(i)
            yield i

    with ReadAhead(produce(), depth=2) as ahead:
        for item in ahead:
            if item == 3:
                break
    assert len(produced) < 10
    assert not any(t.name == "import-read-ahead" and t.is_alive() for t in threading.enumerate())


# --- the E.164 shortcut must agree with phonenumbers.parse -------------------------------------

REGIONS = sorted(phonenumbers.SUPPORTED_REGIONS)


@st.composite
def phone_texts(draw: st.DrawFn) -> tuple[str, str | None]:
    region = draw(st.sampled_from(REGIONS))
    kind = draw(
        st.sampled_from(
            [phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE]
        )
    )
    example = phonenumbers.example_number_for_type(region, kind) or (
        phonenumbers.example_number(region)
    )
    digits = list(phonenumbers.format_number(example, 0)[1:]) if example else ["1"]
    for _ in range(draw(st.integers(0, 3))):
        digits[draw(st.integers(0, len(digits) - 1))] = str(draw(st.integers(0, 9)))
    body = "".join(digits) + draw(st.sampled_from(["", "5", "55"]))
    national = body[len(str(example.country_code)) :] if example else body
    text = draw(
        st.sampled_from(["+" + body, body, national, "0" + national, f"+{body[:2]} {body[2:]}"])
    )
    return text, draw(st.sampled_from([region, None]))


@settings(max_examples=400, deadline=None)
@given(phone_texts())
def test_shortcut_agrees_with_phonenumbers_parse(case: tuple[str, str | None]) -> None:
    text, region = case
    normalise = PhoneNormaliser(region)
    fast = normalise._fast(text)
    if fast is None:
        return  # the shortcut declined; parse decides
    parsed, _ = normalise._parse(text, normalise.region)
    assert parsed is not None, f"{text!r} ({region}) accepted by the shortcut only"
    assert fast == phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def test_shortcut_takes_the_common_cases() -> None:
    normalise = PhoneNormaliser("BR")
    assert normalise._fast("+55 11 99999-0001") == "+5511999990001"
    assert normalise._fast("(11) 99999-0001") == "+5511999990001"
    assert normalise._fast("011 99999-0001") is None  # national prefix: left to parse
    assert normalise("011 99999-0001") == ("+5511999990001", None)


def test_wrong_forced_encoding_is_a_clear_error(tmp_path: Path) -> None:
    rows = "".join(f"+55119999{i:05d},Ana\n" for i in range(5000))
    path = write(tmp_path, ("phone,name\n" + rows + "+5511999990001,Jo\xe3o\n").encode("cp1252"))
    with pytest.raises(ImportFileError, match="not utf-8 text"):
        read(path, encoding="utf-8")
    with (
        pytest.raises(ImportFileError, match=r"near line \d+: not utf-8 text"),
        ContactReader(path, encoding="utf-8") as reader,
    ):
        list(reader)
