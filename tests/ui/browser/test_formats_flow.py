"""A marketer maps Meta's marketing formats in a real browser and sees them as WhatsApp does.

The templates are stored as the catalogue sync stores them (Meta's published listings in
tests/fixtures/real/templates_listing, parsed by ``components_parse``): a carousel of three
image cards, each with a "Shop" link ending in a product's SKU, and a limited-time offer
with an image, a coupon code to copy and a booking link. The people: Ana, Bruno and Carla,
each with their own coupon and three SKUs (sku0..sku2, one per card).

The marketer (the Marketing role, not a superuser) maps every card of the carousel, sees the
three cards side by side with each contact's values, runs the pre-flight and launches; then
maps the offer and sees its countdown and the contact's code on the copy-code button.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from campaigns.catalogue.components import components_parse
from campaigns.models import BusinessAccount, Campaign, CampaignStatus, Template
from delivery.models import Message
from tests.engine_support import work_burst
from tests.factories import make_account, make_contact, make_contact_list, make_phone_number
from tests.ui.browser.conftest import browser, log_in, screenshot, wide  # noqa: F401 - fixtures
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING
from whatsblast.core import queues

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

LISTING = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "templates_listing"
NUMBER = "+55 11 4000-0002"
PEOPLE = {
    "Ana": ("BO25", ["ALOE-BLUE-ELF", "CRASSULA-BT", "BLACK-PRINCE"]),
    "Bruno": ("BR30", ["ALOE-2", "CRASSULA-2", "PRINCE-2"]),
    "Carla": ("CA15", ["ALOE-3", "CRASSULA-3", "PRINCE-3"]),
}
IMAGES = [f"https://cdn.example/plants/card{n}.jpg" for n in range(3)]
OFFER_IMAGE = "https://cdn.example/caribbean.jpg"


def stored(account: BusinessAccount, name: str) -> Template:
    """A published template as the sync stores it (cards and offer included)."""
    data = json.loads((LISTING / f"{name}.json").read_text(encoding="utf-8"))
    parsed = components_parse(data["components"])
    assert parsed.problems == []
    template: Template = Template.objects.create(
        account=account,
        name=data["name"],
        language=data["language"],
        category=data["category"],
        components=data["components"],
        body_text=parsed.body_text,
        body_param_count=parsed.body_param_count,
        body_param_names=parsed.body_param_names,
        body_examples=parsed.body_examples,
        header_format=parsed.header_format,
        header_param=parsed.header_param,
        header_example=parsed.header_example,
        buttons=parsed.buttons,
        cards=parsed.cards,
        offer=parsed.offer,
    )
    return template


def shop() -> None:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    make_phone_number(account=account, display_phone_number=NUMBER)
    stored(account, "pywa_carousel_media_cards")
    stored(account, "pywa_limited_time_offer")
    plant_lovers = make_contact_list(name="Plant lovers")
    for index, (name, (coupon, skus)) in enumerate(PEOPLE.items()):
        make_contact(
            phone=f"+55119100000{index:02d}",
            name=name,
            attributes={"coupon": coupon, **{f"sku{n}": sku for n, sku in enumerate(skus)}},
            contact_list=plant_lovers,
        )


def slot(page: Any, path: str) -> Any:
    return page.locator(f'tr[data-slot="{path}"]')


def constant(page: Any, path: str, value: str) -> None:
    slot(page, path).locator("select.wb-kind").select_option("value")
    slot(page, path).locator("input.wb-source").fill(value)


def field(page: Any, path: str, name: str) -> None:
    slot(page, path).locator("input.wb-source").fill(name)


def start(page: Any, base: str, name: str, template: str) -> None:
    page.goto(f"{base}/admin/campaigns/campaign/add/")
    page.wait_for_selector("#wb-campaign-form")
    page.fill("#id_name", name)
    page.select_option("#id_phone_number", label=NUMBER)
    page.select_option("#id_template", label=f"{template} (en_US)")
    page.select_option("#id_lists", label="Plant lovers")


def show_preview(page: Any) -> None:
    """The preview at the top of the window, beside the mapping (for the screenshot)."""
    page.locator("#wb-mapping").scroll_into_view_if_needed()
    page.evaluate(
        "window.scrollTo(0, document.querySelector('#wb-mapping').closest('fieldset')"
        ".getBoundingClientRect().top + window.scrollY - 8)"
    )


def boxes_apart(page: Any, selector: str) -> list[dict[str, float]]:
    boxes: list[dict[str, float]] = page.eval_on_selector_all(
        selector,
        "nodes => nodes.map(n => { const r = n.getBoundingClientRect();"
        " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })",
    )
    for before, after in zip(boxes, boxes[1:], strict=False):
        assert after["left"] >= before["right"], boxes  # side by side, not overlapping
        assert after["top"] == before["top"], boxes  # on one row
    return boxes


def test_a_marketer_maps_a_carousel_and_launches_it(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    shop()
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    # The carousel: every card's image as a constant link, its "Shop" link from a SKU.
    start(wide, base, "Rare succulents", "carousel_template_media_cards_v1")
    wide.wait_for_selector('tr[data-slot="cards:2:buttons:1"]')
    wide.click("#toggle-nav-sidebar")  # more room for the form and the preview
    labels = wide.locator("#wb-mapping tbody tr td:first-child").all_inner_texts()
    assert "Card 2 Header (image link or media id) *" in labels
    assert "Card 3 Button 1 (url suffix) *" in labels
    field(wide, "body:1", "name")
    constant(wide, "body:2", "30% off")
    field(wide, "body:3", "coupon")
    for card in range(3):
        constant(wide, f"cards:{card}:header", IMAGES[card])
        field(wide, f"cards:{card}:buttons:1", f"sku{card}")

    # The preview: the message, then its three cards side by side, with Ana's values.
    first = wide.locator("#wb-preview-samples .wb-sample").first
    first.locator(".wb-bubble > .wb-bubble-body").filter(has_text="Ana, add").wait_for()
    wide.locator("#wb-mapping-error").wait_for(state="hidden")
    body = first.locator(".wb-bubble > .wb-bubble-body").inner_text()
    assert "Rare succulents for sale! Ana, add" in body
    assert "are 30% off if you checkout using code BO25." in body
    cards = first.locator(".wb-carousel .wb-carousel-card")
    assert cards.count() == 3
    for card in range(3):
        shown = cards.nth(card)
        assert shown.get_attribute("aria-label") == f"Card {card + 1} of 3"
        assert shown.locator(".wb-media").get_attribute("aria-label") == f"Image: {IMAGES[card]}"
        assert shown.locator(".wb-media-link").inner_text() == IMAGES[card]
        sku = PEOPLE["Ana"][1][card]
        assert f"https://www.luckyshrub.com/rare-succulents/{sku}" in shown.inner_text()
        buttons = shown.locator(".wb-bubble-button").all_inner_texts()
        assert buttons == ["Send me more like this!", "Shop"]
    bruno = wide.locator("#wb-preview-samples .wb-sample").nth(1)
    assert "rare-succulents/CRASSULA-2" in bruno.locator(".wb-carousel-card").nth(1).inner_text()
    boxes = boxes_apart(wide, "#wb-preview-samples .wb-sample:first-child .wb-carousel-card")
    row = wide.eval_on_selector(
        "#wb-preview-samples .wb-sample:first-child .wb-carousel",
        "n => { const r = n.getBoundingClientRect(); return {left: r.left, right: r.right}; }",
    )
    assert boxes[0]["left"] >= row["left"] and boxes[0]["right"] <= row["right"]
    show_preview(wide)
    screenshot(wide, "campaign-carousel-preview.png")

    # The pre-flight, then the launch.
    wide.click("#wb-preflight")
    wide.wait_for_selector("#wb-findings")
    assert wide.inner_text("#wb-audience") == "3"
    campaign = Campaign.objects.get(name="Rare succulents")
    assert campaign.param_mapping == {
        "body": {"1": {"field": "name"}, "2": {"value": "30% off"}, "3": {"field": "coupon"}},
        "cards": [
            {"header": {"value": IMAGES[n]}, "buttons": {"1": {"field": f"sku{n}"}}}
            for n in range(3)
        ],
    }
    wide.click("#wb-launch")
    wide.wait_for_selector(".messagelist")
    work_burst(queues.CAMPAIGN_LAUNCH.queue)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING
    assert campaign.started_at is not None
    sent = Message.objects.filter(campaign=campaign, contact__name="Ana").get()
    assert [card["buttons"][0]["value"] for card in sent.params["cards"]] == PEOPLE["Ana"][1]
    assert [card["header"]["value"] for card in sent.params["cards"]] == IMAGES


def test_a_marketer_maps_a_limited_time_offer(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    shop()
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    start(wide, base, "Caribbean offer", "limited_time_offer_caribbean_pkg_2023")
    wide.wait_for_selector('tr[data-slot="offer:"]')
    wide.click("#toggle-nav-sidebar")
    expires = datetime.now(UTC) + timedelta(days=3, hours=4, minutes=30)
    constant(wide, "header:", OFFER_IMAGE)
    field(wide, "body:1", "name")
    field(wide, "body:2", "coupon")
    field(wide, "buttons:0", "coupon")
    field(wide, "buttons:1", "coupon")
    constant(wide, "offer:", expires.strftime("%Y-%m-%dT%H:%M:%SZ"))

    first = wide.locator("#wb-preview-samples .wb-sample").first
    first.locator(".wb-offer-expires").filter(has_text="Ends in").wait_for()
    wide.locator("#wb-mapping-error").wait_for(state="hidden")
    banner = first.locator(".wb-offer")
    assert banner.get_attribute("aria-label") == "Limited-time offer"
    assert banner.locator(".wb-offer-text").inner_text() == "Expiring offer!"
    assert banner.locator(".wb-offer-expires").inner_text() == "Ends in 3 days 4 h"
    assert first.locator(".wb-media").get_attribute("aria-label") == f"Image: {OFFER_IMAGE}"
    buttons = first.locator(".wb-bubble-button").all_inner_texts()
    assert buttons == ["Copy code BO25", "Book now!"]
    assert "offers?code=BO25" in first.inner_text()
    assert first.locator(".wb-bubble-body").inner_text() == (
        "Good news, Ana! Use code BO25 to get 25% off all Caribbean Destination packages!"
    )
    carla = wide.locator("#wb-preview-samples .wb-sample").nth(2)
    assert carla.locator(".wb-button-copy_code").inner_text() == "Copy code CA15"
    # Order on the page: the image, then the offer, then the message and its buttons.
    tops = [
        first.locator(selector).bounding_box()["y"]
        for selector in (".wb-media", ".wb-offer", ".wb-bubble-body", ".wb-button-copy_code")
    ]
    assert tops == sorted(tops)
    show_preview(wide)
    screenshot(wide, "campaign-offer-preview.png")

    # An expiry already past reads as ended.
    constant(wide, "offer:", "2020-01-01T00:00:00Z")
    first.locator(".wb-offer-expires").filter(has_text="Offer ended").wait_for()

    constant(wide, "offer:", expires.strftime("%Y-%m-%dT%H:%M:%SZ"))
    first.locator(".wb-offer-expires").filter(has_text="Ends in").wait_for()
    wide.click("#wb-campaign-form input[name=_save]")
    wide.wait_for_selector(".messagelist")
    campaign = Campaign.objects.get(name="Caribbean offer")
    assert campaign.param_mapping == {
        "header": {"value": OFFER_IMAGE},
        "body": {"1": {"field": "name"}, "2": {"field": "coupon"}},
        "buttons": {"0": {"field": "coupon"}, "1": {"field": "coupon"}},
        "offer": {"value": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
