"""The router's batch reads the batch's contacts, not the whole journey, whatever the
planner believes about the journey's size.

A journey that is new, or grew since PostgreSQL last counted it, looks a few rows big to
the planner. While the reads named the journeys beside the contacts, they went through
every row of the journey for each batch (0.2 s a batch at 64,000 rows: events arrived at
5,000 a second and were routed at a few hundred). Here the statistics are taken while the
table holds an older journey's 20,000 people, and 20,000 then enter a new one, as a
burst of events does: each read still reaches only the batch's rows. (With no
statistics at all, on a table never analysed since it was empty, the planner guesses;
autovacuum's analyse counts it after its first 50 rows.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from campaigns.models import Contact
from journeys.models import Journey, JourneyInstance
from journeys.routing import _INSTANCES_SQL, _PAST_SQL
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, template_on

pytestmark = pytest.mark.django_db

CART = {
    "entry": {"type": "event", "event": "cart_updated"},
    "key": "cart_id",
    "steps": [{"id": "wait", "type": "wait", "delay": {"hours": 1}}],
}


def plan(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        document = cursor.fetchone()[0]
    found: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]
    return found


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in nodes(child))]


def people_enter(journey: Journey, phones: str, n: int) -> None:
    """``n`` new contacts, each with an active instance of ``journey``, in two statements
    (as a burst of entries leaves them), the statistics not taken again."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO campaigns_contact (phone, name, attributes, created_at, updated_at)
            SELECT %s || lpad(g::text, 6, '0'), '', '{}', now(), now()
              FROM generate_series(1, %s) AS g
            """,
            [phones, n],
        )
        cursor.execute(
            """
            INSERT INTO journeys_journeyinstance
                   (journey_id, contact_id, version, key, state, step, due_at, step_due_at,
                    entered_at, exit_kind, exit_reason, properties, resumed, holdout, test,
                    updated_at)
            SELECT %s, c.id, 1, 'c' || c.id, 'active', 'wait', now(), now(), now(), '', '',
                   '{}', '{}', false, false, now()
              FROM campaigns_contact AS c WHERE c.phone LIKE %s
            """,
            [journey.pk, phones + "%"],
        )


def test_a_batch_reads_only_its_contacts_rows_after_a_new_journeys_burst() -> None:
    number = make_phone_number()
    template_on(number, "cart_reminder")
    older: Journey = journey_live(number, CART, name="older")
    people_enter(older, "+5511960", 20000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE journeys_journeyinstance")
    burst: Journey = journey_live(number, CART, name="burst")
    people_enter(burst, "+5511970", 20000)
    batch = sorted(
        Contact.objects.filter(phone__startswith="+5511970").values_list("pk", flat=True)
    )[-1000:]
    for sql in (_INSTANCES_SQL, _PAST_SQL):
        found = plan(sql, {"contacts": batch})
        scans = [n for n in nodes(found["Plan"]) if "Relation Name" in n]
        indexes = {n.get("Index Name") for n in scans}
        read = sum(
            (int(n["Actual Rows"]) + int(n.get("Rows Removed by Filter", 0)))
            * int(n["Actual Loops"])
            for n in scans
        )
        assert indexes <= {"journey_instance_contact_idx", "journeys_journeyinstance_pkey"}, scans
        # What it read is the batch's 1,000, not the journey's 20,000 or the table's.
        assert read == 1000, (read, scans)
    assert JourneyInstance.objects.filter(journey=burst).count() == 20000
