"""delivery_message's indexes: every one costs a write whenever a message changes status.

Status is indexed, so no status update is HOT: each writes an entry into every index of the
table. These tests pin the indexes migration 0012 dropped as gone, and show that what they
did is still done: wamids stay unique, and a campaign's messages are still found by index.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from delivery.models import Message
from tests.factories import make_campaign, make_message

pytestmark = pytest.mark.django_db


def index_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'delivery_message'")
        return {name for (name,) in cursor.fetchall()}


def test_no_pattern_ops_index_on_wamid_and_no_lone_campaign_index() -> None:
    names = index_names()
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
    make_message(campaign=campaign)
    query = str(Message.objects.filter(campaign=campaign).only("id").query)
    with connection.cursor() as cursor:
        # As the planner sees a large table: a sequential scan is priced out.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {query}")  # noqa: S608 - the ORM's own SQL
        plan = "\n".join(line for (line,) in cursor.fetchall())
    # (campaign_id, status) or (campaign_id, to): both lead with the campaign.
    assert "Seq Scan" not in plan and "Index Cond: (campaign_id = " in plan, plan
