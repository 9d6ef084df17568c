"""Bulk writes of imported contacts: COPY into a staging table, then set-based upserts.

Every batch of the file is COPied into the staging table with its line numbers as it is
read, and the contacts are upserted from it one range of lines at a time, each statement
also adding them to the list. COPY moves ~100k rows/s where row-by-row INSERTs move a few
thousand, and the set-based statements let PostgreSQL do the merging with its unique
indexes instead of a round trip per contact.

When the upserts run depends on the duplicate policy (``campaigns.audience.duplicates``):

- last row wins: each batch right after its COPY (``stage``), while the next batches are
  parsed, so the database's time hides behind the parsing. The batch's own repeats are
  merged in Python (``copy_payload``) and its numbers upserted from a small batch table;
  a later batch's row merges into the contact an earlier one wrote exactly as the
  file-wide rule says (non-blank name and cells win), so nothing needs the whole file
  first. The staging table then holds only (line, phone): the repeated rows are found in
  it at the end, for the report.
- first row wins, reject: only once the whole file is staged and its repeated numbers
  resolved (``write``): whether a row may be written depends on rows further down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection

from campaigns.audience.batches import ContactBatch

# Session-private, gone at commit; dropped first, so a second import in the same
# transaction (as tests do) starts empty. ``cells`` only under the reject policy.
DROP_STAGING_SQL = "DROP TABLE IF EXISTS contact_import_staging"
CREATE_STAGING_SQL = """
CREATE TEMP TABLE contact_import_staging (
    line integer NOT NULL,
    phone text NOT NULL,
    name text NOT NULL DEFAULT '',
    attributes jsonb NOT NULL DEFAULT '{}',
    cells jsonb
) ON COMMIT DROP
"""
# Last row wins: one batch's numbers, merged, for its upsert; emptied for each batch.
DROP_BATCH_SQL = "DROP TABLE IF EXISTS contact_import_batch"
CREATE_BATCH_SQL = """
CREATE TEMP TABLE contact_import_batch (
    phone text NOT NULL,
    name text NOT NULL,
    attributes jsonb NOT NULL
) ON COMMIT DROP
"""
# Each upsert reads a range of lines.
INDEX_STAGING_SQL = "CREATE INDEX ON contact_import_staging (line)"
# The existing contacts whose name or attributes an upsert changed: the result names those
# that are also on other lists (a shared contact renamed from this list's file).
DROP_CHANGED_SQL = "DROP TABLE IF EXISTS contact_import_changed"
CREATE_CHANGED_SQL = """
CREATE TEMP TABLE contact_import_changed (id bigint PRIMARY KEY) ON COMMIT DROP
"""

# Imports run one at a time. Each holds the row locks of every contact it touched until it
# commits; two imports of overlapping files, batch by batch in different orders, would each
# wait for a row the other holds and PostgreSQL would abort one of them as a deadlock.
# A transaction-scoped advisory lock queues the second import behind the first instead.
# Other writers of many contacts at once (the API's batches) hold the same lock shared
# (``import_lock_share``): they run side by side, and never beside an import, whose
# batches lock rows out of their order.
_IMPORT_LOCK_KEY = "hashtext('campaigns.contacts_import')"
IMPORT_LOCK_SQL = f"SELECT pg_advisory_xact_lock({_IMPORT_LOCK_KEY})"
_IMPORT_LOCK_SHARE_SQL = f"SELECT pg_try_advisory_xact_lock_shared({_IMPORT_LOCK_KEY})"
_IMPORT_LOCK_POLL_S = 0.1


def import_lock_share(*, wait_s: float) -> bool:
    """Hold the import lock shared until the transaction ends, so no import writes contacts
    meanwhile; ``False`` when an import still held it after ``wait_s`` (nothing held then).
    Polled rather than waited on: a wait that timed out would abort the caller's
    transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError(
            "import_lock_share holds its lock until commit: call it in a transaction"
        )
    deadline = time.monotonic() + wait_s
    with connection.cursor() as cursor:
        while True:
            cursor.execute(_IMPORT_LOCK_SHARE_SQL)
            if cursor.fetchone()[0]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_IMPORT_LOCK_POLL_S)


