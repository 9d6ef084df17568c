"""delivery_message's indexes: each costs a write whenever a row changes an indexed column.

No index names ``status``: the ones that need a status key on ``send_status`` (``status``
with delivered and read folded into sent), so a delivery receipt changes no indexed column
and PostgreSQL updates the row in place (HOT), writing no index entry. These tests pin
that, show every query that selects by status still reaches its index through
``send_status``, and pin the indexes migration 0012 dropped as gone.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from delivery import messages
from delivery.campaigns import guard
from delivery.engine import completion
from delivery.messages import MessageUpdate, status_updates_apply
from delivery.models import Message, MessageStatus
from tests.factories import make_campaign, make_message
from whatsblast.observability import queries

pytestmark = pytest.mark.django_db

# `status` as a word of its own: `send_status` does not count.
STATUS_COLUMN = re.compile(r"(?<![a-z_])status(?![a-z_])")


def index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'delivery_message'"
        )
        return dict(cursor.fetchall())


def test_no_index_names_status_in_its_columns_or_its_condition() -> None:
    definitions = index_definitions()
    assert definitions, "delivery_message has no index at all"
    naming_status = {n: d for n, d in definitions.items() if STATUS_COLUMN.search(d)}
    assert naming_status == {}
    # The five that need a status have it, through send_status.
    assert sum("send_status" in d for d in definitions.values()) == 5


def test_the_table_leaves_room_on_each_page_for_a_receipts_new_row_version() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'delivery_message'")
        (options,) = cursor.fetchone()
    assert "fillfactor=80" in options


def test_send_status_is_status_with_the_receipts_folded_into_sent() -> None:
    campaign = make_campaign()
    for status in MessageStatus.values:
        make_message(campaign=campaign, status=status)
    found = dict(Message.objects.values_list("status", "send_status"))
    expected = {s: s for s in MessageStatus.values}
    expected[MessageStatus.DELIVERED] = MessageStatus.SENT
    expected[MessageStatus.READ] = MessageStatus.SENT
    assert found == expected
    # PostgreSQL keeps it in step with every write, whoever writes.
    Message.objects.filter(status=MessageStatus.PENDING).update(status=MessageStatus.READ)
    assert set(
        Message.objects.filter(status=MessageStatus.READ).values_list("send_status", flat=True)
    ) == {MessageStatus.SENT}


def receipt(message: Message, status: str) -> MessageUpdate:
    now = timezone.now()
    return MessageUpdate(
        message_id=message.pk,
        status=status,
        wamid=None,
        sent_at=None,
        delivered_at=now,
        read_at=now if status == MessageStatus.READ else None,
        failed_at=None,
        error_code=None,
        error_title=None,
        error_details=None,
        conversation_id="conv-1",
        pricing_category="marketing",
        billable=True,
        pricing_model="PMP",
        pricing_type="regular",
    )


def hot_updates_so_far() -> int:
    """HOT updates of delivery_message in this transaction (exact, not the sampled stats)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_hot_updated('delivery_message'::regclass)")
        return int(cursor.fetchone()[0])


def test_delivered_and_read_receipts_update_the_row_in_place() -> None:
    # Fresh pages: earlier tests on this worker leave their rolled-back rows on the table's
    # pages, and whether three versions of a row fitted beside them depended on the order
    # the tests ran in. TRUNCATE gives the table a new, empty file (undone with the test's
    # transaction).
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE delivery_message CASCADE")
    campaign = make_campaign()
    # Few rows: inside the test's one transaction no old version can be pruned, so all
    # three versions of each row must fit the room fillfactor leaves on their page. (In
    # production each batch commits and the next visit to the page prunes the old ones.)
    sent = [
        make_message(campaign=campaign, status=MessageStatus.SENT, wamid=f"wamid.hot.{n}")
        for n in range(5)
    ]
    before = hot_updates_so_far()
    assert status_updates_apply([receipt(m, MessageStatus.DELIVERED) for m in sent]) == 5
    assert status_updates_apply([receipt(m, MessageStatus.READ) for m in sent]) == 5
    assert hot_updates_so_far() - before == 10
    assert set(Message.objects.values_list("status", "send_status")) == {("read", "sent")}

    # A move of the send itself changes an indexed column: a new version, new entries.
    before = hot_updates_so_far()
    Message.objects.filter(pk=sent[0].pk).update(status=MessageStatus.PENDING)
    assert hot_updates_so_far() == before


def plan_of(sql: str, params: Any, *, index_scans: bool = True) -> str:
    with connection.cursor() as cursor:
        # As the planner sees a large table: a sequential scan is priced out.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"SET LOCAL enable_indexscan = {'on' if index_scans else 'off'}")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(line for (line,) in cursor.fetchall())


