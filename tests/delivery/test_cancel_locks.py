"""A cancel during a send locks the campaign's rows in id order, as the sender does.

CI once caught ``manage.py campaign cancel`` dying with "deadlock detected" while the demo
was sending: the cancel's UPDATE locked rows in its scan order and the sender recording a
batch locks them in id order. Here the order is forced: the rows' physical order is not
their id order, a transaction (playing the sender) holds a row in the middle, and once the
cancel waits on it, takes a higher one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from django.db import connection

from delivery.campaigns.launch import campaign_start
from delivery.messages import campaign_pending_cancel
from delivery.models import Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def _connection_params() -> dict[str, Any]:
    # Django's own parameters: the embedded PostgreSQL is reached by a socket directory
    # and no port, which a hand-built "host= port=" string gets wrong.
    return connection.get_connection_params()


def _waiting_on_a_lock(params: dict[str, Any], backend_pid: int) -> bool:
    with psycopg.connect(**params, autocommit=True) as probe:
        row = probe.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [backend_pid]
        ).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_cancel_while_the_sender_holds_rows_waits_instead_of_deadlocking() -> None:
    contact_list = make_contact_list()
    for i in range(3):
        make_contact(phone=f"+3361{i:07d}", name=f"N{i}", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list])
    campaign_start(campaign=campaign)
    low, middle, high = Message.objects.filter(campaign=campaign).order_by("id")
    # The two lower rows rewritten (next_attempt_at is indexed: new tuples, new index
    # entries), so a scan meets the highest id first.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE delivery_message SET next_attempt_at = now() WHERE id = ANY(%s)",
            [[low.pk, middle.pk]],
        )
    params = _connection_params()
    outcome: dict[str, object] = {}
    cancel_pid: list[int] = []

    def cancel() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                cancel_pid.append(int(cursor.fetchone()[0]))
            outcome["cancelled"] = campaign_pending_cancel(campaign_id=campaign.pk)
        except Exception as exc:  # surfaced by the assertions below
            outcome["error"] = exc
        finally:
            connection.close()

    with psycopg.connect(**params) as sender:
        sender.execute("SET lock_timeout = '10s'")
        sender.execute("SELECT id FROM delivery_message WHERE id = %s FOR UPDATE", [middle.pk])
        thread = threading.Thread(target=cancel)
        thread.start()
        deadline = time.monotonic() + 10
        while not (cancel_pid and _waiting_on_a_lock(params, cancel_pid[0])):
            assert time.monotonic() < deadline, "the cancel never waited on the held row"
            time.sleep(0.02)
        # The sender goes on in id order; the cancel must not be holding this row.
        sender.execute("SELECT id FROM delivery_message WHERE id = %s FOR UPDATE", [high.pk])
        sender.commit()
    thread.join(timeout=30)

    assert "error" not in outcome, outcome.get("error")
    assert outcome["cancelled"] == 3
    statuses = set(Message.objects.filter(campaign=campaign).values_list("status", flat=True))
    assert statuses == {MessageStatus.CANCELLED}