COPY_SQL = "COPY contact_import_staging (line, phone, name, attributes, cells) FROM STDIN"
# Last row wins stages only where each number is; the contacts go through the batch table.
COPY_LINES_SQL = "COPY contact_import_staging (line, phone) FROM STDIN"
COPY_BATCH_SQL = "COPY contact_import_batch (phone, name, attributes) FROM STDIN"

# One statement per range of lines: upsert the contacts, then add every one of them to the
# list. ``{chosen}`` names the CTEs that pick the range's rows (below), ending in ``chosen``.
#
# Each number appears once in ``chosen``, so ON CONFLICT never meets the same target row
# twice, which PostgreSQL would refuse, and "new contacts" counts each number once.
#
# An existing contact keeps its name unless the file brings a non-blank one, and gains the
# file's attributes (jsonb ||: the file's value wins key by key); updated_at moves only when
# one of them changed.
#
# The conflict branch always updates (there is no WHERE) so that RETURNING yields the id of
# every staged contact, new or existing, and the list membership is inserted straight from
# those ids. The alternative, skipping unchanged rows and joining the staging table back to
# campaigns_contact by phone, let the planner hash-join against a sequential scan of the
# whole contacts table on every batch: fine at 100k contacts, ruinous at 10M. The price is a
# new row version per existing contact when a file is re-imported.
#
# ORDER BY phone: inserts walk the unique index in order (better page locality), and two
# imports touching the same numbers take their row locks in the same order, so they wait
# for each other instead of deadlocking.
#
# xmax = 0 holds only for a row version this statement inserted; it is how an upsert's
# RETURNING tells an insert from an update. An updated contact whose updated_at is now the
# transaction's now() had its name or attributes changed (by this import).
_UPSERT_TEMPLATE = """
WITH {chosen},
upserted AS (
    INSERT INTO campaigns_contact AS c (phone, name, attributes, created_at, updated_at)
    SELECT s.phone, s.name, s.attributes, now(), now()
    FROM chosen s
    ORDER BY s.phone
    ON CONFLICT (phone) DO UPDATE
        SET name = CASE WHEN EXCLUDED.name <> '' THEN EXCLUDED.name ELSE c.name END,
            attributes = c.attributes || EXCLUDED.attributes,
            updated_at = CASE
                WHEN (EXCLUDED.name <> '' AND EXCLUDED.name <> c.name)
                  OR NOT c.attributes @> EXCLUDED.attributes
                THEN EXCLUDED.updated_at
                ELSE c.updated_at
            END
    RETURNING c.id, (c.xmax = 0) AS inserted,
              (c.xmax <> 0 AND c.updated_at = now()) AS changed
),
changed AS (
    INSERT INTO contact_import_changed (id)
    SELECT u.id FROM upserted u WHERE u.changed
    ON CONFLICT DO NOTHING
),
added AS (
    INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
    SELECT %(list_id)s, u.id, now() FROM upserted u
    ON CONFLICT (contact_list_id, contact_id) DO NOTHING
    RETURNING 1
)
SELECT
    (SELECT count(*) FROM upserted WHERE inserted),
    (SELECT count(*) FROM added)
"""

# Last row wins, one batch: its numbers once each, merged in Python as the batch was
# parsed (``copy_payload``). Across batches the upsert itself merges the same way.
MERGED_UPSERT_SQL = _UPSERT_TEMPLATE.format(
    chosen="chosen AS (SELECT phone, name, attributes FROM contact_import_batch)"
)

# First row wins or reject, once the file's repeated numbers are resolved: a line of a
# repeated number is written only if it is the one the policy kept.
RESOLVED_UPSERT_SQL = _UPSERT_TEMPLATE.format(
    chosen="""
chosen AS (
    SELECT s.phone, s.name, s.attributes
    FROM contact_import_staging s
    LEFT JOIN contact_import_duplicates d ON d.line = s.line
    WHERE s.line >= %(first)s AND s.line < %(end)s
      AND (d.line IS NULL OR d.kept_line = s.line)
)"""
)


