"""A marketer builds journeys in a real browser, signed in as Marketing (never a superuser),
at 1366 px: the cart reminder in the builder (a wrong step shown on its row, then fixed),
live; a recurring weekly campaign and its next runs; the journey's page after people
entered (events in and the sweep, called directly) with each step's counts; test contacts
entered by hand with a wait skipped; a dry run; one customer's page saying where they are
and why. Every page is written to docs/screenshots/journey-*.png.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Contact
from delivery.models import Message
from journeys.events_in import events_record
from journeys.models import Journey, JourneyInstance, JourneyRun, JourneyStatus
from journeys.recurring import next_run_times, recurring_runs
from journeys.routing import events_route
from journeys.running import definition_of
from journeys.sweep import journeys_sweep
from journeys.versions import journey_create, journey_go_live
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.browser.test_marketing_and_support import fits
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

URL_BUTTON = {
    "index": 0,
    "type": "URL",
    "text": "Back to cart",
    "url": "https://shop.example/{{1}}",
    "sub_type": "url",
    "param": "required",
    "example": "c/1",
}
ANA = "+5511987654321"  # São Paulo
BRUNO = "+351912345678"  # Lisbon
CARLA = "+12125550123"  # New York
TESTER = "+5511900000099"


def shop() -> Any:
    """A number with the two reminder templates, and the people who will shop."""
    number = make_phone_number(display_phone_number="+55 11 4000-1234")
    for name, text in (
        ("cart_reminder", "Hi {{1}}, your cart is waiting"),
        ("cart_last_call", "{{1}}, your cart is about to expire"),
    ):
        make_template(
            account=number.account,
            name=name,
            language="pt_BR",
            body_text=text,
            body_examples=["Ana"],
            buttons=[URL_BUTTON],
        )
    shoppers = make_contact_list(name="Shoppers")
    for phone, name in ((ANA, "Ana Souza"), (BRUNO, "Bruno Lima"), (CARLA, "Carla Diaz")):
        make_contact(phone=phone, name=name, contact_list=shoppers)
    # Portugal has more than one zone: Bruno's field says his.
    Contact.objects.filter(phone=BRUNO).update(attributes={"timezone": "Europe/Lisbon"})
    make_contact(phone=TESTER, name="Tess Tester")
    return number


def journey_live(number: Any, definition: dict[str, Any], name: str) -> Journey:
    journey = journey_create(name=name, phone_number=number, definition=definition)
    return journey_go_live(journey=journey)


def fill_mapping(step: Any) -> None:
    """Body {{1}} ← the contact's name; the URL button's suffix ← the event's cart_path."""
    body = step.locator("tr[data-slot='body:1']")
    body.locator("select").select_option("field")
    body.locator("input.wb-source").fill("name")
    button = step.locator("tr[data-slot='buttons:0']")
    button.locator("select").select_option("property")
    button.locator("input.wb-source").fill("cart_path")


def add_step(page: Any, kind: str, step_id: str) -> Any:
    page.click(f"#wb-builder .wb-add-{kind}")
    step = page.locator("#wb-steps > li.wb-step").last
    step.locator("input.wb-step-id").fill(step_id)
    step.locator("input.wb-step-id").press("Tab")
    return page.locator(f"#wb-steps > li.wb-step[data-step='{step_id}']")


def full_screenshot(page: Any, name: str) -> None:
    """The whole page, from its top (the sticky sidebar and check panel where they sit)."""
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, name, full_page=True)


def check_settles(page: Any) -> None:
    page.wait_for_function(
        "['ok', 'error'].includes(document.getElementById('wb-check').dataset.state)"
    )


