"""Importing a contact file into a list: read, normalise, stage, resolve duplicates, write."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import phonenumbers
from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.audience.batches import contact_batches, copy_payload
from campaigns.audience.duplicates import (
    duplicates_merged,
    duplicates_rejected,
    duplicates_resolve,
)
from campaigns.audience.read_ahead import ReadAhead
from campaigns.audience.readers import ContactReader
from campaigns.audience.rejects import RejectsWriter
from campaigns.audience.rows import Rejection
from campaigns.audience.writer import ContactWriter, contacts_changed_elsewhere
from campaigns.models import ContactList, DuplicatePolicy

logger = logging.getLogger(__name__)

# Rows per COPY, and file lines per upsert. 20k rows is ~2 MB of COPY text and ~10 MB of
# Python objects; two batches are parsed ahead while one is staged, so an import holds
# about three (the rest of the file waits in the staging table, on the database's side).
# Larger batches gain little (the per-batch statements are already a small share).
IMPORT_BATCH_SIZE = 20_000
IMPORT_READ_AHEAD = 2
# The JSON summary lists this many rejected rows; all of them go to --rejects.
MAX_LISTED_REJECTIONS = 1000
# Contacts on other lists that the import changed: this many are named.
LISTED_CHANGED_ELSEWHERE = 5


@dataclass
class ContactImportResult:
    list_id: int
    list_name: str
    rows_total: int = 0
    imported: int = 0
    merged: int = 0
    rejected: int = 0
    added_to_list: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    duplicate_policy: str = DuplicatePolicy.LAST.value
    # Lines of a number the file has on several rows, merged into the line the policy kept
    # (first listed ones; anywhere in the file). Under the reject policy there are none:
    # every such line is a rejection instead, counted in ``duplicates_rejected`` too.
    repeats: list[dict[str, Any]] = field(default_factory=list)
    repeated: int = 0
    duplicates_rejected: int = 0
    # Existing contacts on other lists whose name or attributes this import changed; the
    # first few named, each with its other lists ({phone, lists}).
    changed_elsewhere: int = 0
    changed_elsewhere_listed: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    file: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return round(self.rows_total / self.seconds, 1) if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "list": self.list_name,
            "list_id": self.list_id,
            "rows_total": self.rows_total,
            "imported": self.imported,
            "merged": self.merged,
            "rejected": self.rejected,
            "added_to_list": self.added_to_list,
            "rejections": [r.as_dict() for r in self.rejections],
            "rejections_truncated": self.rejected > len(self.rejections),
            "duplicate_policy": self.duplicate_policy,
            "repeated": self.repeated,
            "repeats": self.repeats,
            "repeats_truncated": self.repeated > len(self.repeats),
            "duplicates_rejected": self.duplicates_rejected,
            "changed_elsewhere": self.changed_elsewhere,
            "changed_elsewhere_listed": self.changed_elsewhere_listed,
            "seconds": round(self.seconds, 3),
            "rows_per_second": self.rows_per_second,
            "file": self.file,
        }


def contacts_import(
    *,
    path: str | Path,
    list_name: str,
    region: str | None = None,
    phone_column: str | None = None,
    name_column: str | None = None,
    encoding: str | None = None,
    rejects_path: str | Path | None = None,
    max_listed_rejections: int = MAX_LISTED_REJECTIONS,
    batch_size: int = IMPORT_BATCH_SIZE,
    attribute_columns: Sequence[str] | None = None,
    duplicate_policy: DuplicatePolicy | str = DuplicatePolicy.LAST,
    progress: Callable[[int], None] | None = None,
    writing: Callable[[int], None] | None = None,
) -> ContactImportResult:
    """Import a CSV/XLSX file of contacts into the list ``list_name`` (created if missing).

    Rows are normalised to E.164 (``region`` for numbers without a country code). A number
    the file has on several rows, anywhere in the file, is resolved by ``duplicate_policy``:
    ``last`` (the later rows' non-blank cells and name win, merged into one contact),
    ``first`` (the first row alone is written) or ``reject`` (none of its rows is written;
    all are rejected). A number already in the database is merged into its contact.
    Rejected rows are counted and listed (the first ``max_listed_rejections``; all of them
    in ``rejects_path`` as CSV, with their cells to be fixed and uploaded again), and so are
    the lines merged into another. The import is one transaction: a file that turns out to
    be malformed half-way leaves nothing behind.

    ``attribute_columns`` keeps only those of the other columns as contact attributes (all
    of them when ``None``). ``progress`` is called with the rows read so far after each
    batch is staged; ``writing``, for the policies that write only once the whole file is
    read, with the percent of it written: 0 when the repeated numbers start being resolved,
    then after each statement.

    Raises ``ImportFileError`` for a file that cannot be read at all, ``ValidationError``
    for bad arguments.
    """
    started = time.monotonic()
    if region and region.upper() not in phonenumbers.SUPPORTED_REGIONS:
        raise ValidationError(f"unknown region {region!r}: use a two-letter code such as BR")
    try:
        policy = DuplicatePolicy(duplicate_policy)
    except ValueError:
        choices = ", ".join(DuplicatePolicy.values)
        raise ValidationError(
            f"unknown duplicate policy {duplicate_policy!r}: use {choices}"
        ) from None
    list_name = list_name.strip()
    if not list_name:
        raise ValidationError("the list name must not be blank")
    rejects = RejectsWriter(rejects_path, region=region) if rejects_path else None
    try:
        with (
            ContactReader(
                path,
                region=region,
                phone_column=phone_column,
                name_column=name_column,
                encoding=encoding,
            ) as reader,
            transaction.atomic(),
        ):
            if attribute_columns is not None and reader.columns is not None:
                keep = set(attribute_columns)
                reader.columns.attributes = [
                    (at, key) for at, key in reader.columns.attributes if key in keep
                ]
            if rejects is not None and reader.columns is not None:
                # A file without a header gets column_1, column_2...: the fixed file has one.
                rejects.columns(reader.columns.headers)
            contact_list, _ = ContactList.objects.get_or_create(name=list_name)
            result = ContactImportResult(
                list_id=contact_list.pk,
                list_name=contact_list.name,
                file=reader.describe(),
                duplicate_policy=policy.value,
            )
            # Last row wins writes each batch as it comes; the other policies must see the
            # whole file first (campaigns.audience.writer).
            as_read = policy == DuplicatePolicy.LAST
            writer = ContactWriter(list_id=contact_list.pk, as_read=as_read)
            with_cells = policy == DuplicatePolicy.REJECT
            batches = (
                copy_payload(b, with_cells=with_cells, merged=as_read)
                for b in contact_batches(reader, size=batch_size)
            )
            with ReadAhead(batches, depth=IMPORT_READ_AHEAD) as ahead:
                for batch in ahead:
                    _written(result, writer.stage(batch))
                    result.rows_total += batch.rows
                    _reject(result, batch.rejections, rejects, max_listed_rejections)
                    if progress is not None:
                        progress(result.rows_total)
            if writing is not None and not as_read:
                writing(0)
            counts = duplicates_resolve(policy)
            if not as_read:
                for written in writer.write(lines=batch_size, progress=writing):
                    _written(result, written)
            result.repeated = counts.merged
            result.repeats = duplicates_merged(limit=max_listed_rejections)
            result.duplicates_rejected = counts.rejected
            if counts.rejected:
                _reject(result, duplicates_rejected(), rejects, max_listed_rejections)
            result.changed_elsewhere, result.changed_elsewhere_listed = contacts_changed_elsewhere(
                list_id=contact_list.pk, limit=LISTED_CHANGED_ELSEWHERE
            )
    finally:
        if rejects is not None:
            rejects.close()
    result.merged = result.rows_total - result.rejected - result.imported
    result.seconds = time.monotonic() - started
    logger.info(
        "imported %s rows into list %s: %s new, %s merged, %s rejected in %.1fs",
        result.rows_total,
        result.list_id,
        result.imported,
        result.merged,
        result.rejected,
        result.seconds,
    )
    return result


def _written(result: ContactImportResult, written: tuple[int, int]) -> None:
    inserted, added = written
    result.imported += inserted
    result.added_to_list += added


def _reject(
    result: ContactImportResult,
    rejections: Iterable[Rejection],
    rejects: RejectsWriter | None,
    listed: int,
) -> None:
    """Count, list (the first ``listed``) and write rejected rows, a block at a time."""
    items = iter(rejections)
    while block := list(itertools.islice(items, 5000)):
        result.rejected += len(block)
        room = listed - len(result.rejections)
        result.rejections.extend(block[: max(room, 0)])
        if rejects is not None:
            rejects.write(block)
