"""Rows of a contact file in batches, and their COPY payloads.

Every row goes to the staging table with its line number, and the file's repeated numbers
are found there, across the whole file, in SQL (``campaigns.audience.duplicates``). Under
last row wins, the batch's contacts are also merged here, number by number, for the
batch's own upsert (``campaigns.audience.writer``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from campaigns.audience.rows import ContactRow, Rejection


@dataclass
class ContactBatch:
    """Up to ``size`` rows of the file: the contacts and the rejected rows, in file order."""

    rows: int = 0
    contacts: list[ContactRow] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    # For the staging table: every contact row with its line.
    payload: str = ""
    # Last row wins: the batch's numbers once each, merged (phone, name, attributes).
    merged_payload: str = ""

    def add(self, item: ContactRow | Rejection) -> None:
        self.rows += 1
        if isinstance(item, Rejection):
            self.rejections.append(item)
        else:
            self.contacts.append(item)


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


_COPY_NULL = "\\N"
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_payload(
    batch: ContactBatch, *, with_cells: bool = False, merged: bool = False
) -> ContactBatch:
    """Fill the batch's payloads in COPY text format.

    ``payload``, for the staging table: line, phone, name, attributes (JSON), cells (a JSON
    array of the row's cells with ``with_cells``, else NULL: only a policy that may reject a
    duplicate needs them for the rejects file). With ``merged`` (last row wins) it holds
    line and phone only, and ``merged_payload`` the batch's numbers once each: phone, name,
    attributes, a later row adding its non-blank cells over the earlier ones' and its name
    unless blank. Backslash, tab and line breaks are escaped as COPY's text format
    requires; building the strings here keeps the work off the thread that talks to the
    database.
    """
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    if merged:
        batch.payload = "".join(f"{row.line}\t{row.phone}\n" for row in batch.contacts)
        contacts: dict[str, list[Any]] = {}
        for row in batch.contacts:
            seen = contacts.get(row.phone)
            if seen is None:
                contacts[row.phone] = [row.name, row.attributes]
                continue
            if row.name:
                seen[0] = row.name
            if row.attributes:
                seen[1] = {**seen[1], **row.attributes}
        batch.merged_payload = "".join(
            f"{phone}\t{name.translate(_COPY_ESCAPES)}\t"
            f"{dumps(attributes).translate(_COPY_ESCAPES)}\n"
            for phone, (name, attributes) in contacts.items()
        )
        return batch
    batch.payload = "".join(
        f"{row.line}\t{row.phone}\t{row.name.translate(_COPY_ESCAPES)}\t"
        f"{dumps(row.attributes).translate(_COPY_ESCAPES)}\t"
        f"{dumps(list(row.cells)).translate(_COPY_ESCAPES) if with_cells else _COPY_NULL}\n"
        for row in batch.contacts
    )
    return batch
