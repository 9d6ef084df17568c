"""Contact files uploaded in the admin: stored, previewed, mapped, imported in the background.

The steps, each a service the admin views call:

1. ``contact_upload_create``: the file is already on disk (streamed there by the upload
   handler, never held in memory); read its first rows to refuse a bad file at once
   (unreadable encoding, empty, header only) and record it, waiting for the column choice.
2. ``contact_file_preview`` shows the first rows; ``contact_upload_queue`` records the
   phone / name / attribute columns and the default country, and queues the import.
3. ``contact_upload_run`` (the ``contacts_import_job`` on the maintenance queue) runs
   ``campaigns.audience.importing.contacts_import`` and writes progress every batch, the result at
   the end. The browser polls ``contact_upload_progress``; nothing waits on the import.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from campaigns.audience.columns import columns_detect
from campaigns.audience.encodings import SNIFF_BYTES, detect_encoding, sniff_delimiter
from campaigns.audience.importing import contacts_import
from campaigns.audience.rejects import rejects_default_country, rejects_own_columns
from campaigns.audience.rows import ImportFileError
from campaigns.audience.xlsx_head import xlsx_head
from campaigns.models import ContactList, ContactUpload, ContactUploadStatus, DuplicatePolicy
from whatsblast.core import queues
from whatsblast.core.redis import get_redis

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
# Rejected rows listed on the result page; the downloadable CSV has all of them.
LISTED_REJECTIONS = 200
# A running import whose progress has not moved for this long is reported as stalled
# (its worker died): the page says so instead of spinning forever.
STALLED_AFTER = timedelta(minutes=10)
ALLOWED_SUFFIXES = (".csv", ".txt", ".tsv", ".xlsx")
_COUNT_CHUNK = 1 << 20


def upload_dir() -> Path:
    path = Path(settings.CONTACT_UPLOAD_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def stored_suffix(original_name: str) -> str:
    suffix = Path(original_name).suffix.lower()
    return suffix if suffix in ALLOWED_SUFFIXES else ".dat"


# --- preview ----------------------------------------------------------------------------------


@dataclass
class FilePreview:
    """The first rows of a contact file, read the way the import will read them."""

    file_format: str
    has_header: bool
    headers: list[str]
    rows: list[list[str]]
    # Detected by the import's own rules; "" when no column was recognised.
    phone_column: str = ""
    name_column: str = ""
    rows_estimate: int | None = None
    encoding: str | None = None
    delimiter: str | None = None
    other_columns: list[str] = field(default_factory=list)
    # A rejects file uploaded again: the default country of the upload it came from.
    default_country: str = ""
    rejects_file: bool = False


def contact_file_preview(path: Path, *, rows: int = PREVIEW_ROWS) -> FilePreview:
    """Format, header and first ``rows`` rows of the file; ``ImportFileError`` if unreadable."""
    try:
        with path.open("rb") as f:
            magic = f.read(8)
    except OSError as exc:
        raise ImportFileError(f"cannot read the uploaded file: {exc.strerror}") from exc
    if magic.startswith(b"\xd0\xcf\x11\xe0"):
        raise ImportFileError(
            "legacy Excel .xls files are not supported; save the sheet as .xlsx or CSV"
        )
    if magic.startswith(b"PK\x03\x04"):
        preview = _xlsx_preview(path, rows)
    else:
        preview = _csv_preview(path, rows)
    return preview


def _csv_preview(path: Path, limit: int) -> FilePreview:
    encoding = detect_encoding(path)  # scans the whole file: a bad byte is found now
    found: list[list[str]] = []
    with path.open(encoding=encoding, newline="") as stream:
        sample = stream.read(SNIFF_BYTES)
        stream.seek(0)
        delimiter, skip_first_line = sniff_delimiter(sample)
        if skip_first_line:
            stream.readline()
        try:
            for cells in csv.reader(stream, delimiter=delimiter):
                if any(cell.strip() for cell in cells):
                    found.append(cells)
                    if len(found) > limit:
                        break
        except csv.Error as exc:
            raise ImportFileError(f"malformed CSV near row {len(found) + 1} ({exc})") from exc
    preview = _preview_from(found, file_format="csv", limit=limit)
    preview.encoding, preview.delimiter = encoding, delimiter
    preview.rows_estimate = _csv_rows_estimate(path, has_header=preview.has_header)
    return preview


def _xlsx_preview(path: Path, limit: int) -> FilePreview:
    # Not openpyxl: it loads every shared string first (seconds for a large sheet).
    head = xlsx_head(path, rows=limit + 1)
    preview = _preview_from(head.rows, file_format="xlsx", limit=limit)
    if head.last_row:
        preview.rows_estimate = max(0, head.last_row - (1 if preview.has_header else 0))
    return preview


def _preview_from(found: list[list[str]], *, file_format: str, limit: int) -> FilePreview:
    if not found:
        raise ImportFileError("the file is empty: no header and no rows")
    first = found[0]
    try:
        columns = columns_detect(first)
        phone = columns.headers[columns.phone]
    except ImportFileError:
        # No phone column recognised: the uploader picks one. Naming any column gives the
        # header names exactly as the import will see them.
        columns = columns_detect(first, phone_column=next(c for c in first if c.strip()))
        phone = ""
    body = found[1:] if columns.has_header else found
    if columns.has_header and not body:
        raise ImportFileError("the file has a header row but no contacts below it")
    width = len(columns.headers)
    rows = [(cells + [""] * width)[:width] for cells in body[:limit]]
    name = columns.headers[columns.name] if columns.name is not None else ""
    own = rejects_own_columns(columns.headers) if columns.has_header else 0
    country = rejects_default_country(columns.headers, rows[0]) if own else ""
    return FilePreview(
        default_country=country if country in phonenumbers.SUPPORTED_REGIONS else "",
        rejects_file=bool(own),
        file_format=file_format,
        has_header=columns.has_header,
        headers=columns.headers,
        rows=rows,
        phone_column=phone,
        name_column=name,
        # Not the phone's or the name's, nor a rejects file's own (line, value, reason...).
        other_columns=[h for h in columns.headers[own:] if h not in (phone, name)],
    )


def _csv_rows_estimate(path: Path, *, has_header: bool) -> int:
    lines = 0
    last = b"\n"
    with path.open("rb") as f:
        while chunk := f.read(_COUNT_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    if last != b"\n":
        lines += 1
    return max(0, lines - (1 if has_header else 0))


# --- create, queue ---------------------------------------------------------------------------


def contact_upload_create(
    *, contact_list: ContactList, path: Path, original_name: str, user: Any
) -> ContactUpload:
    """Record a stored file for ``contact_list``; a file that cannot be imported is deleted
    and refused with ``ImportFileError`` saying why."""
    path = Path(path)
    if path.parent.resolve() != upload_dir().resolve():
        raise ValueError("uploads must be stored in CONTACT_UPLOAD_DIR")
    try:
        preview = contact_file_preview(path)
    except ImportFileError:
        path.unlink(missing_ok=True)
        raise
    return ContactUpload.objects.create(
        contact_list=contact_list,
        original_name=Path(original_name).name[:255],
        stored_name=path.name,
        size_bytes=path.stat().st_size,
        file_format=preview.file_format,
        rows_estimate=preview.rows_estimate,
        phone_column=preview.phone_column,
        name_column=preview.name_column,
        attribute_columns=preview.other_columns,
        region=preview.default_country,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def contact_upload_preview(*, upload: ContactUpload) -> FilePreview:
    return contact_file_preview(_source_path(upload))


def contact_upload_queue(
    *,
    upload: ContactUpload,
    phone_column: str,
    name_column: str = "",
    region: str = "",
    attribute_columns: list[str] | None = None,
    duplicate_policy: str = DuplicatePolicy.LAST,
) -> ContactUpload:
    """Record the column choice and duplicate policy, and queue the import (after the
    commit)."""
    if upload.status not in (ContactUploadStatus.MAPPING, ContactUploadStatus.FAILED):
        raise ValidationError(f"this upload is already {upload.get_status_display().lower()}")
    if not _source_path(upload).exists():
        raise ValidationError("the uploaded file is gone; upload it again")
    preview = contact_upload_preview(upload=upload)
    errors = _mapping_errors(preview, phone_column, name_column, region, attribute_columns)
    if duplicate_policy not in DuplicatePolicy.values:
        errors["duplicate_policy"] = "Choose what to do with a number on several rows."
    if errors:
        raise ValidationError(errors)
    upload.phone_column = phone_column if preview.has_header else ""
    upload.name_column = name_column
    upload.region = region.upper()
    upload.attribute_columns = (
        preview.other_columns if attribute_columns is None else list(attribute_columns)
    )
    upload.duplicate_policy = duplicate_policy
    upload.status = ContactUploadStatus.QUEUED
    upload.rows_read = 0
    upload.error = ""
    upload.result = {}
    with transaction.atomic():
        upload.save()
        queues.after_commit(
            lambda: _import_enqueue(upload.pk), what=f"import of upload {upload.pk}"
        )
    return upload


def _mapping_errors(
    preview: FilePreview,
    phone_column: str,
    name_column: str,
    region: str,
    attribute_columns: list[str] | None,
) -> dict[str, str]:
    errors: dict[str, str] = {}
    headers = preview.headers
    if preview.has_header and phone_column not in headers:
        errors["phone_column"] = "Choose the column that holds the phone numbers."
    if name_column and name_column not in headers:
        errors["name_column"] = f"No column {name_column!r} in the file."
    elif name_column and name_column == phone_column:
        errors["name_column"] = "The name column cannot be the phone column."
    if region and region.upper() not in phonenumbers.SUPPORTED_REGIONS:
        errors["region"] = f"Unknown country {region!r}: use a two-letter code such as BR."
    unknown = sorted(set(attribute_columns or ()) - set(headers))
    if unknown:
        errors["attribute_columns"] = f"No column(s) {', '.join(unknown)} in the file."
    return errors


# --- run (the job) ----------------------------------------------------------------------------

# Progress is written on a connection of its own: the import is one transaction, and
# anything written through its connection would stay invisible to the page polling it
# until the very end.
_PROGRESS_SQL = """
UPDATE campaigns_contactupload SET rows_read = %s, progress_at = now() WHERE id = %s
"""
_WRITING_SQL = """
UPDATE campaigns_contactupload SET write_percent = %s, progress_at = now() WHERE id = %s
"""


class _ProgressWriter:
    def __init__(self, upload_id: int) -> None:
        self._upload_id = upload_id
        self._connection = connections.create_connection(DEFAULT_DB_ALIAS)

    def __call__(self, rows: int) -> None:
        with self._connection.cursor() as cursor:
            cursor.execute(_PROGRESS_SQL, [rows, self._upload_id])

    def writing(self, percent: int) -> None:
        with self._connection.cursor() as cursor:
            cursor.execute(_WRITING_SQL, [percent, self._upload_id])

    def close(self) -> None:
        self._connection.close()


def contact_upload_run(*, upload_id: int) -> ContactUpload | None:
    """Import a queued upload; ``None`` when it is not queued (a duplicate job)."""
    # Taken by one job only: a second delivery of the same job finds it no longer queued.
    claimed = ContactUpload.objects.filter(pk=upload_id, status=ContactUploadStatus.QUEUED).update(
        status=ContactUploadStatus.RUNNING,
        started_at=timezone.now(),
        progress_at=timezone.now(),
        rows_read=0,
        write_percent=None,
    )
    if not claimed:
        return None
    upload = ContactUpload.objects.select_related("contact_list").get(pk=upload_id)
    source = _source_path(upload)
    rejects_name = f"{Path(upload.stored_name).stem}-rejects.csv"
    progress = _ProgressWriter(upload.pk)
    try:
        result = contacts_import(
            path=source,
            list_name=upload.contact_list.name,
            region=upload.region or None,
            phone_column=upload.phone_column or None,
            name_column=upload.name_column or None,
            attribute_columns=upload.attribute_columns,
            duplicate_policy=upload.duplicate_policy,
            rejects_path=upload_dir() / rejects_name,
            max_listed_rejections=LISTED_REJECTIONS,
            batch_size=settings.CONTACT_IMPORT_BATCH_SIZE,
            progress=progress,
            writing=progress.writing,
        )
    except (ImportFileError, ValidationError) as exc:
        message = str(exc) if isinstance(exc, ImportFileError) else "; ".join(exc.messages)
        return _finish(upload, status=ContactUploadStatus.FAILED, error=message)
    except Exception:
        logger.exception("contact upload %s failed", upload.pk)
        _finish(
            upload,
            status=ContactUploadStatus.FAILED,
            error="The import stopped on an unexpected error; nothing was imported. "
            "The worker's log has the details.",
        )
        raise
    finally:
        progress.close()
    source.unlink(missing_ok=True)  # the contacts are in the database now
    return _finish(
        upload,
        status=ContactUploadStatus.DONE,
        result=result.as_dict(),
        rows_read=result.rows_total,
        rejects_name=rejects_name if result.rejected else "",
    )


def contact_upload_run_report(*, upload_id: int) -> dict[str, Any]:
    """Run a queued upload's import; what it did, for the job's result."""
    upload = contact_upload_run(upload_id=upload_id)
    if upload is None:
        return {"upload": upload_id, "skipped": "not queued"}
    return {"upload": upload_id, "status": upload.status, "rows": upload.rows_read}


def _finish(upload: ContactUpload, **fields: Any) -> ContactUpload:
    if not fields.get("rejects_name"):
        (upload_dir() / f"{Path(upload.stored_name).stem}-rejects.csv").unlink(missing_ok=True)
    fields["finished_at"] = timezone.now()
    ContactUpload.objects.filter(pk=upload.pk).update(**fields)
    upload.refresh_from_db()
    return upload


# --- reading back ---------------------------------------------------------------------------


def contact_upload_progress(*, upload: ContactUpload) -> dict[str, Any]:
    """What the progress bar shows: rows so far against the estimate, and whether it ended.

    A policy that writes only once the whole file is read (first row wins, reject repeated
    numbers) has two stages of the bar: reading the file fills its first half, resolving the
    repeated numbers and writing the contacts its second, and the label names the stage.
    """
    estimate = upload.rows_estimate
    finished = upload.status in (ContactUploadStatus.DONE, ContactUploadStatus.FAILED)
    two_stages = upload.duplicate_policy != DuplicatePolicy.LAST
    writing = upload.status == ContactUploadStatus.RUNNING and upload.write_percent is not None
    if upload.status == ContactUploadStatus.DONE:
        percent: int | None = 100
    elif writing:
        percent = min(99, 50 + int(upload.write_percent or 0) // 2)
    elif estimate:
        # The estimate counts lines; never show 100 % before the import says it is done.
        read = upload.rows_read * 100 / estimate
        percent = min(49, int(read / 2)) if two_stages else min(99, int(read))
    else:
        percent = None
    last_move = upload.progress_at or upload.started_at
    stalled = (
        upload.status == ContactUploadStatus.RUNNING
        and last_move is not None
        and timezone.now() - last_move > STALLED_AFTER
    )
    label = f"{upload.get_status_display()}: {upload.rows_read:,} rows"
    if writing:
        label += (
            " read; resolving the repeated numbers"
            if not upload.write_percent
            else f" read; writing the contacts, {upload.write_percent} % done"
        )
    elif estimate:
        label += f" of about {estimate:,}"
    if percent is not None and not finished:
        label += f" ({percent} %)"
    return {
        "status": upload.status,
        "status_label": upload.get_status_display(),
        "label": label,
        "rows_read": upload.rows_read,
        "rows_estimate": estimate,
        "percent": percent,
        "writing": writing,
        "finished": finished,
        "stalled": stalled,
        "error": upload.error,
    }


def contact_upload_rejects_path(*, upload: ContactUpload) -> Path | None:
    """The CSV of every rejected row (line, value, reason; spreadsheet-safe), if any."""
    if not upload.rejects_name:
        return None
    path = upload_dir() / Path(upload.rejects_name).name
    return path if path.exists() else None


def _source_path(upload: ContactUpload) -> Path:
    return upload_dir() / Path(upload.stored_name).name


# An upload waiting this long with no import job on record lost its job (Redis was away
# when it was queued, or lost it): the tick queues it again.
QUEUED_LOST_AFTER = timedelta(seconds=30)
# While this mark stands an import job is (or was just) on the queue; it outlives the
# longest import the maintenance queue allows.
_IMPORT_MARK_S = 1800


def _import_mark(upload_id: int) -> str:
    return f"wb:upload-import-queued:{upload_id}"


def _import_enqueue(upload_id: int, *, only_if_unmarked: bool = False) -> bool:
    fresh = get_redis().set(_import_mark(upload_id), 1, nx=True, ex=_IMPORT_MARK_S)
    if only_if_unmarked and not fresh:
        return False
    queues.enqueue(queues.CONTACTS_IMPORT, upload_id)
    return True


def contact_uploads_requeue_lost() -> int:
    """Queue again the imports of uploads still waiting with no job on record.

    A duplicate job is harmless: ``contact_upload_run`` takes an upload only while it is
    queued, in one conditional UPDATE.
    """
    waiting = ContactUpload.objects.filter(
        status=ContactUploadStatus.QUEUED, created_at__lte=timezone.now() - QUEUED_LOST_AFTER
    ).values_list("pk", flat=True)
    return sum(_import_enqueue(pk, only_if_unmarked=True) for pk in waiting)


def contact_list_create(*, name: str) -> ContactList:
    """A new, empty contact list to upload into (the upload page names it)."""
    name = name.strip()
    if not name:
        raise ValidationError("A list needs a name.")
    if ContactList.objects.filter(name=name).exists():
        raise ValidationError(f"There is already a list called {name!r}: upload into it.")
    return ContactList.objects.create(name=name)
