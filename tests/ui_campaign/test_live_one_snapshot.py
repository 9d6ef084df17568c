"""The live campaign page reads every figure at one moment: a message sent and billed while
the page is being built shows in none of them or in all (never "Sent 976, billable 997")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections

from campaigns.models import CampaignStatus
from tests.factories import make_campaign, make_message
from whatsblast.admin.campaign_live import campaign_live

pytestmark = pytest.mark.django_db(transaction=True)


def sent_and_billed(campaign: Any, to: str) -> None:
    make_message(
        campaign=campaign, to=to, status="sent", billable=True, pricing_category="marketing"
    )


def test_a_send_committed_while_the_page_is_built_does_not_split_its_figures() -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    sent_and_billed(campaign, "+5511900000001")
    fired: list[str] = []

    def writer_before_billing(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if "pricing_category" in sql and not fired:
            fired.append(sql)
            # Another session sends and bills one more message, and commits, between the
            # page's count of Sent and its count of billable messages.
            thread = threading.Thread(target=_in_own_connection, args=(campaign,))
            thread.start()
            thread.join()
        return execute(sql, *args)

    with connection.execute_wrapper(writer_before_billing):
        live = campaign_live(campaign=campaign, use_cache=False)
    assert fired, "the billing query was not seen"
    sent = next(f["count"] for f in live["figures"] if f["key"] == "sent")
    assert (sent, charged(live)) == (1, 1)
    # The next build sees the new message in both.
    live = campaign_live(campaign=campaign, use_cache=False)
    sent = next(f["count"] for f in live["figures"] if f["key"] == "sent")
    assert (sent, charged(live)) == (2, 2)


def charged(live: dict[str, Any]) -> int:
    """The billable messages of the page's cost table."""
    return sum(int(line["charged"]) for line in live["costs"])


def _in_own_connection(campaign: Any) -> None:
    try:
        sent_and_billed(campaign, "+5511900000002")
    finally:
        connections.close_all()