def build_cart_reminder(page: Any, base: str) -> Journey:
    page.goto(f"{base}/admin/journeys/journey/")
    page.click("#wb-journey-add")
    page.wait_for_selector("#wb-builder .wb-jb-section")
    page.fill("#id_name", "Cart reminder")
    page.select_option("#id_phone_number", index=1)
    page.fill("#id_description", "Two reminders for a cart left behind, unless they buy or reply.")
    page.fill("#wb-builder input.wb-jb-event", "cart_updated")
    page.fill("#wb-builder input.wb-jb-key", "cart_id")
    page.click("#wb-builder .wb-jb-add-exit")
    page.fill("#wb-builder input.wb-jb-exit-event", "checkout")
    page.fill("#wb-builder input.wb-jb-exit-reason", "bought")
    # The first step is there already: a wait of one hour.
    assert page.locator("#wb-steps > li.wb-step").count() == 1
    assert page.input_value("#wb-steps li[data-step='wait'] input.wb-jb-hours") == "1"

    remind = add_step(page, "send", "remind")
    remind.locator("select[aria-label='Template']").select_option("cart_reminder")
    remind = page.locator("#wb-steps > li.wb-step[data-step='remind']")
    fill_mapping(remind)

    reply = add_step(page, "wait", "reply")
    reply.locator("select[aria-label='Wait kind']").select_option("for_reply")
    reply = page.locator("#wb-steps > li.wb-step[data-step='reply']")
    assert reply.locator("input.wb-jb-hours").input_value() == "24"
    reply.locator("select[aria-label='If they reply']").select_option("end")

    again = add_step(page, "send", "again")
    again.locator("select[aria-label='Template']").select_option("cart_last_call")
    # Its parameters are left unmapped: the step is wrong.
    done = add_step(page, "exit", "done")
    done.locator("input[placeholder='done']").fill("reminded twice")
    check_settles(page)
    assert page.get_attribute("#wb-check", "data-state") == "error"

    page.click("#wb-save")
    page.wait_for_selector("#wb-problems")
    assert not Journey.objects.exists()  # nothing saved
    assert "steps[3].mapping" in page.inner_text("#wb-problem-list")
    wrong = page.locator("#wb-steps > li.wb-step[data-step='again']")
    assert wrong.locator(".wb-inline-error").count() == 1
    assert "body" in wrong.locator(".wb-inline-error").inner_text()
    assert page.locator("#wb-steps .wb-inline-error").count() == 1  # only that row
    wrong.scroll_into_view_if_needed()
    screenshot(page, "journey-builder-error.png")

    fill_mapping(wrong)
    check_settles(page)
    assert page.get_attribute("#wb-check", "data-state") == "ok"
    assert page.locator("#wb-steps .wb-inline-error").count() == 0
    assert fits(page), "the builder scrolls sideways at 1366 px"
    full_screenshot(page, "journey-builder.png")
    page.click("#wb-save")
    page.wait_for_selector("#journey-head")
    assert "saved as a draft" in page.inner_text(".messagelist")
    return Journey.objects.get(name="Cart reminder")


