"""A marketer sets up an A/B test with a holdout and a tracked link in a real browser, then
reads its engagement and A/B results on the report and sends the winner to the rest.

Headless system Chromium drives the live server: the campaign form's tracked-link,
holdout and A/B sections, two variants mapped with the same editor as the campaign's own
parameters (the tracked link among the sources), saved; then the test's results are built
directly (tests/ui_campaign/engagement_support.py) and the report is read. Screenshots go
to docs/screenshots/campaign-ab-form.png and campaign-engagement-report.png.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.urls import reverse

from campaigns.models import AbState, Campaign, CampaignVariant
from tests.factories import (
    make_account,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.support import PASSWORD, role_user
from tests.ui_campaign.engagement_support import QUICK_REPLIES, seed_ab_results
from whatsblast.auth.roles import MARKETING

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
CLICK_BASE = "https://go.example.com/c"


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
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()
            # The ORM calls ran under Playwright's loop: close that connection here, or
            # it keeps the test database from being dropped.
            connections.close_all()


def row(page: Any, variant: str, slot: str) -> Any:
    return page.locator(f'#wb-variant-{variant} tr[data-slot="{slot}"]')


def texts(page: Any, selector: str) -> list[str]:
    return [" ".join(t.split()) for t in page.locator(selector).all_inner_texts()]


def test_a_marketer_sets_up_an_ab_test_and_reads_its_results(
    page: Any, live_server: Any, settings: Any
) -> None:
    settings.CLICK_BASE_URL = CLICK_BASE
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    make_phone_number(account=account, display_phone_number="+15550001234")
    make_template(
        account=account,
        name="spring_sale",
        body_text="Hi {{1}}! 20% off everything until Sunday: {{2}}",
        body_param_count=2,
        body_examples=["Asha", "https://shop.example.com"],
        buttons=QUICK_REPLIES,
    )
    make_template(
        account=account,
        name="spring_short",
        body_text="{{1}}, 20% off today only.",
        body_examples=["Asha"],
        buttons=[
            {
                "index": 0,
                "type": "URL",
                "text": "Shop the sale",
                "url": f"{CLICK_BASE}/{{{{1}}}}",
                "sub_type": "url",
                "param": "required",
                "example": "abc",
            }
        ],
    )
    customers = make_contact_list(name="Spring customers")
    for i, (name, city) in enumerate((("Ana", "Rio"), ("Bruno", "Recife"), ("Carla", "Natal"))):
        make_contact(
            phone=f"+551190000000{i}", name=name, attributes={"city": city}, contact_list=customers
        )
    role_user(MARKETING)
    base = live_server.url

    # The marketer logs in and fills in the campaign
    page.goto(f"{base}/admin/login/?next=/admin/campaigns/campaign/add/")
    page.fill("#id_username", "mia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#wb-campaign-form")
    page.click("#toggle-nav-sidebar")
    page.fill("#id_name", "Spring A/B")
    page.select_option("#id_phone_number", label="+15550001234")
    page.select_option("#id_template", label="spring_sale (en_US)")
    page.select_option("#id_lists", label="Spring customers")
    main_link = page.locator('#wb-mapping tr[data-slot="body:2"]')
    main_link.wait_for()
    page.fill('#wb-mapping tr[data-slot="body:1"] input.wb-source', "name")
    # The tracked link is a source like a field or a constant
    main_link.locator("select.wb-kind").select_option("click")
    assert main_link.locator("input.wb-source").is_hidden()
    first = page.locator("#wb-preview-samples .wb-sample .wb-bubble-body").first
    first.filter(has_text=f"{CLICK_BASE}/…").wait_for()
    assert first.inner_text() == f"Hi Ana! 20% off everything until Sunday: {CLICK_BASE}/…"

    page.fill("#id_link_destination", "https://shop.example.com/sale?city={{city}}")
    page.fill("#id_holdout_percent", "10")
    page.fill("#id_attribution_days", "5")

    # The A/B settings show once a share is given
    assert page.locator("#wb-ab-settings").is_hidden()
    page.fill("#id_ab_test_percent", "80")
    page.locator("#wb-ab-settings").wait_for()
    page.select_option("#id_ab_metric", "click")
    page.fill("#id_ab_decide_after_hours", "2")
    page.fill("#id_ab_decide_min_sample", "5")
    page.uncheck("#id_ab_auto_winner")
    assert page.locator("#wb-variant-C").is_hidden()

    # Variant A: the campaign's own template, its mapping copied in
    page.select_option("#id_variant-0-template", label="spring_sale (en_US)")
    row(page, "A", "body:2").wait_for()
    assert row(page, "A", "body:1").locator("input.wb-source").input_value() == "name"
    assert row(page, "A", "body:2").locator("select.wb-kind").input_value() == "click"
    # Variant B: another template; what it shares is copied, the button is mapped here
    page.select_option("#id_variant-1-template", label="spring_short (en_US)")
    row(page, "B", "buttons:0").wait_for()
    assert row(page, "B", "body:1").locator("input.wb-source").input_value() == "name"
    row(page, "B", "buttons:0").locator("select.wb-kind").select_option("click")
    sample_b = page.locator("#wb-variant-B .wb-variant-sample")
    sample_b.filter(has_text="Preview: Ana, 20% off today only.").wait_for()
    assert page.locator("#wb-variant-add").is_visible()

    page.locator("#wb-tracked-link").scroll_into_view_if_needed()
    page.evaluate("document.getElementById('wb-tracked-link').scrollIntoView({block: 'start'})")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(SCREENSHOTS / "campaign-ab-form.png"),
        full_page=True,
        clip=_clip(page, "#wb-tracked-link", "#wb-ab-test"),
    )

    # Saved: the settings and two variants
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    assert "Draft Spring A/B saved." in page.inner_text(".messagelist")
    campaign = Campaign.objects.get(name="Spring A/B")
    assert campaign.link_destination == "https://shop.example.com/sale?city={{city}}"
    assert (campaign.holdout_percent, campaign.attribution_days) == (10.0, 5)
    assert (campaign.ab_test_percent, campaign.ab_metric, campaign.ab_auto_winner) == (
        80.0,
        "click",
        False,
    )
    assert campaign.param_mapping == {"body": {"1": {"field": "name"}, "2": {"click": True}}}
    variants = list(CampaignVariant.objects.filter(campaign=campaign).order_by("position"))
    assert [(v.label, v.template.name) for v in variants] == [
        ("A", "spring_sale"),
        ("B", "spring_short"),
    ]
    assert variants[1].param_mapping == {
        "body": {"1": {"field": "name"}},
        "buttons": {"0": {"click": True}},
    }

    # When the test has run (its results built directly), the report shows them
    seed_ab_results(campaign)
    page.goto(base + reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    page.wait_for_selector("#wb-report-ab")
    assert page.inner_text("#wb-ab-state") == "Waiting for the marketer's pick"
    arms = texts(page, "#wb-report-ab tbody tr")
    assert arms[0].startswith("A spring_sale (en_US) 10 3 30.0 %")
    assert arms[1].startswith("B leads spring_short (en_US) 10 6 60.0 %")
    assert "+30.0 points" in arms[1]
    clicks = texts(page, "#wb-report-clicks tr")
    assert clicks[:4] == [
        "Clicks 10 Every tap by a person, a second tap counted again.",
        "People who clicked 9 Each recipient counted once.",
        "Click rate 45.0 % People who clicked, of those delivered.",
        "Preview fetches 2 Apps drawing the link's preview: not people, not counted above.",
    ]
    roi = texts(page, "#wb-report-roi tr")
    assert roi[0].startswith("Conversions 3") and roi[1] == "Revenue 180.0000 BRL"
    assert page.inner_text('#wb-report-lift tr[data-figure="control"] td') == (
        "20.0 % of 5 recipients"
    )
    assert texts(page, "#wb-report-meta tr")[1] == "Sent 20 not available"
    assert page.locator("#wb-follow-ups tr[data-outcome='delivered_not_clicked']").is_visible()
    page.evaluate("document.getElementById('wb-ab-heading').scrollIntoView({block: 'start'})")
    page.screenshot(path=str(SCREENSHOTS / "campaign-engagement-report.png"), full_page=True)

    # The marketer sends variant B to the rest
    page.click("#wb-report-ab tr[data-arm='B'] button.wb-ab-pick")
    page.wait_for_selector(".messagelist")
    assert "Variant B is the winner" in page.inner_text(".messagelist")
    assert page.inner_text("#wb-ab-state") == "Winner sent to the rest"
    assert page.locator("button.wb-ab-pick").count() == 0
    campaign.refresh_from_db()
    assert campaign.ab_state == AbState.DECIDED and campaign.ab_winner == variants[1]


def _clip(page: Any, first: str, last: str) -> dict[str, float]:
    """The page area from ``first``'s top to ``last``'s bottom, the page's full width."""
    top = page.eval_on_selector(first, "e => e.getBoundingClientRect().top + window.scrollY")
    bottom = page.eval_on_selector(last, "e => e.getBoundingClientRect().bottom + window.scrollY")
    width = page.evaluate("document.documentElement.clientWidth")
    return {"x": 0, "y": max(0, top - 16), "width": width, "height": bottom - top + 32}
