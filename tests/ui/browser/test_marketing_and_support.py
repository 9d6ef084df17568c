"""A marketer and a support agent at work in a real browser, each signed in with their role
(never a superuser), at 1366 px, on one finished campaign with failures, dead letters,
replies and opt-outs.

The first test reads that campaign's figures from every place a person meets them (the
campaign list, the campaign page, the report, the Messages filter and the CSV export) and
asserts they are the same numbers. The others walk what each role does next; every page
they see is written to docs/screenshots/ (shown in the README).
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from delivery.models import DeadLetter
from tests.factories import make_campaign, make_contact, make_message, make_phone_number
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import dead_message, role_user
from webhooks.models import InboundMessage
from whatsblast.admin import pagination
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

# The campaign the tests share, figure by figure, as a person counts it.
EXPECTED = {
    "audience": 20,
    "sent": 14,  # accepted by Meta: 6 sent + 5 delivered + 3 read
    "delivered": 8,  # 5 delivered + 3 read
    "read": 3,
    "failed": 5,  # 3 failed + 2 dead-lettered
    "replies": 3,  # recipients who wrote back (one of them twice)
    "opt_outs": 2,
    "skipped": 1,
}
LABELS = {
    "Audience": "audience",
    "Sent": "sent",
    "Delivered": "delivered",
    "Read": "read",
    "Failed": "failed",
    "Replied": "replies",
    "Opted out": "opt_outs",
    "Skipped": "skipped",
}
OUTCOME_FILTER = {
    "audience": "",
    "sent": "sent",
    "delivered": "delivered",
    "read": "read",
    "failed": "failed",
    "replies": "replied",
    "opt_outs": "opted_out",
    "skipped": "skipped",
}
NAMES = ("Ana Souza", "Bruno Lima", "Carla Dias", "Davi Rocha", "Elisa Reis")


def number(text: str) -> int:
    """The first whole number in a cell: "1,234\n70 %" → 1234."""
    match = re.search(r"\d[\d,]*", text)
    assert match, text
    return int(match.group().replace(",", ""))


def finished_campaign() -> Campaign:
    now = timezone.now()
    campaign = make_campaign(
        name="Black Friday 2026",
        phone_number=make_phone_number(display_phone_number="+55 11 4000-0000"),
        status=CampaignStatus.COMPLETED,
        started_at=now - timedelta(hours=2),
        completed_at=now - timedelta(hours=1, minutes=40),
    )
    people = iter(range(100))

    def message(status: str, **fields: Any) -> Any:
        i = next(people)
        contact = make_contact(phone=f"+55119{i:08d}", name=NAMES[i % len(NAMES)])
        sent = now - timedelta(hours=2) if status in ("sent", "delivered", "read") else None
        return make_message(
            campaign=campaign,
            to=contact.phone,
            contact=contact,
            status=status,
            sent_at=sent,
            **fields,
        )

    read = [message("read", pricing_category="marketing", billable=True) for _ in range(3)]
    delivered = [
        message("delivered", pricing_category="marketing", billable=True) for _ in range(5)
    ]
    for _ in range(6):
        message("sent")
    for code, title in ((131026, "Message undeliverable"),) * 2 + (
        (131049, "Not delivered to maintain healthy ecosystem engagement"),
    ):
        message("failed", last_error_code=code, last_error_title=title, attempt=1)
    message("skipped", skip_reason="opted out")
    for i in range(2):
        contact = make_contact(phone=f"+55119{next(people):08d}", name=f"Fabio Dead {i}")
        letter = dead_message(campaign=campaign, to=contact.phone, contact=contact)
        DeadLetter.objects.filter(pk=letter.pk).update(created_at=now - timedelta(days=i))
    for n, (m, text, opt_out) in enumerate(
        (
            (read[0], "Thanks!", False),
            (read[0], "Does it work in store too?", False),
            (read[1], "STOP", True),
            (delivered[0], "Parar", True),
        )
    ):
        InboundMessage.objects.create(
            wamid=f"wamid.in-{n}",
            from_phone=m.to,
            type="text",
            text=text,
            sent_at=now - timedelta(minutes=90 - n),
            campaign=campaign,
            contact=m.contact,
            is_opt_out=opt_out,
            payload={},
        )
    return campaign


def fits(page: Any) -> bool:
    """Nothing scrolls sideways at this width."""
    return bool(
        page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )


def test_one_campaigns_counts_agree_on_list_page_report_messages_filter_and_export(
    wide: Any, live_server: Any
) -> None:
    role_user(MARKETING)
    campaign = finished_campaign()
    base = live_server.url
    log_in(wide, base, "mia")

    # The campaign list.
    wide.goto(f"{base}/admin/campaigns/campaign/")
    row = wide.locator("#result_list tbody tr", has_text=campaign.name)
    on_list = {
        key: number(row.locator(f"td.field-{column}").inner_text())
        for key, column in {
            "audience": "audience",
            "sent": "sent",
            "delivered": "delivered",
            "read": "read",
            "failed": "failed",
            "replies": "replies",
        }.items()
    }
    assert on_list == {k: EXPECTED[k] for k in on_list}

    # The campaign page (drawn by its script from the live JSON).
    wide.goto(f"{base}/admin/campaigns/campaign/{campaign.pk}/change/")
    wide.wait_for_selector("#wb-funnel tr")
    cells = wide.eval_on_selector_all(
        "#wb-funnel tr", "rows => rows.map(r => [r.cells[0].innerText, r.cells[1].innerText])"
    )
    on_page = {LABELS[label]: number(count) for label, count in cells}
    assert on_page == EXPECTED

    # The report.
    wide.goto(f"{base}/admin/campaigns/campaign/{campaign.pk}/report/")
    on_report = {
        key: number(wide.inner_text(f"#wb-report-figures tr[data-figure={key}] td.wb-num"))
        for key in EXPECTED
    }
    assert on_report == EXPECTED

    # The Messages filter: each figure's link on the report lists exactly those messages.
    in_filter = {}
    for key, outcome in OUTCOME_FILTER.items():
        query = f"?campaign__id__exact={campaign.pk}" + (f"&outcome={outcome}" if outcome else "")
        wide.goto(f"{base}/admin/delivery/message/{query}")
        in_filter[key] = number(wide.inner_text(".paginator .wb-count"))
        assert wide.locator("#result_list tbody tr").count() == in_filter[key]
    assert in_filter == EXPECTED

    # The CSV export, downloaded from the report.
    wide.goto(f"{base}/admin/campaigns/campaign/{campaign.pk}/report/")
    with wide.expect_download() as download:
        wide.click("#wb-report-export")
    rows = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    statuses = [r["status"] for r in rows]
    in_export = {
        "audience": len(rows),
        "sent": sum(s in ("sent", "delivered", "read") for s in statuses),
        "delivered": sum(s in ("delivered", "read") for s in statuses),
        "read": statuses.count("read"),
        "failed": sum(s in ("failed", "dead") for s in statuses),
        "replies": sum(int(r["replies"]) > 0 for r in rows),
        "opt_outs": sum(r["opted_out"] == "true" for r in rows),
        "skipped": statuses.count("skipped"),
    }
    assert in_export == EXPECTED
    assert sum(int(r["replies"]) for r in rows) == 4  # and every reply is in it


def test_a_marketer_compares_campaigns_reads_a_report_and_follows_a_failure_code(
    wide: Any, live_server: Any, monkeypatch: Any
) -> None:
    role_user(MARKETING)
    campaign = finished_campaign()
    scheduled = make_campaign(
        name="Christmas teaser",
        status=CampaignStatus.SCHEDULED,
        scheduled_at=timezone.now() + timedelta(days=3),
    )
    cancelled = make_campaign(name="Cyber Monday (stopped)", status=CampaignStatus.CANCELLED)
    for status in ("delivered", "delivered", "cancelled", "cancelled", "cancelled"):
        make_message(campaign=cancelled, status=status)
    base = live_server.url
    log_in(wide, base, "mia")

    wide.goto(f"{base}/admin/campaigns/campaign/")
    headers = wide.locator("#result_list thead th").all_inner_texts()
    for column in ("AUDIENCE", "SENT", "DELIVERED", "READ", "FAILED", "REPLIES"):
        assert column in [h.strip().upper() for h in headers], headers
    assert fits(wide), "the campaign list scrolls sideways at 1366 px"
    assert "View site" not in wide.content()
    screenshot(wide, "campaign-list.png")

    # The report, and a failure code leads to the messages that failed with it.
    wide.click(f"#result_list tr:has-text('{campaign.name}') a.wb-report-link")
    wide.wait_for_selector("#wb-report-figures")
    assert "Report: Black Friday 2026" in wide.inner_text("#content")
    assert fits(wide)
    screenshot(wide, "campaign-report.png", full_page=True)
    assert wide.locator("#wb-report-failures a.wb-dead-link").count() == 0  # not marketing's
    wide.click("#wb-report-failures a.wb-code:text-is('131026')")
    wide.wait_for_selector("#result_list")
    assert "last_error_code=131026" in wide.url
    assert wide.locator("#result_list tbody tr").count() == 2
    assert wide.inner_text(".paginator .wb-count") == "2 messages"

    # A cancelled campaign says what happened, not "Done." under a full green bar.
    wide.goto(f"{base}/admin/campaigns/campaign/{cancelled.pk}/change/")
    wide.wait_for_selector("#wb-funnel tr")
    progress = wide.inner_text("#wb-progress-text")
    assert (
        progress.startswith("Cancelled: 2 sent") and "3 not sent because of the cancel" in progress
    )
    assert "settled" not in progress
    assert "wb-bar-cancelled" in (wide.get_attribute("#wb-bar", "class") or "")
    assert wide.inner_text("#wb-eta") == "Cancelled: nothing more will be sent."
    assert "Cyber Monday (stopped)" in wide.title() and "Change campaign" not in wide.title()
    screenshot(wide, "campaign-cancelled.png")

    # A scheduled one says when it starts, titled by its name.
    wide.goto(f"{base}/admin/campaigns/campaign/{scheduled.pk}/change/")
    wide.wait_for_selector("#wb-eta:not(:empty)")
    assert wide.inner_text("#wb-eta").startswith("Starts ")
    assert wide.inner_text("#wb-progress-text").startswith("Scheduled for ")
    assert "Done" not in wide.inner_text("#wb-live")
    assert "Christmas teaser" in wide.title() and "Change campaign" not in wide.title()

    # A launching one (its messages being created) is neither done nor "Change campaign".
    launching = make_campaign(name="Launch in progress", status_reason="Launch queued by mia")
    wide.goto(f"{base}/admin/campaigns/campaign/{launching.pk}/change/")
    wide.wait_for_selector("#wb-eta:not(:empty)")
    assert wide.inner_text("#wb-status") == "Launching"
    assert wide.inner_text("#wb-progress-text") == "Launching: creating the messages…"
    assert wide.inner_text("#wb-eta") == "Starts once the messages are created."

    # Times in the marketer's own zone, one format.
    wide.goto(f"{base}/admin/campaigns/campaign/")
    started = timezone.localtime(campaign.started_at, ZoneInfo("America/Sao_Paulo"))
    wide.click("#wb-time-zone")
    wide.fill("#id_time_zone", "America/Sao_Paulo")
    wide.click("#preferences-form input[type=submit]")
    wide.wait_for_url("**/admin/campaigns/campaign/")
    assert (wide.text_content("#wb-time-zone") or "").strip() == "Times: America/Sao_Paulo"
    row = wide.locator("#result_list tbody tr", has_text=campaign.name)
    assert f"started {started:%Y-%m-%d %H:%M}" in row.inner_text()

    # A list longer than the count goes says so instead of showing a number as exact.
    monkeypatch.setattr(pagination, "COUNT_CAP", 10)
    wide.goto(f"{base}/admin/delivery/message/")
    assert wide.inner_text(".paginator .wb-count") == "More than 10 messages"

    # A page of another role: an admin page with a way back, not a bare "403 Forbidden".
    wide.goto(f"{base}/admin/campaigns/campaign/")
    wide.evaluate("location.href = '/admin/delivery/deadletter/'")
    wide.wait_for_selector("#wb-back")
    assert "You don't have access to this page" in wide.inner_text("#content")
    screenshot(wide, "forbidden.png")
    wide.click("#wb-back")
    wide.wait_for_url("**/admin/campaigns/campaign/")


def test_a_support_agent_finds_dead_letters_by_phone_in_any_format_and_by_error(
    wide: Any, live_server: Any
) -> None:
    role_user(SUPPORT)
    campaign = finished_campaign()
    letters = list(DeadLetter.objects.filter(campaign=campaign).order_by("id"))
    decided = letters[1]
    DeadLetter.objects.filter(pk=decided.pk).update(status="discarded", note="left the company")
    base = live_server.url
    log_in(wide, base, "sam")

    # The sidebar's names, and the list opens on what is still to decide.
    wide.goto(f"{base}/admin/")
    assert "Unmatched statuses" in wide.inner_text("#content-main")
    wide.goto(f"{base}/admin/delivery/deadletter/")
    assert wide.inner_text("#changelist-filter li.selected a >> nth=0") == "Open"
    shown = wide.locator("#result_list tbody tr")
    assert shown.count() == 1 and letters[0].message.to in shown.inner_text()
    assert fits(wide), "the dead-letter list scrolls sideways at 1366 px"
    assert wide.locator("#result_list td.field-status").first.is_visible()
    # By error and over time, for what the list shows (the open ones).
    assert "131000" in wide.inner_text("#wb-dl-by-error")
    days = wide.eval_on_selector_all(
        "#wb-dl-per-day .wb-dl-day", "ds => ds.map(d => Number(d.dataset.count))"
    )
    assert len(days) == 14 and sum(days) == 1 and days[-1] == 1  # the open one, today
    screenshot(wide, "dead-letters-open.png")

    # A number typed as people write it, or a name.
    to = letters[0].message.to  # +5511900000NNN
    for typed in (to[1:], f"+{to[1:3]} ({to[3:5]}) {to[5:10]}-{to[10:]}", "Fabio Dead 0"):
        wide.fill("#searchbar", typed)
        wide.press("#searchbar", "Enter")
        wide.wait_for_load_state()
        assert wide.locator("#result_list tbody tr").count() == 1, typed
    wide.click("#changelist-filter a:text-is('All')")
    wide.wait_for_url("**status__exact=all**")

    # From the campaign's report, a dead-letter code leads to its entries.
    wide.goto(f"{base}/admin/campaigns/campaign/{campaign.pk}/report/")
    wide.click("#wb-report-failures a.wb-dead-link")
    wide.wait_for_selector("#result_list")
    assert "error_code=131000" in wide.url
    assert wide.locator("#result_list tbody tr").count() == 2  # open and decided alike

    # The bulk requeue's confirmation mentions decided entries only when some are.
    wide.goto(f"{base}/admin/delivery/deadletter/?status__exact=all")
    wide.check("#action-toggle")
    wide.select_option("select[name=action]", "requeue_selected")
    wide.click("button[name=index]")
    assert "1 still open; 1 already decided is skipped." in wide.inner_text("#content")
    wide.goto(f"{base}/admin/delivery/deadletter/")
    wide.check("#action-toggle")
    wide.select_option("select[name=action]", "requeue_selected")
    wide.click("button[name=index]")
    confirmation = wide.inner_text("#content")
    assert "all still open." in confirmation and "decided" not in confirmation

    # The requeue: the page tells the attempts before from the ones since.
    wide.goto(f"{base}/admin/delivery/deadletter/{letters[0].pk}/change/")
    assert "3 attempts before it was dead-lettered" in wide.inner_text("#message-summary")
    wide.fill("#requeue-form textarea[name=note]", "Meta had a 5xx spell")
    wide.click("#requeue-form input[type=submit]")
    assert "requeued" in wide.inner_text(".messagelist")
    summary = wide.inner_text("#message-summary")
    assert "Requeued" in summary and "0 attempts since" in summary
    assert "attempts so far" not in summary
    assert wide.inner_text("#attempts-since-none") == "Not sent again yet."
    assert wide.locator("h2:text-is('Attempts before the requeue')").count() == 1
    screenshot(wide, "dead-letter-requeued.png", full_page=True)


def test_a_marketer_finds_the_upload_from_home_and_saves_a_draft_with_a_fallback(
    wide: Any, live_server: Any, uploads: Any, tmp_path: Any
) -> None:
    from tests.factories import make_account, make_contact_list, make_template

    role_user(MARKETING)
    account = make_account()
    make_phone_number(account=account, display_phone_number="+55 11 4000-0001")
    make_template(
        account=account,
        name="welcome",
        body_text="Hi {{1}}, your code is {{2}}.",
        body_param_count=2,
        body_examples=["Asha", "SPRING10"],
    )
    customers = make_contact_list(name="Customers")
    make_contact(
        phone="+5511900000001", name="Ana", attributes={"coupon": "A1"}, contact_list=customers
    )
    make_contact(
        phone="+5511900000002", name="", attributes={"coupon": "B2"}, contact_list=customers
    )
    base = live_server.url
    log_in(wide, base, "mia")

    # Uploads from the home page, into a list made on the way.
    wide.click("#wb-quick a:text-is('Upload contacts')")
    wide.fill("#id_new_list", "VIP customers")
    wide.click("#upload-start-form input[type=submit]")
    wide.wait_for_selector("#upload-form")
    leads = tmp_path / "vip.csv"
    leads.write_text("Nome,Celular,Cidade\nAna,11 99999-0001,Recife\n", encoding="utf-8")
    wide.set_input_files("#upload-form input[type=file]", str(leads))
    wide.click("#upload-form input[type=submit]")
    wide.wait_for_selector("#id_region")
    assert "utf-8-sig" not in wide.inner_text("#content-main")
    brazil = wide.locator("#id_region option[value=BR]").inner_text()
    assert brazil == "Brazil (BR, +55)"
    screenshot(wide, "contact-upload-countries.png")

    # A draft saved with one parameter still unmapped, then finished with a fallback.
    wide.goto(f"{base}/admin/campaigns/campaign/add/")
    wide.fill("#id_name", "Welcome series")
    wide.select_option("#id_phone_number", label="+55 11 4000-0001")
    wide.select_option("#id_template", label="welcome (en_US)")
    wide.select_option("#id_lists", label="Customers")
    wide.wait_for_selector('tr[data-slot="body:2"]')
    wide.fill('tr[data-slot="body:2"] input.wb-source', "coupon")
    wide.click("#wb-campaign-form input[name=_save]")
    assert "still to do before it can launch" in wide.inner_text(".messagelist")
    assert "we cannot know if Meta got it" in wide.inner_text("#wb-campaign-form")
    wide.fill('tr[data-slot="body:1"] input.wb-source', "name")
    wide.fill('tr[data-slot="body:1"] input.wb-fallback', "there")
    second = wide.locator("#wb-preview-samples .wb-sample").nth(1)
    second.locator(".wb-bubble-body").filter(has_text="Hi there").wait_for()
    wide.click("#wb-preflight")
    wide.wait_for_selector("#wb-findings")
    assert wide.inner_text("#wb-audience") == "2"
    campaign = Campaign.objects.get(name="Welcome series")
    assert campaign.param_mapping["body"]["1"] == {"field": "name", "fallback": "there"}