def test_a_marketer_builds_the_cart_reminder_and_follows_people_through_it(
    wide: Any, live_server: Any
) -> None:
    number = shop()
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")
    journey = build_cart_reminder(wide, base)

    definition = definition_of(journey.pk, journey.version)
    assert definition.key == "cart_id" and definition.step_ids() == [
        "wait", "remind", "reply", "again", "done",
    ]  # fmt: skip
    remind = definition.send_steps()[0]
    assert remind.mapping == {
        "body": {"1": {"field": "name"}},
        "buttons": {"0": {"property": "cart_path"}},
    }
    assert journey.phone_number_id == number.pk

    wide.click("#journey-go-live button")
    wide.wait_for_selector("#journey-pause")
    assert wide.inner_text("#journey-status") == "Live"

    # People put things in their carts; an hour later the first reminder goes.
    t0 = timezone.now()
    carts = [
        {"phone": phone, "name": "cart_updated",
         "properties": {"cart_id": f"cart-{i}", "cart_path": f"c/{i}"}}
        for i, phone in enumerate((ANA, BRUNO, CARLA))
    ]  # fmt: skip
    events_record(api_key_id=None, items=carts, idempotency_key=None, now=t0)
    events_route(now=t0)
    journeys_sweep(now=t0)
    journeys_sweep(now=t0 + timedelta(minutes=61))
    # Carla's is a US number: Meta sends no marketing template there, so it is skipped,
    # saying so. Meta's receipts for the other two; Bruno checks out.
    sent = Message.objects.filter(journey_step="remind").order_by("id")
    assert sent.count() == 2
    Message.objects.filter(pk=sent[0].pk).update(status="read", sent_at=t0, delivered_at=t0)
    Message.objects.filter(pk=sent[1].pk).update(status="delivered", sent_at=t0)
    events_record(
        api_key_id=None,
        items=[{"phone": BRUNO, "name": "checkout", "properties": {"cart_id": "cart-1"}}],
        idempotency_key=None,
        now=t0 + timedelta(minutes=70),
    )
    events_route(now=t0 + timedelta(minutes=70))

    wide.reload()
    assert wide.inner_text("#journey-entered") == "3"
    assert wide.inner_text("#journey-active") == "2"
    assert wide.inner_text("#journey-left") == "1"
    assert "bought" in wide.inner_text("#journey-exited")
    row = wide.locator("#journey-steps tr[data-step='remind']")
    assert row.locator(".wb-sent").inner_text() == "2"
    skipped = row.locator(".wb-skipped").inner_text()
    assert skipped.startswith("1") and "US" in skipped, skipped
    assert "delivered 2" in row.locator(".wb-messages").inner_text()
    assert "read 1" in row.locator(".wb-messages").inner_text()
    assert wide.locator("#journey-steps tr[data-step='reply'] .wb-waiting").inner_text() == "2"

    # A test contact, entered by hand, and their wait skipped.
    wide.fill("#journey-test-add input[name=phone]", TESTER)
    wide.click("#journey-test-add button")
    wide.wait_for_selector("#journey-test-enter")
    wide.fill("#journey-test-enter textarea", '{"cart_id": "t-1", "cart_path": "c/t"}')
    wide.click("#journey-test-enter button")
    wide.wait_for_selector(".messagelist")
    assert "entered Cart reminder at wait" in wide.inner_text(".messagelist")
    journeys_sweep()  # the tick's pass: they start their hour's wait
    wide.reload()
    wide.wait_for_selector("button.wb-skip-wait")
    tester = Contact.objects.get(phone=TESTER)
    assert "at wait" in wide.inner_text(f"tr[data-test-contact='{tester.pk}']")
    wide.click("button.wb-skip-wait")
    wide.wait_for_selector(".messagelist")
    assert "ends now" in wide.inner_text(".messagelist")
    journeys_sweep(now=timezone.now() + timedelta(seconds=1))
    wide.reload()
    assert "at reply" in wide.inner_text(f"tr[data-test-contact='{tester.pk}']")
    # Test contacts are not counted in the figures.
    assert wide.inner_text("#journey-entered") == "3"
    assert fits(wide), "the journey page scrolls sideways at 1366 px"
    full_screenshot(wide, "journey-page.png")

    # A dry run over the list, with example properties.
    wide.check("#journey-dry-run-form input[value=list]")
    wide.fill("#journey-dry-run-form textarea", '{"cart_id": "c-9", "cart_path": "c/9"}')
    wide.click("#journey-dry-run-form button")
    wide.wait_for_selector(".wb-dry-person")
    people = wide.locator(".wb-dry-person")
    assert people.count() == 3
    zones = sorted(people.locator(".wb-zone").all_inner_texts())
    assert zones == ["America/New_York", "America/Sao_Paulo", "Europe/Lisbon"]
    lisbon = wide.locator(".wb-dry-person", has_text="Europe/Lisbon")
    assert "sends cart_reminder" in lisbon.inner_text()
    assert "Europe/Lisbon" in lisbon.locator("tr[data-step='remind']").inner_text()
    assert fits(wide), "the dry run scrolls sideways at 1366 px"
    full_screenshot(wide, "journey-dry-run.png")

    # The step's campaign names its journey and has no buttons of its own.
    step_campaign = sent[0].campaign_id
    wide.goto(f"{base}/admin/campaigns/campaign/{step_campaign}/change/")
    assert "the step remind of the journey Cart reminder" in wide.inner_text("#wb-journey-origin")
    assert wide.locator("form[data-action=pause]").count() == 0
    screenshot(wide, "journey-step-campaign.png")

    # Ana's page says where she is and why; Bruno's why he left.
    ana = Contact.objects.get(phone=ANA)
    wide.goto(f"{base}/admin/customer/{ANA}/")
    section = wide.locator("#customer-journeys")
    row = section.locator(f"tr[data-journey='{journey.pk}']")
    assert "at reply" in row.inner_text()
    history = section.locator(".wb-person-history").first.inner_text()
    assert "Sent" in history and "cart_reminder" in history
    assert JourneyInstance.objects.get(contact=ana).step == "reply"
    assert fits(wide), "the customer page scrolls sideways at 1366 px"
    section.scroll_into_view_if_needed()
    screenshot(wide, "customer-journeys.png")
    wide.goto(f"{base}/admin/customer/{BRUNO}/")
    assert "left: bought" in wide.inner_text("#customer-journeys")


