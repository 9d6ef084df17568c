"""A support agent requeues dead letters in a real browser, and each role is refused the
other's pages.

The dead letters are made by the engine itself (the simulator answers 5xx until the one
attempt allowed is spent); after the requeue, a `manage.py rqworker campaigns` process
sends them again to the simulator, now healthy.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import override_settings

from delivery.campaigns.launch import campaign_start
from delivery.engine.reconcile import reconcile
from delivery.models import DeadLetter, Message, SupportAction
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_contact_list
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, SUPPORT
from whatsblast.core.processes import ProcessGroup

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]


def wait_sent(messages: list[int], workers: ProcessGroup, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while Message.objects.filter(pk__in=messages).exclude(status="sent").exists():
        workers.check()
        assert time.monotonic() < deadline, list(
            Message.objects.filter(pk__in=messages).values_list("status", flat=True)
        )
        time.sleep(0.2)


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_support_agent_requeues_dead_letters_and_they_are_sent(
    page: Any, live_server: Any, workers: ProcessGroup
) -> None:
    role_user(SUPPORT)
    with running_simulator() as sim:
        number = number_on(sim, rate=20)
        campaign = campaign_on(sim, number, recipients=3, max_attempts=1)
        sim.configure(mode="all_5xx")
        campaign_start(campaign=campaign)
        work_burst()
        reconcile()
        letters = list(DeadLetter.objects.filter(campaign=campaign).order_by("id"))
        assert len(letters) == 3
        code = letters[0].error_code
        sim.configure(mode="normal")
        workers.manage("campaigns", "rqworker", "campaigns")

        log_in(page, live_server.url, "sam")
        page.goto(f"{live_server.url}/admin/delivery/deadletter/")
        page.click(f"#changelist-filter a:has-text('{code}')")
        page.wait_for_url(f"**/deadletter/?error_code={code}")
        with_code = DeadLetter.objects.filter(error_code=code).count()
        assert page.locator("#result_list tbody tr").count() == with_code
        page.goto(f"{live_server.url}/admin/delivery/deadletter/")
        page.click(f"#changelist-filter a:has-text('{campaign.name}')")
        page.wait_for_url(f"**/deadletter/?campaign__id__exact={campaign.pk}")
        assert page.locator("#result_list tbody tr").count() == 3
        first = letters[0]
        page.click(f"#result_list a[href*='/deadletter/{first.pk}/change/']")

        payload = page.inner_text("#rendered-payload")
        assert f'"to": "{first.message.to}"' in payload and "biz_opaque_callback_data" in payload
        assert "sim-token" not in page.content()
        assert page.locator("#attempts tbody tr").count() == 1
        assert page.inner_text("#message-status") == "Dead-lettered"
        screenshot(page, "dead-letter.png", full_page=True)

        page.fill("#requeue-form textarea[name=note]", "Meta had a 5xx spell; sending again")
        page.click("#requeue-form input[type=submit]")
        assert "1 dead letter(s) requeued." in page.inner_text(".messagelist")
        trail = page.inner_text("#audit-trail")
        assert "sam" in trail and "Requeued" in trail and "5xx spell" in trail
        wait_sent([first.message_id], workers)
        page.reload()
        assert page.inner_text("#message-status") == "Sent"

        # The rest in bulk: tick everything (all statuses), confirm with a note.
        page.goto(f"{live_server.url}/admin/delivery/deadletter/?status__exact=all")
        page.check("#action-toggle")
        page.select_option("select[name=action]", "requeue_selected")
        page.click("button[name=index]")
        page.fill("textarea[name=note]", "bulk retry after the outage")
        page.click("input[type=submit][value=Requeue]")
        summary = page.inner_text(".messagelist")
        assert "2 dead letter(s) requeued; 1 skipped: no longer open." in summary
        wait_sent([x.message_id for x in letters], workers)

    assert SupportAction.objects.filter(username="sam", action="requeued").count() == 3
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"requeued"}


def test_each_role_is_refused_the_others_pages(page: Any, live_server: Any) -> None:
    role_user(MARKETING)
    role_user(SUPPORT)
    contact_list = make_contact_list(name="VIP")
    base = live_server.url

    log_in(page, base, "mia")
    assert page.goto(f"{base}/admin/delivery/deadletter/").status == 403
    page.goto(f"{base}/admin/")
    assert page.locator("a[href='/admin/delivery/deadletter/']").count() == 0
    assert page.goto(f"{base}/admin/campaigns/phonenumber/1/test-send/").status == 403
    page.context.clear_cookies()  # log out

    log_in(page, base, "sam")
    assert page.goto(f"{base}/admin/campaigns/contactlist/{contact_list.pk}/upload/").status == 403
    page.goto(f"{base}/admin/campaigns/contactlist/{contact_list.pk}/change/")
    assert page.locator("#upload-contacts").count() == 0
    assert page.goto(f"{base}/admin/campaigns/campaign/add/").status == 403
    page.goto(f"{base}/admin/")
    assert page.locator("a[href='/admin/campaigns/campaign/add/']").count() == 0
    assert page.locator("a[href='/admin/delivery/deadletter/']").count() >= 1