@pytest.mark.parametrize(
    ("name", "sql", "params", "index"),
    [
        (
            "claim a campaign's due rows",
            messages._CLAIM_CAMPAIGN_SQL,
            {"campaign_id": 1, "phone_number_id": 1, "limit": 50},
            "message_pending_claim_idx",
        ),
        (
            "due transactional rows",
            messages._DUE_TRANSACTIONAL_SQL,
            {"limit": 50},
            "message_pending_txn_idx",
        ),
        (
            "expired leases",
            messages._EXPIRE_LEASES_SQL,
            {"entry": json.dumps({}), "lease": 60},
            "message_in_doubt_idx",
        ),
        (
            "unknown rows to settle",
            messages._SETTLE_UNKNOWN_SQL,
            {"window": 60},
            "message_in_doubt_idx",
        ),
        (
            "the quality guard's window",
            guard._WINDOW_SQL,
            {"campaign_id": 1, "codes": [131050], "since": None, "window": 500},
            "message_settled_recent_idx",
        ),
        (
            "a campaign's failed rows to retry",
            messages._RETRY_SQL,
            {
                "campaign_id": 1,
                "codes": [131049],
                "entry": json.dumps({}),
                "user_cap_code": 131049,
                "user_cap_wait": 86400,
            },
            # Failed rows are settled ones too: either index holds exactly the campaign's.
            "message_campaign_status_idx|message_settled_recent_idx",
        ),
        (
            "a finished campaign's completion",
            completion._COMPLETE_SQL,
            {"campaign_id": 1},
            # The campaign's rows by status; the unique (campaign, recipient) index leads
            # with the campaign too, and on a near-empty table the planner prices them alike.
            "message_campaign_status_idx|message_unique_recipient_per_campaign",
        ),
        ("pending rows per campaign", queries._CAMPAIGNS_SQL, None, "message_pending_claim_idx"),
        ("pending transactional", queries._TRANSACTIONAL_SQL, None, "message_pending_txn_idx"),
        (
            "rows in doubt",
            queries._IN_DOUBT_SQL,
            {"lease": 60, "settle": 600},
            "message_in_doubt_idx",
        ),
    ],
)
def test_a_query_by_status_reaches_its_index(name: str, sql: str, params: Any, index: str) -> None:
    # On the test's near-empty table the planner prices the indexes alike, and which one it
    # takes followed the statistics earlier tests left (CI once took the campaign/status
    # index for three of these). What is asserted is that the query's conditions reach
    # its index: the other plain indexes are dropped inside a savepoint, rolled back after.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.relname FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid"
                " WHERE x.indrelid = 'delivery_message'::regclass AND NOT x.indisunique"
                " AND NOT x.indisprimary AND NOT (i.relname = ANY(%s))",
                [index.split("|")],
            )
            for (other,) in cursor.fetchall():
                cursor.execute(f'DROP INDEX "{other}"')
        # "Index Scan using <index> on delivery_message" or "Bitmap Index Scan on <index>".
        reaches = re.compile(rf"(using|Bitmap Index Scan on) ({index})\b")
        plan = plan_of(sql, params)
        if not reaches.search(plan):
            # A plain index scan may walk the primary key end to end with the conditions as a
            # filter (CI once did, for the expired leases). A bitmap scan needs an index the
            # conditions reach: the plan is asked for again with plain index scans off.
            plan = plan_of(sql, params, index_scans=False)
        transaction.set_rollback(True)
    assert reaches.search(plan), f"{name}:\n{plan}"


def test_no_pattern_ops_index_on_wamid_and_no_lone_campaign_index() -> None:
    names = set(index_definitions())
    assert "delivery_message_wamid_key" in names
    assert "message_campaign_status_idx" in names
    assert not any(name.endswith("_like") for name in names), names
    assert "delivery_message_campaign_id_cc495cce" not in names


def test_a_wamid_is_still_unique() -> None:
    campaign = make_campaign()
    make_message(campaign=campaign, wamid="wamid.once")
    with pytest.raises(IntegrityError, match="delivery_message_wamid_key"), transaction.atomic():
        make_message(campaign=campaign, wamid="wamid.once")
    # Messages not yet sent have none, and NULLs never collide.
    make_message(campaign=campaign, wamid=None)
    make_message(campaign=campaign, wamid=None)
    assert Message.objects.filter(wamid__isnull=True).count() == 2


def test_a_campaigns_messages_are_still_found_by_index() -> None:
    campaign = make_campaign()
    make_message(campaign=campaign, next_attempt_at=timezone.now() - timedelta(seconds=1))
    query = str(Message.objects.filter(campaign=campaign).only("id").query)
    plan = plan_of(query, None)
    # (campaign_id, send_status) or (campaign_id, to): both lead with the campaign.
    assert "Seq Scan" not in plan and "Index Cond: (campaign_id = " in plan, plan
