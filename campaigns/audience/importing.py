"""Importing a contact file into a list: read, normalise, merge, write in batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import phonenumbers
from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.audience.batches import contact_batches, copy_payload
from campaigns.audience.read_ahead import ReadAhead
from campaigns.audience.readers import ContactReader
from campaigns.audience.rejects import RejectsWriter
from campaigns.audience.rows import Rejection
from campaigns.audience.writer import ContactWriter
from campaigns.models import ContactList

logger = logging.getLogger(__name__)

# Rows per COPY + upsert. 20k rows is ~2 MB of COPY text and ~10 MB of Python objects;
# two batches are parsed ahead while one is written, so an import holds about three.
# Larger batches gain little (the per-batch statements are already a small share).
IMPORT_BATCH_SIZE = 20_000
IMPORT_READ_AHEAD = 2
# The JSON summary lists this many rejected rows; all of them go to --rejects.
MAX_LISTED_REJECTIONS = 1000


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
    # Rows repeating a number an earlier row of the file had (first listed ones): later
    # rows' columns win, a blank name keeps the earlier one.
    repeats: list[dict[str, Any]] = field(default_factory=list)
    repeated: int = 0
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
            "repeated": self.repeated,
            "repeats": self.repeats,
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
    progress: Callable[[int], None] | None = None,
) -> ContactImportResult:
    """Import a CSV/XLSX file of contacts into the list ``list_name`` (created if missing).

    Rows are normalised to E.164 (``region`` for numbers without a country code); a number
    seen before, in this file or in the database, is merged into its contact. Rejected rows
    are counted and listed (the first ``max_listed_rejections``; all of them in
    ``rejects_path`` as CSV). The import is one transaction: a file that turns out to be
    malformed half-way leaves nothing behind.

    ``attribute_columns`` keeps only those of the other columns as contact attributes (all
    of them when ``None``). ``progress`` is called with the rows done so far after each
    batch is written.

    Raises ``ImportFileError`` for a file that cannot be read at all, ``ValidationError``
    for bad arguments.
    """
    started = time.monotonic()
    if region and region.upper() not in phonenumbers.SUPPORTED_REGIONS:
        raise ValidationError(f"unknown region {region!r}: use a two-letter code such as BR")
    list_name = list_name.strip()
    if not list_name:
        raise ValidationError("the list name must not be blank")
    rejects = RejectsWriter(rejects_path) if rejects_path else None
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
                list_id=contact_list.pk, list_name=contact_list.name, file=reader.describe()
            )
            writer = ContactWriter(list_id=contact_list.pk)
            batches = (copy_payload(b) for b in contact_batches(reader, size=batch_size))
            with ReadAhead(batches, depth=IMPORT_READ_AHEAD) as ahead:
                for batch in ahead:
                    inserted, added = writer.write(batch)
                    _tally(result, batch.rows, batch.rejections, inserted, added)
                    result.repeated += len(batch.repeats)
                    more = max(max_listed_rejections - len(result.repeats), 0)
                    result.repeats.extend(
                        {"line": line, "phone": phone, "merged_into_line": first}
                        for line, phone, first in batch.repeats[:more]
                    )
                    room = max_listed_rejections - len(result.rejections)
                    result.rejections.extend(batch.rejections[: max(room, 0)])
                    if rejects is not None:
                        rejects.write(batch.rejections)
                    if progress is not None:
                        progress(result.rows_total)
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


def _tally(
    result: ContactImportResult,
    rows: int,
    rejections: Sequence[Rejection],
    inserted: int,
    added: int,
) -> None:
    result.rows_total += rows
    result.rejected += len(rejections)
    result.imported += inserted
    result.added_to_list += added
