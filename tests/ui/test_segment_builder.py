"""A marketer builds a segment in a real browser: three rules, the live count following each
one, a bad value shown on its row, save, and the rules back in the builder on reopening.

Headless system Chromium drives the live server (the fixtures of ``tests/ui/browser``).
The people: six contacts, five in São Paulo; Bruno is staff; of the others Ana (150) and
Dan (100) spent at least 100, Eve 99, Fay nothing recorded; Carla spent 500 in Toronto.
Screenshots go to docs/screenshots/segment-*.png.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from campaigns.models import Segment
from delivery.models import Message
from tests.factories import make_campaign, make_contact, make_contact_list, make_message
from tests.ui.browser.conftest import browser, log_in, screenshot, wide  # noqa: F401 - fixtures
from tests.ui.browser.test_marketing_and_support import fits
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

SAO_PAULO = "São Paulo"
EXPECTED_RULES = {
    "all": [
        {"field": "city", "op": "eq", "value": SAO_PAULO},
        {"not": {"list": "staff"}},
        {"field": "total_spent", "op": "gte", "value": 100},
    ]
}


def people() -> dict[str, Any]:
    staff = make_contact_list(name="staff")
    vip = make_contact_list(name="vip")
    ana = make_contact(
        phone="+5511999990001",
        name="Ana Souza",
        contact_list=vip,
        attributes={"city": SAO_PAULO, "total_spent": "150"},
    )
    make_contact(
        phone="+5521999990002",
        name="Bruno",
        contact_list=staff,
        attributes={"city": SAO_PAULO, "total_spent": "300"},
    )
    make_contact(
        phone="+14165550123", name="Carla", attributes={"city": "Toronto", "total_spent": "500"}
    )
    make_contact(
        phone="+5511999990004", name="Dan", attributes={"city": SAO_PAULO, "total_spent": 100}
    )
    make_contact(
        phone="+5511999990005", name="Eve", attributes={"city": SAO_PAULO, "total_spent": "99"}
    )
    make_contact(phone="+5511999990006", name="Fay", attributes={"city": SAO_PAULO})
    campaign = make_campaign(name="Spring sale", status="completed")
    make_message(campaign=campaign, to=ana.phone, contact=ana, status="delivered")
    return {"ana": ana, "vip": vip, "campaign": campaign}


def rule(page: Any, index: int) -> Any:
    return page.locator("#wb-builder .wb-rule").nth(index)


def add(page: Any, kind: str) -> None:
    # The root group's own buttons (a nested group has its own).
    page.locator(f"#wb-builder > .wb-group > .wb-add .wb-add-{kind}").click()


def wait_count(page: Any, expected: int) -> None:
    page.wait_for_selector(
        f"#wb-count[data-state='ready'] #wb-count-number[data-count='{expected}']"
    )


def test_a_marketer_builds_a_segment_watches_the_count_saves_and_reopens_it(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    found = people()
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    wide.goto(f"{base}/admin/campaigns/segment/add/")
    wide.wait_for_selector("#wb-builder:not([hidden])")
    assert wide.is_hidden("#id_rules")  # the JSON waits behind its toggle
    assert "Add a rule" in wide.inner_text("#wb-count")
    wide.fill("#id_name", "São Paulo big spenders")
    wide.fill("#id_description", "Spent 100 or more, not staff")

    add(wide, "field")
    first = rule(wide, 0)
    first.locator("select.wb-field").select_option("city")
    first.locator("select.wb-op").select_option("eq")
    first.locator("input.wb-value").fill(SAO_PAULO)
    wait_count(wide, 5)

    add(wide, "list")
    second = rule(wide, 1)
    second.locator("select.wb-list").select_option("staff")
    second.locator(".wb-not input").check()
    wait_count(wide, 4)

    add(wide, "field")
    third = rule(wide, 2)
    third.locator("select.wb-field").select_option("total_spent")
    third.locator("select.wb-op").select_option("gte")
    third.locator("input.wb-value").fill("lots")
    wide.wait_for_selector("#wb-count[data-state='error']")
    assert "rules.all[2].value: 'lots' cannot compare" in wide.inner_text("#wb-count-error")
    assert "wb-rule-error" in (rule(wide, 2).get_attribute("class") or "")
    assert "cannot compare" in rule(wide, 2).inner_text()

    # Two bad rules at once: both are named and marked, each with its own problem.
    first.locator("select.wb-op").select_option("gt")
    wide.wait_for_function("document.querySelectorAll('.wb-rule-error').length === 2")
    assert "rules.all[0].value" in wide.inner_text("#wb-count-error")
    assert "cannot compare" in first.locator(".wb-inline-error").inner_text()
    assert "wb-rule-error" in (rule(wide, 2).get_attribute("class") or "")
    screenshot(wide, "segment-builder-error.png", full_page=True)
    first.locator("select.wb-op").select_option("eq")
    wide.wait_for_function("document.querySelectorAll('.wb-rule-error').length === 1")
    assert "rules.all[0]" not in wide.inner_text("#wb-count-error")

    rule(wide, 2).locator("input.wb-value").fill("100")
    wait_count(wide, 2)
    assert wide.locator(".wb-rule-error").count() == 0
    sample = wide.locator("#wb-sample tbody tr")
    assert sample.count() == 2
    assert sample.nth(0).inner_text().startswith("+5511999990001")
    assert "Ana Souza" in sample.nth(0).inner_text() and "Dan" in sample.nth(1).inner_text()
    assert sample.nth(0).locator("a.wb-customer-link").get_attribute("href") == (
        "/admin/customer/+5511999990001/"
    )
    assert fits(wide), "the builder scrolls sideways at 1366 px"
    screenshot(wide, "segment-builder.png", full_page=True)

    # The JSON toggle shows what will be saved.
    wide.click("#wb-tab-json")
    assert wide.is_visible("#id_rules") and wide.is_hidden("#wb-builder")
    assert json.loads(wide.input_value("#id_rules")) == EXPECTED_RULES
    screenshot(wide, "segment-json.png", full_page=True)
    wide.click("#wb-tab-builder")
    assert wide.locator("#wb-builder .wb-rule").count() == 3

    wide.click("input[name=_save]")
    wide.wait_for_selector(".messagelist")
    segment = Segment.objects.get(name="São Paulo big spenders")
    assert segment.rules == EXPECTED_RULES
    assert "Count on its page" in wide.inner_text("#result_list")
    screenshot(wide, "segment-list.png")

    # Reopened: the same three rows, and the count of the saved rules.
    wide.goto(f"{base}/admin/campaigns/segment/{segment.pk}/change/")
    wait_count(wide, 2)
    first, second, third = rule(wide, 0), rule(wide, 1), rule(wide, 2)
    assert first.locator("select.wb-field").input_value() == "city"
    assert first.locator("select.wb-op").input_value() == "eq"
    assert first.locator("input.wb-value").input_value() == SAO_PAULO
    assert second.get_attribute("data-kind") == "list"
    assert second.locator("select.wb-list").input_value() == "staff"
    assert second.locator(".wb-not input").is_checked()
    assert third.locator("select.wb-field").input_value() == "total_spent"
    assert third.locator("select.wb-op").input_value() == "gte"
    assert third.locator("input.wb-value").input_value() == "100"
    assert wide.locator("#wb-builder .wb-rule").count() == 3

    # Saved untouched, the rules are as they were.
    wide.click("input[name=_save]")
    wide.wait_for_selector(".messagelist")
    segment.refresh_from_db()
    assert segment.rules == EXPECTED_RULES

    # The contacts list, filtered by the segment.
    wide.goto(f"{base}/admin/campaigns/contact/?segment={segment.pk}")
    rows = wide.locator("#result_list tbody tr")
    assert rows.count() == 2
    assert wide.is_visible("#wb-export-contacts")
    screenshot(wide, "segment-contacts-filter.png", full_page=True)

    # A contact's page: lists and messages.
    ana = found["ana"]
    wide.goto(f"{base}/admin/campaigns/contact/{ana.pk}/change/")
    assert "vip" in wide.inner_text("#contact-lists")
    history = wide.inner_text("#contact-history")
    assert "Spring sale" in history and "Delivered" in history
    assert Message.objects.filter(contact=ana).count() == 1
    screenshot(wide, "contact-lists-history.png", full_page=True)


def test_rules_the_builder_cannot_show_open_as_json_and_still_count(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    people()
    nested = {
        "any": [
            {"not": {"all": [{"list": "vip"}, {"marketing_within_days": 30}]}},
            {"field": "country", "op": "in", "value": ["CA"]},
        ]
    }
    shown = Segment.objects.create(name="Nested", rules=nested)
    unusual = Segment.objects.create(name="Double not", rules={"not": {"not": {"list": "vip"}}})
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")

    # Nested groups, "not" on a group, and every kind of row: shown by the builder.
    wide.goto(f"{base}/admin/campaigns/segment/{shown.pk}/change/")
    wait_count(wide, 6)  # everyone is outside "vip and recent marketing"
    assert wide.locator("#wb-builder .wb-group .wb-group").count() == 1
    assert wide.locator(
        "#wb-builder .wb-group .wb-group > .wb-group-head .wb-not input"
    ).is_checked()
    assert (
        wide.locator("#wb-builder .wb-rule[data-kind='marketing'] input.wb-days").input_value()
        == "30"
    )
    assert (
        wide.locator("#wb-builder .wb-rule[data-kind='field'] input.wb-value").input_value() == "CA"
    )
    screenshot(wide, "segment-nested.png", full_page=True)
    wide.click("input[name=_save]")
    wide.wait_for_selector(".messagelist")
    shown.refresh_from_db()
    assert shown.rules == nested

    # A "not" of a "not": the JSON view with a note, rewritten by nobody.
    wide.goto(f"{base}/admin/campaigns/segment/{unusual.pk}/change/")
    wait_count(wide, 1)
    assert wide.is_visible("#id_rules") and wide.is_hidden("#wb-builder")
    assert "“not” of a “not”" in wide.inner_text("#wb-builder-note")
    wide.click("#wb-tab-builder")
    assert wide.is_hidden("#wb-builder")  # still refused
    # Malformed JSON typed by hand: the error instead of a count.
    wide.fill("#id_rules", '{"not": {"list": ')
    wide.wait_for_selector("#wb-count[data-state='error']")
    assert "rules: is not JSON" in wide.inner_text("#wb-count-error")
    screenshot(wide, "segment-json-error.png", full_page=True)
    wide.click("input[name=_save]")
    wide.wait_for_selector(".errornote")
    assert "rules: is not JSON" in wide.inner_text("#wb-segment")
    unusual.refresh_from_db()
    assert unusual.rules == {"not": {"not": {"list": "vip"}}}


def test_every_kind_of_row_writes_the_contracts_json(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    found = people()
    campaign = found["campaign"]
    role_user(MARKETING)
    base = live_server.url
    log_in(wide, base, "mia")
    wide.goto(f"{base}/admin/campaigns/segment/add/")
    wide.wait_for_selector("#wb-builder:not([hidden])")
    wide.fill("#id_name", "Unread Spring sale")

    add(wide, "group")
    group = wide.locator("#wb-builder .wb-group .wb-group")
    group.locator("> .wb-group-head select.wb-mode").select_option("any")
    group.locator("> .wb-add .wb-add-campaign").click()
    outcome = group.locator(".wb-rule[data-kind='campaign']")
    outcome.locator("select.wb-campaign").select_option(str(campaign.pk))
    outcome.locator("select.wb-outcome").select_option("delivered_not_read")
    group.locator("> .wb-add .wb-add-marketing").click()
    group.locator(".wb-rule[data-kind='marketing'] input.wb-days").fill("7")
    group.locator("> .wb-add .wb-add-list").click()
    group.locator(".wb-rule[data-kind='list'] .wb-remove").click()

    add(wide, "field")
    added = wide.locator("#wb-builder > .wb-group > .wb-children > .wb-rule").nth(0)
    added.locator("select.wb-field").select_option("created")
    added.locator("select.wb-op").select_option("gte")
    added.locator("input.wb-value").fill("2020-01-01")
    add(wide, "field")
    other = wide.locator("#wb-builder > .wb-group > .wb-children > .wb-rule").nth(1)
    other.locator("select.wb-field").select_option(label="Other field…")
    other.locator("input.wb-field-name").fill("plan")
    other.locator("input.wb-field-name").press("Tab")
    other = wide.locator("#wb-builder > .wb-group > .wb-children > .wb-rule").nth(1)
    assert other.locator("select.wb-field").input_value() == "plan"  # now one of the fields
    other.locator("select.wb-op").select_option("exists:false")
    add(wide, "field")
    country = wide.locator("#wb-builder > .wb-group > .wb-children > .wb-rule").nth(2)
    country.locator("select.wb-field").select_option("country")
    country.locator("select.wb-op").select_option("in")
    country.locator("input.wb-value").fill("br, pt")

    expected = {
        "all": [
            {
                "any": [
                    {"campaign": campaign.pk, "outcome": "delivered_not_read"},
                    {"marketing_within_days": 7},
                ]
            },
            {"field": "created", "op": "gte", "value": "2020-01-01"},
            {"field": "plan", "op": "exists", "value": False},
            {"field": "country", "op": "in", "value": ["BR", "PT"]},
        ]
    }
    # Ana got the campaign's message and has not read it; the others got nothing.
    wait_count(wide, 1)
    wide.click("#wb-tab-json")
    assert json.loads(wide.input_value("#id_rules")) == expected
    wide.click("#wb-tab-builder")
    screenshot(wide, "segment-every-row.png", full_page=True)
    wide.click("input[name=_continue]")
    wide.wait_for_selector(".messagelist")
    assert Segment.objects.get().rules == expected
    wait_count(wide, 1)
    assert wide.locator("#wb-builder .wb-rule").count() == 5  # two in the group


def test_support_reads_the_rules_in_the_builder_without_changing_them(
    wide: Any,  # noqa: F811 - the fixture
    live_server: Any,
) -> None:
    people()
    segment = Segment.objects.create(name="SP big spenders", rules=EXPECTED_RULES)
    role_user(SUPPORT)
    base = live_server.url
    log_in(wide, base, "sam")
    wide.goto(f"{base}/admin/campaigns/segment/{segment.pk}/change/")
    wait_count(wide, 2)
    assert wide.locator("#wb-builder .wb-rule").count() == 3
    assert wide.locator("#wb-builder .wb-add, #wb-builder .wb-remove").count() == 0
    assert wide.locator("#wb-builder select:enabled, #wb-builder input:enabled").count() == 0
    assert wide.locator("input[name=_save]").count() == 0
    wide.click("#wb-tab-json")
    assert json.loads(wide.input_value("#id_rules")) == EXPECTED_RULES
    assert wide.get_attribute("#id_rules", "readonly") is not None
    wide.click("#wb-tab-builder")
    screenshot(wide, "segment-support-view.png", full_page=True)