def test_a_live_edit_asks_first_and_makes_a_version(wide: Any, live_server: Any) -> None:
    number = shop()
    role_user(MARKETING)
    journey = journey_live(
        number,
        {
            "entry": {"type": "event", "event": "cart_updated"},
            "steps": [
                {"id": "wait", "type": "wait", "delay": {"hours": 1}},
                {"id": "done", "type": "exit", "reason": "waited"},
            ],
        },
        name="Short",
    )
    events_record(
        api_key_id=None,
        items=[{"phone": ANA, "name": "cart_updated"}],
        idempotency_key=None,
    )
    events_route()
    base = live_server.url
    log_in(wide, base, "mia")
    wide.goto(f"{base}/admin/journeys/journey/{journey.pk}/edit/")
    wide.wait_for_selector("#wb-builder .wb-step")
    wide.locator("#wb-steps li[data-step='wait'] input.wb-jb-hours").fill("2")
    # The JSON view shows the same definition and takes an edit back into the builder.
    wide.click("#wb-tab-json")
    definition = json.loads(wide.input_value("#id_definition"))
    assert definition["steps"][0]["delay"] == {"hours": 2}
    definition["steps"][1]["reason"] = "waited two hours"
    wide.fill("#id_definition", json.dumps(definition))
    wide.click("#wb-tab-builder")
    assert wide.input_value("#wb-steps li[data-step='done'] input[placeholder='done']") == (
        "waited two hours"
    )
    wide.fill("#id_note", "wait two hours")
    wide.click("#wb-save")
    wide.wait_for_selector("#wb-new-version")
    text = wide.inner_text("#wb-new-version")
    assert "Save as version 2?" in text and "1 at wait go on" in text
    assert Journey.objects.get(pk=journey.pk).version == 1
    wide.click("#wb-confirm-save")
    wide.wait_for_selector("#journey-head")
    assert "version 2" in wide.inner_text(".messagelist")
    assert "wait two hours" in wide.inner_text("#journey-versions")
    assert Journey.objects.get(pk=journey.pk).version == 2


