"""Cursor pagination: a page of rows after an opaque cursor, ordered by id.

A cursor is the last id of the previous page, base64url-encoded with a version tag; it is
stable while rows are added or removed (an offset is not), and costs one index range scan
whatever the page number. A cursor that does not decode is a 400 naming the parameter.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from delivery.api.errors import invalid_fields

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_TAG = "v1:"

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    next_cursor: str | None


def cursor_encode(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"{_TAG}{last_id}".encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        text = ""
    if not text.startswith(_TAG) or not text[len(_TAG) :].isdigit():
        raise invalid_fields({"cursor": "Not a cursor this API gave out; start without one."})
    value = int(text[len(_TAG) :])
    if value >= 2**63:
        raise invalid_fields({"cursor": "Not a cursor this API gave out; start without one."})
    return value


def limit_parse(raw: str | None) -> int:
    """``?limit=``: absent means the default; present, it must be a number in range."""
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise invalid_fields({"limit": f"A whole number from 1 to {MAX_LIMIT}."})
    return int(raw)


def page_of(queryset: QuerySet[M], *, cursor: str | None, limit: int) -> Page:
    """The ``limit`` rows after ``cursor`` in id order, and the cursor for the next page."""
    if cursor:
        queryset = queryset.filter(pk__gt=cursor_decode(cursor))
    rows = list(queryset.order_by("pk")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, cursor_encode(rows[-1].pk) if more and rows else None)
