"""Cursors that bind their parameters on the server, for the statements that carry arrays.

Django's psycopg backend binds parameters on the client: every element of a
``%s::bigint[]`` is quoted into the SQL text in Python. For the batch statements (a status
update for thousands of messages, a group of webhook bodies) that quoting was a third of
the applier's time. A plain ``psycopg.Cursor`` sends the values separately (``$1``), and
with ``%b`` as binary, dumped by psycopg's C code. The cursor is wrapped as Django wraps its
own, so the query is still logged under DEBUG and counted by ``assertNumQueries``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorWrapper


@contextmanager
def bound_cursor() -> Iterator[CursorWrapper]:
    """A Django cursor over a server-side-binding psycopg cursor on the default connection."""
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    # As Django wraps its own cursors: logged (DEBUG, assertNumQueries) when queries are.
    # (The stubs type the argument as Django's wrapper; Django passes the driver's cursor.)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    wrapped: CursorWrapper = wrap(raw)  # type: ignore[arg-type]
    with wrapped as cursor:
        yield cursor


def array_literal(elements: Iterable[str]) -> str:
    """A PostgreSQL array literal (``{a,b}``) of elements already in literal form.

    Bound as one string, an array costs one quote of one value instead of psycopg dumping
    every element in Python; the batch statements (status updates, webhook bodies) bind
    thousands of elements.
    """
    return "{" + ",".join(elements) + "}"


def array_text(text: str) -> str:
    """One text element of an array literal: double-quoted, backslashes and quotes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jsonb_value(value: Any) -> Any:
    """A jsonb column's value as read by a raw cursor, decoded.

    Django's PostgreSQL backend hands jsonb to raw cursors as text (its JSONField decodes
    it in ``from_db_value``); a cursor outside Django's loaders gives it decoded already.
    """
    return json.loads(value) if isinstance(value, str) else value
