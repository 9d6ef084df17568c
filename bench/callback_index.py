"""Where the callback table's indexes level off under steady churn, in accelerated time.

The soak hour keeps callbacks a quarter of an hour, so its table turns over about three
times after its first rows age out; over that hour its indexes kept growing, more slowly
each window. The unique index on the body's SHA-256 takes keys in random order, and a
B-tree whose random inserts are matched by deletes (the retention purge) loses fill until
page splits and the space vacuum frees balance out. Whether that stops, and where, an hour
cannot show; this does in minutes.

It builds the table as the migrations leave it (same columns, the unique body hash, the
partial pending index, the same autovacuum thresholds, applied here by an explicit VACUUM
when the dead rows pass them), then repeats what production does to it, a batch at a time:

- insert ``--batch`` rows with random body hashes, as the group committer does;
- mark them processed, as the applier does (a non-HOT update: ``status`` is in the
  pending index's predicate);
- once the table holds ``--population`` rows, delete the oldest as the retention purge
  does (head of the key, ``PURGE_BATCH`` at a time);
- VACUUM when the dead rows pass 5,000 + 5 % of the live ones, at most once per
  ``--rows-per-minute`` inserted (autovacuum looks at a table once a minute; the soak
  stores about 23,000 callbacks a minute).

and prints, after every turnover of the population, the sizes of the heap and each index
and the index bytes per live row, as one JSON object. Run against a scratch database (it
creates and drops its own table ``bench_callback_index``):

    .venv/bin/python bench/callback_index.py --dsn postgres://postgres@127.0.0.1/postgres
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import psycopg

TABLE = "bench_callback_index"

# As webhooks/models.py and its migrations build webhooks_webhookevent.
CREATE_SQL = f"""
DROP TABLE IF EXISTS {TABLE};
CREATE TABLE {TABLE} (
    id bigserial PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    body bytea NOT NULL,
    body_sha256 varchar(64) NOT NULL,
    status varchar(16) NOT NULL DEFAULT 'pending',
    error text NOT NULL DEFAULT '',
    processed_at timestamptz,
    summary jsonb NOT NULL DEFAULT '{{}}'
) WITH (autovacuum_enabled = false);
ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_sha_uniq UNIQUE (body_sha256);
CREATE INDEX {TABLE}_pending_idx ON {TABLE} (received_at) WHERE status = 'pending';
"""

# One group commit's worth of callbacks, each body about the size of a one-status POST.
INSERT_SQL = f"""
INSERT INTO {TABLE} (body, body_sha256)
SELECT convert_to(repeat('x', %(body_bytes)s), 'UTF8'),
       encode(sha256(convert_to(gen_random_uuid()::text, 'UTF8')), 'hex')
FROM generate_series(1, %(batch)s)
RETURNING id
"""

APPLY_SQL = f"""
UPDATE {TABLE} SET status = 'processed', processed_at = now(),
       summary = '{{"statuses": {{"delivered": 1}}}}'
WHERE id = ANY(%(ids)s)
"""

# webhooks/retention.py's purge: the head of the key, a batch at a time.
PURGE_SQL = f"""
WITH head AS (SELECT id FROM {TABLE} ORDER BY id LIMIT %(batch)s)
DELETE FROM {TABLE} AS e USING head WHERE e.id = head.id
"""

SIZES_SQL = f"""
SELECT pg_relation_size('{TABLE}'),
       pg_relation_size('{TABLE}_sha_uniq'),
       pg_relation_size('{TABLE}_pkey'),
       pg_relation_size('{TABLE}_pending_idx')
"""


def sizes(conn: psycopg.Connection[Any], live: int) -> dict[str, float]:
    heap, sha, pkey, pending = conn.execute(SIZES_SQL).fetchone() or (0, 0, 0, 0)
    indexes = sha + pkey + pending
    return {
        "heap_mb": round(heap / 1e6, 1),
        "sha_index_mb": round(sha / 1e6, 1),
        "pkey_mb": round(pkey / 1e6, 1),
        "pending_index_mb": round(pending / 1e6, 2),
        "indexes_mb": round(indexes / 1e6, 1),
        "index_bytes_per_row": round(indexes / max(live, 1), 1),
        "sha_index_bytes_per_row": round(sha / max(live, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--population", type=int, default=350_000)
    parser.add_argument("--turnovers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--purge-batch", type=int, default=5_000)
    parser.add_argument("--body-bytes", type=int, default=900)
    parser.add_argument("--rows-per-minute", type=int, default=23_000)
    args = parser.parse_args()

    started = time.monotonic()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(CREATE_SQL)
        live = dead = inserted = vacuumed_at = vacuums = 0
        curve: list[dict[str, Any]] = []
        total = args.population * (args.turnovers + 1)
        while inserted < total:
            ids = [
                row[0]
                for row in conn.execute(
                    INSERT_SQL, {"batch": args.batch, "body_bytes": args.body_bytes}
                )
            ]
            conn.execute(APPLY_SQL, {"ids": ids})
            inserted += len(ids)
            live += len(ids)
            dead += len(ids)  # the pending versions the update left behind
            while live > args.population:
                deleted = conn.execute(PURGE_SQL, {"batch": args.purge_batch}).rowcount
                live -= deleted
                dead += deleted
            minute_passed = inserted - vacuumed_at >= args.rows_per_minute
            if minute_passed and dead > 5_000 + 0.05 * live:
                conn.execute(f"VACUUM {TABLE}")
                dead, vacuumed_at, vacuums = 0, inserted, vacuums + 1
            if inserted % args.population < args.batch:
                turnover = inserted // args.population
                point = {"turnover": turnover, "live": live, "vacuums": vacuums}
                point.update(sizes(conn, live))
                curve.append(point)
                print(json.dumps(point), file=sys.stderr, flush=True)
        conn.execute(f"DROP TABLE {TABLE}")
    first_full = curve[1] if len(curve) > 1 else curve[0]
    last = curve[-1]
    print(
        json.dumps(
            {
                "population": args.population,
                "turnovers": args.turnovers,
                "batch": args.batch,
                "wall_s": round(time.monotonic() - started, 1),
                "curve": curve,
                "indexes_growth_after_first_turnover": round(
                    last["indexes_mb"] / first_full["indexes_mb"] - 1, 3
                ),
                "last_turnover_growth": round(
                    curve[-1]["indexes_mb"] / curve[-2]["indexes_mb"] - 1, 3
                ),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
