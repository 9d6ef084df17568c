"""A file's repeated numbers, found across the whole file in SQL, and the policy applied.

Every row of the file is in the staging table (``campaigns.audience.writer``) with its line
number (under last row wins, only line and phone: its batches were written as they came;
under the other policies, the whole row, before anything is written to the contacts).
Then, once the file is read, in the import's transaction:

- ``duplicates_resolve`` fills ``contact_import_duplicates`` with every line of a number
  the file has more than once, and the line the policy keeps (NULL when it keeps none);
- first row wins and reject: the writer's upsert then skips the lines not kept. Last row
  wins needs no such step: the writer merged each batch as it came
  (``campaigns.audience.writer``), and the table serves the report;
- ``duplicates_merged`` and ``duplicates_rejected`` read back which lines went where, for
  the report and the rejects file. A merged line is listed with the first line of its
  number (the row it repeats), whichever policy kept which.

This stays in PostgreSQL because a file of millions of rows does not fit in the
importer's memory, and the temp tables spill to disk when they must.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection

from campaigns.audience.rows import Rejection
from campaigns.models import DuplicatePolicy
from whatsblast.core.db import jsonb_value

# Only repeated numbers are ever sorted: the hash aggregate over the staged phones (one
# pass, no sort of the million rows) finds the numbers with more than one row, and the
# window then runs over their lines alone — a few percent of the file, usually. The join
# back to the staging table is a hash join on phone over that small set.
#
# The window's frame is the whole partition, so first_value / last_value / array_agg see
# every line of the number, in line order, from each of its rows.
_DUPLICATES_SQL = """
CREATE TEMP TABLE contact_import_duplicates ON COMMIT DROP AS
WITH repeated AS (
    SELECT phone FROM contact_import_staging GROUP BY phone HAVING count(*) > 1
)
SELECT s.line,
       s.phone,
       CASE %(policy)s
           WHEN 'first' THEN first_value(s.line) OVER number
           WHEN 'last' THEN last_value(s.line) OVER number
       END AS kept_line,
       first_value(s.line) OVER number AS first_line,
       (array_agg(s.line) OVER number)[1:6] AS lines,
       count(*) OVER number AS copies
FROM contact_import_staging s JOIN repeated r ON r.phone = s.phone
WINDOW number AS (
    PARTITION BY s.phone ORDER BY s.line
    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
)
"""

_DUPLICATES_INDEX_SQL = "CREATE UNIQUE INDEX ON contact_import_duplicates (line)"

_COUNTS_SQL = """
SELECT count(*) FILTER (WHERE kept_line IS NOT NULL AND line <> first_line),
       count(*) FILTER (WHERE kept_line IS NULL)
FROM contact_import_duplicates
"""

_MERGED_SQL = """
SELECT line, phone, first_line FROM contact_import_duplicates
WHERE kept_line IS NOT NULL AND line <> first_line
ORDER BY line
LIMIT %s
"""

_REJECTED_SQL = """
SELECT d.line, d.phone, d.lines, d.copies, s.cells
FROM contact_import_duplicates d JOIN contact_import_staging s ON s.line = d.line
WHERE d.kept_line IS NULL
ORDER BY d.line
"""

_DROP_SQL = "DROP TABLE IF EXISTS contact_import_duplicates"

# Rejected duplicates are read back this many at a time (a server-side cursor).
_FETCH = 5000


@dataclass(frozen=True)
class DuplicateCounts:
    # Lines after the first of their number, merged into it (first or last row wins).
    merged: int
    # Lines rejected because their number is on several rows (reject policy).
    rejected: int


def duplicates_resolve(policy: DuplicatePolicy) -> DuplicateCounts:
    """Find the staged file's repeated numbers and apply ``policy``; see the module."""
    params = {"policy": str(policy)}
    with connection.cursor() as cursor:
        cursor.execute(_DROP_SQL)
        cursor.execute(_DUPLICATES_SQL, params)
        cursor.execute(_DUPLICATES_INDEX_SQL)
        # Temp tables get no statistics from autovacuum; the upsert's plan needs them.
        cursor.execute("ANALYZE contact_import_duplicates")
        cursor.execute(_COUNTS_SQL)
        merged, rejected = cursor.fetchone()
    return DuplicateCounts(merged=int(merged), rejected=int(rejected))


def duplicates_merged(*, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` lines repeating an earlier line's number, merged into it."""
    with connection.cursor() as cursor:
        cursor.execute(_MERGED_SQL, [limit])
        return [
            {"line": line, "phone": phone, "merged_into_line": kept}
            for line, phone, kept in cursor.fetchall()
        ]


def duplicates_rejected() -> Iterator[Rejection]:
    """Every line rejected for its repeated number, in line order, with its cells."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(_REJECTED_SQL)
        while rows := cursor.fetchmany(_FETCH):
            for line, phone, lines, copies, cells in rows:
                row = tuple(jsonb_value(cells))
                yield Rejection(line, phone, _repeated_reason(line, lines, copies), row)


def _repeated_reason(line: int, lines: list[int], copies: int) -> str:
    others = [str(n) for n in lines if n != line][:5]
    more = copies - 1 - len(others)
    where = ", ".join(others) + (f" and {more} more" if more > 0 else "")
    noun = "line" if copies == 2 else "lines"
    return f"the number is also on {noun} {where}: repeated numbers are rejected"
