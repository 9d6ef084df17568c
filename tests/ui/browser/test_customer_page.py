"""A support agent finds a customer by the number they say on the phone, opens their page,
requeues their dead letter there and sees the new attempt's outcome on the same page.

The dead letter is made by the engine itself (the simulator answers 5xx until the one
attempt allowed is spent); after the requeue the engine sends it again to the simulator,
now healthy.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from campaigns.models import Contact
from delivery.campaigns.launch import campaign_start
from delivery.engine.reconcile import reconcile
from delivery.models import DeadLetter, Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.browser.test_marketing_and_support import fits
from tests.ui.support import role_user
from whatsblast.auth.roles import SUPPORT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

ANA = "+5511987654321"


def send_until_sent(message_id: int, timeout: float = 60) -> None:
    """Run the queued sends in this process until the requeued message has gone."""
    deadline = time.monotonic() + timeout
    while Message.objects.get(pk=message_id).status not in ("sent", "delivered", "read"):
        assert time.monotonic() < deadline, Message.objects.get(pk=message_id).status
        work_burst()
        time.sleep(0.2)


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_support_finds_a_customer_by_their_spoken_number_and_requeues_from_their_page(
    wide: Any, live_server: Any
) -> None:
    role_user(SUPPORT)
    with running_simulator() as sim:
        # A Brazilian business number: "(11) 98765-4321" is read as a Brazilian number.
        number = number_on(sim, rate=20, display_phone_number="+55 11 4000-1234")
        campaign = campaign_on(sim, number, recipients=1, max_attempts=1, name="Spring sale")
        Contact.objects.filter(lists__campaigns=campaign).update(
            phone=ANA, name="Ana Souza", attributes={"plan": "gold"}
        )
        sim.configure(mode="all_5xx")
        campaign_start(campaign=campaign)
        work_burst()
        reconcile()
        letter = DeadLetter.objects.get(campaign=campaign)
        assert letter.message.to == ANA
        sim.configure(mode="normal")

        base = live_server.url
        log_in(wide, base, "sam")
        wide.goto(f"{base}/admin/delivery/message/")
        wide.fill("#searchbar", "(11) 98765-4321")
        wide.press("#searchbar", "Enter")
        wide.wait_for_load_state()
        rows = wide.locator("#result_list tbody tr")
        assert rows.count() == 1 and "Spring sale" in rows.inner_text()
        assert campaign.template.name in rows.inner_text()  # the template column
        assert fits(wide), "the messages list scrolls sideways at 1366 px"
        screenshot(wide, "customer-search.png")

        wide.click(f"#result_list a.wb-customer-link:text-is('{ANA}')")
        wide.wait_for_selector("#customer-contact")
        assert wide.inner_text("#customer-name") == "Ana Souza"
        assert "gold" in wide.inner_text("#customer-attributes")
        assert "Dead-lettered" in wide.inner_text("#customer-messages")
        dead_row = wide.locator(f"#customer-dead-letters tr[data-dead-letter='{letter.pk}']")
        assert "Open" in dead_row.inner_text()
        assert fits(wide), "the customer page scrolls sideways at 1366 px"
        screenshot(wide, "customer-page-open.png", full_page=True)

        dead_row.locator("input[name=note]").fill("Customer called; sending again")
        dead_row.locator("button.wb-requeue").click()
        wide.wait_for_selector(".messagelist")
        assert "1 dead letter(s) requeued." in wide.inner_text(".messagelist")
        assert "Requeued" in dead_row.inner_text()
        assert dead_row.locator("button.wb-requeue").count() == 0

        send_until_sent(letter.message_id)
        wide.reload()
        outcome = wide.inner_text(
            f"#customer-dead-letters tr[data-dead-letter='{letter.pk}'] .wb-since"
        )
        assert "Now: Sent" in outcome or "Now: Delivered" in outcome, outcome
        sent_row = wide.inner_text(f"#customer-messages tr[data-message='{letter.message_id}']")
        assert "Dead-lettered" not in sent_row and "unavailable" not in sent_row
        screenshot(wide, "customer-page.png", full_page=True)
