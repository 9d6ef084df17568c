"""Bulk writes of imported contacts: COPY into a staging table, then set-based upserts.

Per batch: one COPY, then one statement that upserts into ``campaigns_contact`` and adds
the contacts to the list. COPY moves ~100k rows/s where row-by-row INSERTs move a few thousand, and
the two set-based statements let PostgreSQL do the merging with its unique indexes instead
of a round trip per contact.
"""

from __future__ import annotations

from django.db import connection

from campaigns.audience.batches import ContactBatch

# Session-private, gone at commit. IF NOT EXISTS: a second import in the same transaction
# (as tests do) reuses it; each batch starts with TRUNCATE.
CREATE_STAGING_SQL = """
CREATE TEMP TABLE IF NOT EXISTS contact_import_staging (
    phone text NOT NULL,
    name text NOT NULL,
    attributes jsonb NOT NULL
) ON COMMIT DROP
"""

# Imports run one at a time. Each holds the row locks of every contact it touched until it
# commits; two imports of overlapping files, batch by batch in different orders, would each
# wait for a row the other holds and PostgreSQL would abort one of them as a deadlock.
# A transaction-scoped advisory lock queues the second import behind the first instead.
IMPORT_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('campaigns.contacts_import'))"

COPY_SQL = "COPY contact_import_staging (phone, name, attributes) FROM STDIN"

# One statement per batch: upsert the contacts, then add every one of them to the list.
#
# Phones are unique within the staging table (the batch merged them in Python), so
# ON CONFLICT never meets the same target row twice, which PostgreSQL would refuse.
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
# RETURNING tells an insert from an update.
UPSERT_SQL = """
WITH upserted AS (
    INSERT INTO campaigns_contact AS c (phone, name, attributes, created_at, updated_at)
    SELECT s.phone, s.name, s.attributes, now(), now()
    FROM contact_import_staging s
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
    RETURNING c.id, (c.xmax = 0) AS inserted
),
added AS (
    INSERT INTO campaigns_listmembership (contact_list_id, contact_id, added_at)
    SELECT %s, u.id, now() FROM upserted u
    ON CONFLICT (contact_list_id, contact_id) DO NOTHING
    RETURNING 1
)
SELECT
    (SELECT count(*) FROM upserted WHERE inserted),
    (SELECT count(*) FROM added)
"""


class ContactWriter:
    """Writes batches of one import into the contacts table and one list.

    Must run inside a transaction: the staging table and the import lock last until commit.
    """

    def __init__(self, *, list_id: int) -> None:
        self.list_id = list_id
        with connection.cursor() as cursor:
            cursor.execute(IMPORT_LOCK_SQL)
            cursor.execute(CREATE_STAGING_SQL)

    def write(self, batch: ContactBatch) -> tuple[int, int]:
        """Store the batch; return (new contacts, contacts newly added to the list)."""
        if not batch.contacts:
            return 0, 0
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE contact_import_staging")
            # The raw psycopg cursor: Django's wrapper has no COPY support.
            with cursor.cursor.copy(COPY_SQL) as copy:
                copy.write(batch.payload)
            cursor.execute(UPSERT_SQL, [self.list_id])
            inserted, added = cursor.fetchone()
        return int(inserted), int(added)
