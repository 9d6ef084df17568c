"""The campaigns' message counters PostgreSQL keeps: exact through every kind of write,
folded on the tick, and what the campaign list reads instead of counting the messages."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from campaigns.models import CampaignStatus
from delivery.campaigns.status_counts import campaigns_status_counts, status_counts_fold
from delivery.messages import campaign_pending_cancel
from delivery.models import CampaignStatusDelta, CampaignStatusTotal, Message, MessageStatus
from tests.factories import make_campaign, make_message
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db


def counted(campaign_id: int) -> dict[str, int]:
    """Counted from the messages themselves: what the counters must always equal."""
    got = Counter(Message.objects.filter(campaign_id=campaign_id).values_list("status", flat=True))
    return {status: got.get(status, 0) for status in MessageStatus.values}


def test_the_counters_follow_every_kind_of_write_and_survive_a_fold() -> None:
    first, second = make_campaign(), make_campaign()
    for status in ("pending", "pending", "pending", "sent", "delivered"):
        make_message(campaign=first, status=status)
    make_message(campaign=second, status="pending")
    stray = make_message(campaign=first, status="sent")
    # Moved out of any campaign (as a transactional message is): it counts nowhere.
    Message.objects.filter(pk=stray.pk).update(campaign=None)

    assert campaigns_status_counts(campaign_ids=[first.pk, second.pk]) == {
        first.pk: counted(first.pk),
        second.pk: counted(second.pk),
    }
    assert counted(first.pk)["pending"] == 3 and counted(first.pk)["sent"] == 1

    # A transition of messages.py, a plain UPDATE that moves no status, a DELETE.
    assert campaign_pending_cancel(campaign_id=first.pk) == 3
    Message.objects.filter(campaign=first).update(pricing_category="marketing")
    Message.objects.filter(campaign=first, status="sent").delete()
    folded = status_counts_fold()
    assert folded > 0 and not CampaignStatusDelta.objects.exists()
    assert campaigns_status_counts(campaign_ids=[first.pk])[first.pk] == counted(first.pk)
    assert counted(first.pk)["cancelled"] == 3 and counted(first.pk)["sent"] == 0

    # After the fold, new deltas add to the totals; a second fold moves nothing twice.
    Message.objects.filter(campaign=first, status="delivered").update(status="read")
    assert campaigns_status_counts(campaign_ids=[first.pk])[first.pk] == counted(first.pk)
    status_counts_fold()
    assert status_counts_fold() == 0
    assert campaigns_status_counts(campaign_ids=[first.pk])[first.pk] == counted(first.pk)
    assert dict(
        CampaignStatusTotal.objects.filter(campaign_id=first.pk, n__gt=0).values_list("status", "n")
    ) == {"cancelled": 3, "read": 1}


def test_a_rolled_back_write_leaves_the_counters_as_they_were() -> None:
    campaign = make_campaign()
    make_message(campaign=campaign, status="pending")
    with pytest.raises(RuntimeError), transaction.atomic():
        Message.objects.filter(campaign=campaign).update(status="sent")
        raise RuntimeError("rolled back")
    assert campaigns_status_counts(campaign_ids=[campaign.pk])[campaign.pk]["pending"] == 1


def test_the_campaign_list_reads_the_counters_not_a_huge_campaigns_messages() -> None:
    campaign = make_campaign(name="Huge", status=CampaignStatus.COMPLETED)
    # 30,000 messages in one statement (as the launch writes them): a tenth failed, the
    # rest split between delivered and read.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO delivery_message (kind, "to", params, text, status, skip_reason,
                attempt, pair_limit_hits, next_attempt_at, wa_id, last_error_title,
                last_error_details, error_history, created_at, conversation_id,
                pricing_category, campaign_id, phone_number_id, template_id, request_sha256,
                pricing_model, pricing_type)
            SELECT 'campaign', '+4917' || lpad(g::text, 9, '0'), '[]', '',
                CASE WHEN g %% 10 = 0 THEN 'failed' WHEN g %% 2 = 0 THEN 'read'
                     ELSE 'delivered' END,
                '', 1, 0, now(), '', '', '', '[]', now(), '', '', %s, %s, %s, '', '', ''
            FROM generate_series(1, 30000) g
            """,
            [campaign.pk, campaign.phone_number_id, campaign.template_id],
        )
    client = Client()
    client.force_login(role_user(MARKETING))

    with CaptureQueriesContext(connection) as queries:
        page = client.get("/admin/campaigns/campaign/")

    assert page.status_code == 200
    sql = [q["sql"] for q in queries.captured_queries]
    assert not [q for q in sql if '"delivery_message"' in q or "delivery_message " in q], sql
    assert len(sql) <= 15  # the list pages' budget (tests/ui/test_list_query_counts.py)
    html = page.content.decode()
    row = html[html.index("Huge") :]
    # audience 30,000; sent = delivered = 27,000 (read included); read 12,000; failed 3,000
    for figure in ("30,000", "27,000", "12,000", "3,000"):
        assert figure in row[:4000], figure
