"""Admin contact uploads: bad files refused up front, the import run by a job, rejects kept."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from campaigns.audience.importing import contacts_import
from campaigns.audience.rows import ImportFileError
from campaigns.audience.uploads import (
    _ProgressWriter,
    contact_file_preview,
    contact_upload_create,
    contact_upload_progress,
    contact_upload_queue,
    contact_upload_rejects_path,
    upload_dir,
)
from campaigns.models import Contact, ContactUpload, ContactUploadStatus
from tests.engine_support import work_burst
from tests.factories import make_contact_list

pytestmark = pytest.mark.django_db

GOOD_CSV = (
    "Name;WhatsApp;City;Plan\n"
    "Ana;+55 11 99999-0001;Recife;gold\n"
    "Bo;11 99999-0002;Natal;silver\n"
    '=HYPERLINK("http://evil");=1+2;X;Y\n'
    "Cy;not a number;Sousa;\n"
    "Ana again;+5511999990001;Recife;platinum\n"
)


@pytest.fixture(autouse=True)
def uploads(tmp_path: Path, settings: Any) -> Path:
    settings.CONTACT_UPLOAD_DIR = tmp_path / "uploads"
    return upload_dir()


def stored(content: bytes | str, suffix: str = ".csv") -> Path:
    path = upload_dir() / f"{uuid.uuid4().hex}{suffix}"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def test_preview_reads_the_columns_as_the_import_will() -> None:
    preview = contact_file_preview(stored(GOOD_CSV))

    assert preview.has_header and preview.delimiter == ";"
    assert preview.headers == ["Name", "WhatsApp", "City", "Plan"]
    assert (preview.phone_column, preview.name_column) == ("WhatsApp", "Name")
    assert preview.other_columns == ["City", "Plan"]
    assert preview.rows[0] == ["Ana", "+55 11 99999-0001", "Recife", "gold"]
    assert len(preview.rows) == 5 and preview.rows_estimate == 5


def test_a_header_with_no_phone_column_is_previewed_for_the_uploader_to_choose() -> None:
    preview = contact_file_preview(stored("who,digits\nAna,5511999990001\n"))

    assert preview.headers == ["who", "digits"] and preview.phone_column == ""


def test_a_headerless_list_of_numbers_is_recognised() -> None:
    preview = contact_file_preview(stored("+5511999990001,Ana\n+5511999990002,Bo\n"))

    assert not preview.has_header
    assert preview.headers == ["column_1", "column_2"] and preview.phone_column == "column_1"
    assert len(preview.rows) == 2


def test_xlsx_is_previewed_with_numbers_as_typed() -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["phone", "name"])
    sheet.append([5511999990001, "Ana"])
    path = upload_dir() / f"{uuid.uuid4().hex}.xlsx"
    workbook.save(path)

    preview = contact_file_preview(path)

    assert preview.file_format == "xlsx"
    assert preview.rows == [["5511999990001", "Ana"]] and preview.rows_estimate == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"phone,name\n", "header row but no contacts"),
        (b"phone\n\x00\x01\x02\xff\xfe\x00", "not text in UTF-8 or Windows-1252"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1rest", "legacy Excel .xls"),
        (b"PK\x03\x04broken zip", "not a readable XLSX workbook"),
    ],
)
def test_a_bad_file_is_refused_with_a_clear_message_and_deleted(
    content: bytes, message: str, django_user_model: Any
) -> None:
    path = stored(content)
    with pytest.raises(ImportFileError, match=message):
        contact_upload_create(
            contact_list=make_contact_list(), path=path, original_name="x.csv", user=None
        )
    assert not path.exists()
    assert not ContactUpload.objects.exists()


def test_the_column_choice_is_checked(django_user_model: Any) -> None:
    upload = contact_upload_create(
        contact_list=make_contact_list(), path=stored(GOOD_CSV), original_name="a.csv", user=None
    )
    assert (upload.status, upload.phone_column, upload.rows_estimate) == ("mapping", "WhatsApp", 5)

    with pytest.raises(ValidationError) as error:
        contact_upload_queue(
            upload=upload,
            phone_column="Phone",
            name_column="WhatsApp",
            region="XX",
            attribute_columns=["City", "Zip"],
        )

    assert set(error.value.message_dict) == {
        "phone_column",
        "region",
        "attribute_columns",
    }
    upload.refresh_from_db()
    assert upload.status == "mapping"


@pytest.mark.django_db(transaction=True)
def test_the_job_imports_keeps_the_chosen_attributes_and_the_rejects(
    django_user_model: Any,
) -> None:
    user = django_user_model.objects.create_user("mia", password="pw")
    contact_list = make_contact_list(name="leads")
    upload = contact_upload_create(
        contact_list=contact_list, path=stored(GOOD_CSV), original_name="leads.csv", user=user
    )
    source = upload_dir() / upload.stored_name
    contact_upload_queue(
        upload=upload,
        phone_column="WhatsApp",
        name_column="Name",
        region="BR",
        attribute_columns=["City"],
    )

    work_burst("maintenance")

    upload.refresh_from_db()
    assert upload.status == ContactUploadStatus.DONE, upload.error
    assert (upload.result["imported"], upload.result["merged"], upload.result["rejected"]) == (
        2,
        1,
        2,
    )
    assert upload.rows_read == 5 and upload.created_by == user
    ana = Contact.objects.get(phone="+5511999990001")
    assert (ana.name, ana.attributes) == ("Ana again", {"City": "Recife"})
    assert set(contact_list.contacts.values_list("phone", flat=True)) == {
        "+5511999990001",
        "+5511999990002",
    }
    assert not source.exists()
    rejects = contact_upload_rejects_path(upload=upload)
    assert rejects is not None
    rows = list(csv.reader(rejects.open(encoding="utf-8")))
    assert rows[0][:3] == ["line", "value", "reason"] and len(rows[0]) > 3
    assert rows[1][:3] == ["4", "'=1+2", "invalid phone number"]  # formula neutralised
    assert rows[2][1:3] == ["not a number", "invalid phone number"]
    assert contact_upload_progress(upload=upload)["percent"] == 100


@pytest.mark.django_db(transaction=True)
def test_a_file_gone_before_the_job_ends_the_upload_as_failed_with_the_reason() -> None:
    upload = contact_upload_create(
        contact_list=make_contact_list(), path=stored(GOOD_CSV), original_name="a.csv", user=None
    )
    contact_upload_queue(upload=upload, phone_column="WhatsApp")
    (upload_dir() / upload.stored_name).unlink()

    work_burst("maintenance")

    upload.refresh_from_db()
    assert upload.status == ContactUploadStatus.FAILED
    assert upload.error.startswith("cannot read")
    progress = contact_upload_progress(upload=upload)
    assert progress["finished"] and progress["error"] == upload.error


@pytest.mark.django_db(transaction=True)
def test_progress_is_visible_while_the_import_transaction_is_open() -> None:
    upload = contact_upload_create(
        contact_list=make_contact_list(), path=stored(GOOD_CSV), original_name="a.csv", user=None
    )
    writer = _ProgressWriter(upload.pk)
    observer = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with transaction.atomic():  # as contacts_import holds one for the whole file
            writer(40_000)
            with observer.cursor() as cursor:
                cursor.execute(
                    "SELECT rows_read FROM campaigns_contactupload WHERE id = %s", [upload.pk]
                )
                assert cursor.fetchone()[0] == 40_000
    finally:
        writer.close()
        observer.close()


def test_a_first_wins_import_reports_its_write_stage_after_reading_the_whole_file() -> None:
    lines = ["phone"] + [f"+5511900{n:06d}" for n in range(1, 1001)] + ["+5511900000001"]
    read: list[int] = []
    written: list[int] = []
    events: list[str] = []

    def reading(rows: int) -> None:
        read.append(rows)
        events.append("read")

    def writing(percent: int) -> None:
        written.append(percent)
        events.append("write")

    result = contacts_import(
        path=stored("\n".join(lines) + "\n"),
        list_name="two stages",
        duplicate_policy="first",
        batch_size=100,
        progress=reading,
        writing=writing,
    )

    assert (result.imported, result.repeated) == (1000, 1)
    assert read[-1] == 1001 and len(read) >= 10
    # Every row is read before anything is written; then 0 (resolving), then up to 100.
    assert events.index("write") == len(read)
    assert written[0] == 0 and written[-1] == 100 and len(written) >= 10
    assert written == sorted(written)


def test_a_last_wins_import_has_no_write_stage() -> None:
    written: list[int] = []
    contacts_import(
        path=stored(GOOD_CSV), list_name="one stage", phone_column="WhatsApp",
        writing=written.append,
    )  # fmt: skip
    assert written == []


def test_the_bar_of_a_two_stage_import_fills_its_halves_in_turn() -> None:
    upload = contact_upload_create(
        contact_list=make_contact_list(), path=stored(GOOD_CSV), original_name="a.csv", user=None
    )

    def shown(**fields: Any) -> dict[str, Any]:
        ContactUpload.objects.filter(pk=upload.pk).update(**fields)
        upload.refresh_from_db()
        return contact_upload_progress(upload=upload)

    running = {"status": ContactUploadStatus.RUNNING, "rows_estimate": 2000}
    # Last row wins writes as it reads: the whole bar is the reading.
    last = shown(duplicate_policy="last", rows_read=1000, write_percent=None, **running)
    assert (last["percent"], last["writing"]) == (50, False)
    assert last["label"] == "Importing: 1,000 rows of about 2,000 (50 %)"

    reading = shown(duplicate_policy="first", rows_read=1000, **running)
    assert (reading["percent"], reading["writing"]) == (25, False)
    all_read = shown(rows_read=2100)  # the estimate counts lines: it can fall short
    assert all_read["percent"] == 49
    resolving = shown(write_percent=0)
    assert (resolving["percent"], resolving["writing"]) == (50, True)
    assert resolving["label"] == "Importing: 2,100 rows read; resolving the repeated numbers (50 %)"
    writing = shown(duplicate_policy="reject", write_percent=60)
    assert writing["percent"] == 80
    assert writing["label"] == "Importing: 2,100 rows read; writing the contacts, 60 % done (80 %)"
    assert shown(write_percent=100)["percent"] == 99  # 100 only once the import is done
    done = shown(status=ContactUploadStatus.DONE)
    assert (done["percent"], done["writing"], done["finished"]) == (100, False, True)
