"""Rows of a contact file in batches: phone numbers merged within a batch, COPY payloads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from campaigns.audience.rows import ContactRow, Rejection


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
    # (line, phone, the earlier line it was merged into) for each repeat within the batch.
    repeats: list[tuple[int, str, int]] = field(default_factory=list)
    first_lines: dict[str, int] = field(default_factory=dict)

    def add(self, item: ContactRow | Rejection) -> None:
        self.rows += 1
        if isinstance(item, Rejection):
            self.rejections.append(item)
            return
        seen = self.contacts.get(item.phone)
        if seen is None:
            self.contacts[item.phone] = [item.name, item.attributes]
            self.first_lines[item.phone] = item.line
            return
        self.duplicates += 1
        self.repeats.append((item.line, item.phone, self.first_lines[item.phone]))
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