class ContactWriter:
    """Stages the rows of one import, then writes them into the contacts table and one list.

    Must run inside a transaction: the staging table and the import lock last until commit.
    """

    def __init__(self, *, list_id: int, as_read: bool) -> None:
        """``as_read``: last row wins, each batch written as it is staged (``stage``)."""
        self.list_id = list_id
        self.as_read = as_read
        with connection.cursor() as cursor:
            cursor.execute(IMPORT_LOCK_SQL)
            cursor.execute(DROP_STAGING_SQL)
            cursor.execute(CREATE_STAGING_SQL)
            cursor.execute(INDEX_STAGING_SQL)
            cursor.execute(DROP_BATCH_SQL)
            cursor.execute(DROP_CHANGED_SQL)
            cursor.execute(CREATE_CHANGED_SQL)
            if as_read:
                cursor.execute(CREATE_BATCH_SQL)

    def stage(self, batch: ContactBatch) -> tuple[int, int]:
        """COPY the batch (``copy_payload`` filled) into the staging table, and with
        ``as_read`` upsert its merged contacts; (new contacts, contacts added to the list),
        (0, 0) until the file is written."""
        if not batch.contacts:
            return 0, 0
        with connection.cursor() as cursor:
            # The raw psycopg cursor: Django's wrapper has no COPY support.
            with cursor.cursor.copy(COPY_LINES_SQL if self.as_read else COPY_SQL) as copy:
                copy.write(batch.payload)
            if not self.as_read:
                return 0, 0
            cursor.execute("TRUNCATE contact_import_batch")
            with cursor.cursor.copy(COPY_BATCH_SQL) as copy:
                copy.write(batch.merged_payload)
            cursor.execute(MERGED_UPSERT_SQL, {"list_id": self.list_id})
            inserted, added = cursor.fetchone()
        return int(inserted), int(added)

    def write(
        self, *, lines: int, progress: Callable[[int], None] | None = None
    ) -> Iterator[tuple[int, int]]:
        """Upsert the whole staged file, its duplicates resolved, ``lines`` file lines per
        statement; yield (new contacts, contacts added to the list) for each. ``progress``
        is told the percent of the file's lines written after each statement."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT min(line), max(line) FROM contact_import_staging")
            low, high = cursor.fetchone()
            if low is None:
                return
            for first in range(low, high + 1, lines):
                params = {"first": first, "end": first + lines, "list_id": self.list_id}
                cursor.execute(RESOLVED_UPSERT_SQL, params)
                inserted, added = cursor.fetchone()
                if progress is not None:
                    done = min(first + lines, high + 1) - low
                    progress(done * 100 // (high - low + 1))
                yield int(inserted), int(added)


# The changed contacts that are on another list than the import's, with those lists' names:
# the count, and the first few by phone for the result page.
_CHANGED_ELSEWHERE_SQL = """
WITH elsewhere AS (
    SELECT ch.id, array_agg(l.name ORDER BY l.name) AS lists
      FROM contact_import_changed ch
      JOIN campaigns_listmembership m
        ON m.contact_id = ch.id AND m.contact_list_id <> %(list_id)s
      JOIN campaigns_contactlist l ON l.id = m.contact_list_id
     GROUP BY ch.id
)
SELECT (SELECT count(*) FROM elsewhere), c.phone, e.lists
  FROM elsewhere e JOIN campaigns_contact c ON c.id = e.id
 ORDER BY c.phone
 LIMIT %(limit)s
"""


def contacts_changed_elsewhere(*, list_id: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """Existing contacts this import changed (name or attributes) that are also on other
    lists than ``list_id``: how many, and the first ``limit`` ({phone, lists}). Within the
    import's transaction, after ``ContactWriter`` wrote."""
    with connection.cursor() as cursor:
        cursor.execute(_CHANGED_ELSEWHERE_SQL, {"list_id": list_id, "limit": max(limit, 1)})
        rows = cursor.fetchall()
    if not rows:
        return 0, []
    return int(rows[0][0]), [{"phone": phone, "lists": list(lists)} for _, phone, lists in rows][
        :limit
    ]