def test_a_marketer_sets_up_a_weekly_recurring_campaign_and_reads_its_runs(
    wide: Any, live_server: Any
) -> None:
    number = shop()
    template = make_template(account=number.account, name="weekly_deals", language="pt_BR")
    make_campaign(
        phone_number=number,
        template=template,
        lists=[make_contact_list(name="Newsletter")],
        name="Weekly deals",
        status="draft",
    )
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")
    wide.goto(f"{base}/admin/journeys/journey/")
    wide.click("#wb-recurring-add")
    wide.wait_for_load_state("load")
    wide.fill("#id_name", "Weekly deals, Mondays")
    weekly = wide.locator("#id_campaign option", has_text="Weekly deals")
    wide.select_option("#id_campaign", value=weekly.get_attribute("value"))
    wide.check("input[name=every][value=week]")
    wide.wait_for_selector(".field-weekdays", state="visible")
    wide.wait_for_selector("#id_day_of_month", state="hidden")
    wide.check("input[name=weekdays][value=mon]")
    wide.fill("#id_at", "10:00")
    wide.fill("#id_zone", "America/Sao_Paulo")
    wide.check("#id_only_new")
    wide.click("#wb-save")
    wide.wait_for_selector("#journey-next-runs")
    journey = Journey.objects.get(name="Weekly deals, Mondays")
    assert "every Monday 10:00 America/Sao_Paulo" in wide.inner_text("#journey-entry")
    runs = wide.locator("#journey-next-runs tr.wb-next-run")
    assert runs.count() == 5
    assert all("Mon" in t and "10:00 America/Sao_Paulo" in t for t in runs.all_inner_texts())

    wide.click("#journey-go-live button")
    wide.wait_for_selector("#journey-pause")
    # The first run comes due: the tick launches it as a campaign of its own.
    entry = definition_of(journey.pk, journey.version).entry
    first = next_run_times(entry, now=timezone.now(), count=1)[0]  # type: ignore[arg-type]
    Journey.objects.filter(pk=journey.pk).update(live_since=first - timedelta(days=1))
    recurring_runs(now=first + timedelta(minutes=1))
    run = JourneyRun.objects.get(journey=journey)
    assert run.campaign is not None and run.campaign.kind == "recurring_run"
    wide.reload()
    row = wide.locator(f"#journey-runs tr[data-run='{run.pk}']")
    assert "Weekly deals, Mondays" in row.inner_text()
    assert fits(wide), "the recurring campaign's page scrolls sideways at 1366 px"
    full_screenshot(wide, "journey-recurring.png")

    # The list names how it runs and when next.
    wide.goto(f"{base}/admin/journeys/journey/")
    listed = wide.inner_text("#result_list")
    assert "every Monday 10:00 America/Sao_Paulo" in listed and "repeats Weekly deals" in listed
    screenshot(wide, "journey-list.png")
    assert fits(wide), "the journeys list scrolls sideways at 1366 px"
    assert wide.evaluate(
        "(() => { const r = document.querySelector('#changelist .results');"
        " return r.scrollWidth <= r.clientWidth; })()"
    ), "the journeys table scrolls inside the list at 1366 px"
    # The run's report is one click away, and its campaign names the recurring campaign.
    wide.goto(f"{base}/admin/journeys/journey/{journey.pk}/change/")
    wide.click(f"#journey-runs tr[data-run='{run.pk}'] a.wb-run-report")
    wide.wait_for_selector("#wb-report-figures")
    assert Journey.objects.get(pk=journey.pk).status == JourneyStatus.LIVE


def test_support_reads_a_journey_but_cannot_run_or_change_it(wide: Any, live_server: Any) -> None:
    number = shop()
    journey = journey_live(
        number,
        {"entry": {"type": "event", "event": "cart_updated"},
         "steps": [{"id": "wait", "type": "wait", "delay": {"hours": 1}}]},
        name="Read only",
    )  # fmt: skip
    role_user(SUPPORT)
    base = live_server.url
    log_in(wide, base, "sam")
    wide.goto(f"{base}/admin/journeys/journey/")
    assert "Read only" in wide.inner_text("#result_list")
    assert wide.locator("#wb-journey-add").count() == 0
    wide.click("#result_list a:has-text('Read only')")
    wide.wait_for_selector("#journey-head")
    assert wide.locator("#journey-actions form").count() == 0
    assert wide.locator("#journey-edit").count() == 0
    assert wide.locator("#journey-test-add").count() == 0
    assert journey.status == JourneyStatus.LIVE
