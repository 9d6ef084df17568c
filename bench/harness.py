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


# The tables a campaign and its callbacks rewrite, row by row.
HOT_TABLES = (
    "delivery_message",
    "webhooks_webhookevent",
    "webhooks_unmatchedstatus",
    "campaigns_contact",
    "campaigns_campaign",
)


def hot_tables_vacuum() -> None:
    """Start a run from vacuumed tables, as production's autovacuum keeps them.

    This machine's PostgreSQL runs with autovacuum off (its CI configuration). Without a
    vacuum, every earlier run's dead rows stay: after a dozen runs the unmatched statuses'
    due index held ~100,000 dead entries for 0 live rows, and each applier batch read them
    all (39 % of a PostgreSQL core in a full loop at 500 msg/s).
    """
    from django.db import connection

    with connection.cursor() as cursor:
        for table in HOT_TABLES:
            cursor.execute(f"VACUUM (ANALYZE) {table}")


def bench_audience(name: str, size: int, *, phone_prefix: str, name_prefix: str) -> Any:
    """A contact list of ``size`` new contacts (numbers after every contact already there,
    so reruns and other campaigns get fresh people). Call after ``django_setup``."""
    from campaigns.models import Contact, ContactList, ListMembership

    contact_list = ContactList.objects.create(name=name)
    first = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        (
            Contact(phone=f"{phone_prefix}{first + i:010d}", name=f"{name_prefix}{i}")
            for i in range(size)
        ),
        batch_size=5000,
    )
    ListMembership.objects.bulk_create(
        (ListMembership(contact_list=contact_list, contact=c) for c in contacts), batch_size=5000
    )
    return contact_list
