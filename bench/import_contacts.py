"""Benchmark: `manage.py contacts import` of a large generated CSV.

Writes a CSV of --rows rows (about 1 % bad phone numbers, 2 % repeats of earlier
rows, numbers half in E.164, the rest with separators or in national form; --duplicates
chooses what the import does with the repeats)
to a temporary directory, runs the import as a subprocess against the database in
DATABASE_URL, and prints one JSON object:

    {rows, seconds, rows_per_second, peak_rss_mb, imported, merged, rejected, ...}

``seconds`` is the subprocess's wall time (Django start-up included); ``import_seconds`` is
the importer's own figure. ``peak_rss_mb`` is the child's peak resident set size as the
kernel accounts it (getrusage RUSAGE_CHILDREN, exact, not sampled).

Contacts are numbers of the Brazilian area code --area (default 11): a second run with the
same area and rows finds them all existing ("merged"); use another area for fresh numbers.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/import_contacts.py --rows 100000
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import phonenumbers

ROOT = Path(__file__).resolve().parent.parent
BAD_PHONES = ("12345", "", "not a phone", "+999 123", "0000000")
CITIES = ("São Paulo", "Rio de Janeiro", "Belo Horizonte", "Curitiba", "Recife")


def write_csv(path: Path, *, rows: int, area: int, seed: int) -> None:
    """Phones as people type them: E.164, international with separators, national."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("name", "phone", "city", "plan"))
        for i in range(rows):
            roll = rng.random()
            n = i
            if roll < 0.01:
                phone = rng.choice(BAD_PHONES)
            else:
                if roll < 0.03 and i:
                    n = rng.randrange(i)  # a repeat of an earlier row, maybe spelled otherwise
                subscriber = f"9{n % 10**8:08d}"
                style = rng.random()
                if style < 0.5:
                    phone = f"+55{area}{subscriber}"
                elif style < 0.8:
                    phone = f"+55 {area} {subscriber[:5]}-{subscriber[5:]}"
                else:
                    phone = f"({area}) {subscriber[:5]}-{subscriber[5:]}"
            writer.writerow((f"Person {n}", phone, rng.choice(CITIES), rng.choice("abc")))


def run_import(
    csv_path: Path, *, list_name: str, duplicates: str = "last"
) -> tuple[dict[str, object], float]:
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "contacts",
        # System checks import the URL map and every view: start-up cost, not import cost.
        # (Django's own options go before the subcommand.)
        "--skip-checks",
        "import",
        str(csv_path),
        "--list",
        list_name,
        "--region",
        "BR",
        "--max-rejections",
        "10",
        "--duplicates",
        duplicates,
    ]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"import failed with exit status {done.returncode}")
    return json.loads(done.stdout), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--area", type=int, default=11, help="Brazilian area code, 11..99")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--list", dest="list_name", default=None)
    parser.add_argument(
        "--duplicates",
        choices=("last", "first", "reject"),
        default="last",
        help="the import's policy for a number on several rows (default: last)",
    )
    args = parser.parse_args()
    sample = phonenumbers.parse(f"+55{args.area}900000000")
    if not phonenumbers.is_valid_number(sample):
        raise SystemExit(f"{args.area} is not a Brazilian mobile area code; try 11, 21, 31...")
    if "DATABASE_URL" not in os.environ:
        print("note: DATABASE_URL unset, the embedded PostgreSQL is used", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="wb-bench-") as tmp:
        csv_path = Path(tmp) / "contacts.csv"
        write_csv(csv_path, rows=args.rows, area=args.area, seed=args.seed)
        list_name = args.list_name or f"bench-{args.rows}-{int(time.time())}"
        summary, seconds = run_import(csv_path, list_name=list_name, duplicates=args.duplicates)
        file_mb = csv_path.stat().st_size / 2**20

    # ru_maxrss is in KiB on Linux: the peak of the largest child waited for (the import).
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "rows": summary["rows_total"],
                "seconds": round(seconds, 2),
                "rows_per_second": round(args.rows / seconds),
                "peak_rss_mb": round(peak_kib / 1024, 1),
                "imported": summary["imported"],
                "merged": summary["merged"],
                "rejected": summary["rejected"],
                "import_seconds": summary["seconds"],
                "import_rows_per_second": summary["rows_per_second"],
                "file_mb": round(file_mb, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
