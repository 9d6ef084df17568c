"""What the process-driving benchmarks share: Django set up from the checkout, and the
environment their worker, web and simulator processes run with."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "whatsblast.settings")
    import django

    django.setup()


def process_env(**overrides: str) -> dict[str, str]:
    """The benchmark's own database, Redis and secret, for the processes it starts.

    DEBUG off, as production runs them (with DEBUG on, Django keeps the last 9,000 queries
    of every connection). On 2 Dec 2026 the engine's figures came out the same either way.
    """
    from django.conf import settings

    from whatsblast.core.processes import service_environment

    return {
        **service_environment(),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "SECRET_KEY": settings.SECRET_KEY,
        **overrides,
    }


def sim_accepted_records(sim: str) -> list[dict[str, Any]]:
    """Every send the simulator at ``sim`` accepted, read page by page from its records."""
    import requests

    rows: list[dict[str, Any]] = []
    after = 0
    while True:
        page = requests.get(
            f"{sim}/_sim/records", params={"after": after, "limit": 50_000}, timeout=60
        ).json()["records"]
        if not page:
            return rows
        rows.extend(r for r in page if str(r["outcome"]).startswith("accepted"))
        after = page[-1]["seq"]
