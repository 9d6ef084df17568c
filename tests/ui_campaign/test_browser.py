"""A marketer's campaign in a real browser, sent by real worker processes to the simulator.

Headless system Chromium drives the live server: log in, create a campaign with a param
mapping and watch the preview, run the pre-flight check, launch, and watch the progress
bar reach 100 % while `manage.py rqworker` and `manage.py ticker` subprocesses send to the
in-process simulator, whose status webhooks come back to the live server. Screenshots of
the create page and the finished campaign page go to docs/screenshots/.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.db.models import Count
from django.test import override_settings
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, ContactList
from delivery.models import Message
from tests.engine_support import number_on, running_simulator
from tests.factories import make_contact_list, make_template
from whatsblast.auth.roles import MARKETING, role_grant, roles_sync
from whatsblast.core.processes import ProcessGroup, service_environment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

APP_SECRET = "browser-test-secret"  # noqa: S105
PASSWORD = "spring-sale-password"  # noqa: S105
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
RECIPIENTS = 240
OPTED_OUT = 2
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module", autouse=True)
def async_unsafe_allowed() -> Iterator[None]:
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls
    # would otherwise be refused as "called from an async context".
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()
            # The test's ORM calls ran while Playwright's event loop was current, under
            # another context than pytest-django's teardown sees: close that connection
            # here, or it keeps the test database from being dropped.
            connections.close_all()


@pytest.fixture
def processes(tmp_path: Path, settings: Any) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "CAMPAIGN_JOB_BUDGET_SECONDS": "2",
        "TEMPLATE_SYNC_INTERVAL_SECONDS": "0",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def audience(count: int) -> ContactList:
    from campaigns.models import Contact, ListMembership

    contact_list = make_contact_list(name="Spring customers")
    names = ("Ana", "Bruno", "Carla", "Davi", "Elisa", "Fabio")
    contacts = Contact.objects.bulk_create(
        Contact(
            phone=f"+55119{i:08d}",
            name=names[i % len(names)],
            attributes={"coupon": f"SPRING{i:03d}"},
        )
        for i in range(count)
    )
    # Two who stopped marketing messages: listed, skipped.
    contacts += Contact.objects.bulk_create(
        Contact(phone=f"+55118{i:08d}", name="Gone", opted_out_at=timezone.now())
        for i in range(OPTED_OUT)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contact_list


def statuses(campaign: Campaign) -> dict[str, int]:
    rows = Message.objects.filter(campaign=campaign).values("status").annotate(n=Count("id"))
    return {row["status"]: row["n"] for row in rows}


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_a_marketer_creates_checks_launches_and_watches_a_campaign(
    page: Any, processes: ProcessGroup, live_server: Any, django_user_model: Any
) -> None:
    with running_simulator(
        latency_ms=40,
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        read_fraction=0.4,
    ) as sim:
        # Given a number on the simulator, an approved template and a list of customers
        number = number_on(sim, rate=25, reserve=0.2, display_phone_number="+15550001234")
        template = make_template(
            account=number.account,
            name="spring_sale",
            body_text="Hi {{1}}! Your code {{2}} takes 20% off everything until Sunday.",
            body_param_count=2,
            body_examples=["Asha", "SPRING10"],
            buttons=[
                {
                    "index": 0,
                    "type": "URL",
                    "text": "Shop the sale",
                    "url": "https://shop.example/sale/{{1}}",
                    "sub_type": "url",
                    "param": "required",
                    "example": "SPRING10",
                }
            ],
        )
        sim.add_template(
            name=template.name, language=template.language, body_params=2, buttons=["url"]
        )
        audience(RECIPIENTS)
        roles_sync()  # the transactional flush took the migration's groups away
        django_user_model.objects.create_user("mia", password=PASSWORD)
        role_grant(username="mia", role=MARKETING)
        processes.manage("worker-campaigns", "rqworker", "transactional", "campaigns")
        processes.manage("worker-maintenance", "rqworker", "maintenance")
        processes.manage("ticker", "ticker", "--every", "1")

        # When the marketer logs in and fills in the campaign form
        page.goto(f"{live_server.url}/admin/login/?next=/admin/campaigns/campaign/add/")
        page.fill("#id_username", "mia")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_selector("#wb-campaign-form")
        page.click("#toggle-nav-sidebar")  # more room for the form and the preview
        page.fill("#id_name", "Spring sale")
        page.select_option("#id_phone_number", label="+15550001234")
        page.select_option("#id_template", label="spring_sale (en_US)")
        page.select_option("#id_lists", label="Spring customers")
        page.wait_for_selector('tr[data-slot="buttons:0"]')
        page.fill('tr[data-slot="body:1"] input.wb-source', "name")
        page.fill('tr[data-slot="body:2"] input.wb-source', "coupon")
        page.fill('tr[data-slot="buttons:0"] input.wb-source', "coupon")

        # Then the preview shows the message for the first contacts of the list
        first = page.locator("#wb-preview-samples .wb-sample").first
        first.locator(".wb-bubble-body").filter(has_text="Hi Ana!").wait_for()
        assert first.locator(".wb-bubble-body").inner_text() == (
            "Hi Ana! Your code SPRING000 takes 20% off everything until Sunday."
        )
        assert "https://shop.example/sale/SPRING000" in first.inner_text()
        assert page.locator("#wb-preview-samples .wb-sample").count() == 3
        assert page.locator("#wb-mapping-error").is_hidden()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / "campaign-progress.png").unlink(missing_ok=True)
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(SCREENSHOTS / "campaign-create.png"))

        # When they run the pre-flight check
        page.click("#wb-preflight")
        page.wait_for_selector("#wb-findings")
        assert page.inner_text("#wb-audience") == str(RECIPIENTS)
        assert "2 opted-out contact(s) skipped." in page.inner_text("#wb-findings")
        assert page.inner_text("#wb-headroom") == "unlimited"
        page.screenshot(path=str(SCREENSHOTS / "campaign-preflight.png"))
        campaign = Campaign.objects.get(name="Spring sale")
        assert campaign.param_mapping == {
            "body": {"1": {"field": "name"}, "2": {"field": "coupon"}},
            "buttons": {"0": {"field": "coupon"}},
        }

        # And launch it, then watch the live page
        page.click("#wb-launch")
        page.wait_for_selector("#wb-live")
        seen: list[float] = []
        deadline = time.monotonic() + 120
        while True:
            processes.check()
            seen.append(float(page.get_attribute("#wb-bar", "aria-valuenow") or 0))
            if 25 <= seen[-1] <= 90 and not (SCREENSHOTS / "campaign-progress.png").exists():
                assert page.inner_text("#wb-status") == "Running"
                assert page.locator("form[data-action=pause]").is_visible()
                page.screenshot(path=str(SCREENSHOTS / "campaign-progress.png"), full_page=True)
            if page.get_attribute("#wb-live", "data-status") == "completed" and seen[-1] == 100:
                break
            assert time.monotonic() < deadline, f"not complete: {statuses(campaign)}, {seen}"
            page.wait_for_timeout(500)

        # Then the bar moved through the campaign and reached 100 %
        assert any(0 < p < 100 for p in seen), seen
        assert page.inner_text("#wb-status") == "Completed"
        total = RECIPIENTS + OPTED_OUT
        assert f"{total} of {total} settled (100 %)" in page.inner_text("#wb-progress-text")
        assert "<polyline" in page.inner_html("#wb-chart")
        assert (SCREENSHOTS / "campaign-progress.png").exists()

        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED
        final = statuses(campaign)
        assert final.pop("skipped") == OPTED_OUT
        assert set(final) <= {"sent", "delivered", "read"} and sum(final.values()) == RECIPIENTS
        assert sim.duplicates() == {}
