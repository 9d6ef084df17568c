"""A marketer uploads contacts in a real browser; a real worker process imports them.

Log in, open a contact list, upload a 100,000-row CSV with some bad rows and a few numbers
repeated far apart in the file, choose the phone column, the default country and "first row
wins", watch the progress bar move while `manage.py rqworker maintenance` imports it, then
read the result (the repeated rows listed) and download the rejected rows.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from campaigns.models import Contact, ContactList, ContactUpload
from tests.factories import make_contact, make_contact_list
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING
from whatsblast.core.processes import ProcessGroup

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]

ROWS = 100_000
BAD = {
    17: "12345",  # too short
    2_500: '=HYPERLINK("http://x")',  # a formula: neutralised in the download
    60_000: "",  # no phone at all
    99_998: "call me",
}
# Row → the earlier row whose number it repeats: blocks of 20,000 rows apart.
REPEATS = {50_000: 10, 80_000: 20}


def phone_of(i: int) -> str:
    return f"(11) 9{10_000_000 + REPEATS.get(i, i):08d}"


def leads_csv(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Name", "Mobile", "City", "Notes"])
        for i in range(ROWS):
            phone = BAD.get(i, phone_of(i))
            writer.writerow([f"Person {i}", phone, f"City {i % 40}", "call after 6"])
    return path


def test_a_marketer_uploads_a_large_list_and_reads_the_rejected_rows(
    page: Any, live_server: Any, workers: ProcessGroup, uploads: Path, tmp_path: Path
) -> None:
    contact_list = make_contact_list(name="Autumn leads")
    role_user(MARKETING)
    workers.manage("maintenance", "rqworker", "maintenance")
    file = leads_csv(tmp_path / "autumn-leads.csv")

    log_in(page, live_server.url, "mia")
    page.goto(f"{live_server.url}/admin/campaigns/contactlist/{contact_list.pk}/change/")
    page.click("#upload-contacts")
    page.set_input_files("input[name=file]", str(file))
    page.click("input[type=submit][value='Upload and preview']")

    # The column choice: the preview shows the first rows as the import will read them.
    page.wait_for_selector("#preview")
    headers = page.eval_on_selector_all("#preview th", "cells => cells.map(c => c.textContent)")
    assert headers == ["Name", "Mobile", "City", "Notes"]
    assert page.input_value("select[name=phone_column]") == "Mobile"
    page.select_option("select[name=region]", "BR")
    page.uncheck("input[name=attribute_columns][value=Notes]")
    assert page.is_disabled("input[name=attribute_columns][value=Mobile]")
    assert page.is_checked("input[name=duplicate_policy][value=last]")
    page.check("input[name=duplicate_policy][value=first]")
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "contact-upload-columns.png")

    progress: list[dict[str, Any]] = []
    page.on(
        "response",
        lambda r: progress.append(r.json()) if r.url.endswith("/progress/") and r.ok else None,
    )
    page.click("#mapping-form input[type=submit]")
    page.wait_for_selector("#upload-progress progress")
    # The bar is driven by the page's own script polling the progress endpoint; the page
    # reloads itself when the import is done.
    deadline = time.monotonic() + 180
    captured = False
    while True:
        try:
            page.wait_for_selector("#upload-result", timeout=250)  # survives the reload
            break
        except PlaywrightTimeout:
            pass
        workers.check()
        assert time.monotonic() < deadline, f"import not done: {progress[-1:]}"
        if not captured and progress and progress[-1]["rows_read"] and not progress[-1]["finished"]:
            screenshot(page, "contact-upload-progress.png")
            captured = True

    # The bar moved while the import ran. Which stage a poll (one a second) lands in depends
    # on the machine: on a quiet one the whole file is read within a second, and the polls
    # see the writing stage only (tests/campaigns/test_upload.py follows each row).
    moving = [p for p in progress if p["status"] == "running" and 0 < (p["percent"] or 0) < 99]
    assert moving, f"no progress seen between 0 and 99 %: {progress}"
    assert all(p["percent"] is None or p["percent"] <= 99 for p in progress if not p["finished"])
    # First row wins: reading fills the bar's first half, writing its second; it never
    # goes back, and the label names the stage.
    percents = [p["percent"] for p in progress if p["percent"] is not None]
    assert percents == sorted(percents), percents
    for p in progress:
        if p["status"] == "running" and p["percent"] is not None:
            assert (p["percent"] >= 50) == p["writing"], p
            assert ("rows read;" in p["label"]) == p["writing"], p
    assert page.inner_text("#count-total") == f"{ROWS:,}"
    assert page.inner_text("#count-imported") == f"{ROWS - len(BAD) - len(REPEATS):,}"
    assert page.inner_text("#count-merged") == str(len(REPEATS))
    assert page.inner_text("#count-rejected") == str(len(BAD))
    assert page.inner_text("#duplicate-policy") == "First row wins"
    repeats = page.eval_on_selector_all(
        "#repeats tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert repeats == [  # file lines: the header is line 1
        ["50002", "+5511910000010", "12"],
        ["80002", "+5511910000020", "22"],
    ]
    table = page.inner_text("#rejections")
    for line in (19, 2_502, 60_002, 100_000):  # file lines: header is line 1
        assert str(line) in table
    assert "call me" in table and "missing phone" in table
    screenshot(page, "contact-upload-result.png")

    with page.expect_download() as download:
        page.click("#download-rejects")
    rows = list(csv.reader(Path(download.value.path()).open(encoding="utf-8")))
    assert rows[0][:3] == ["line", "value", "reason"] and len(rows) == len(BAD) + 1
    assert rows[2][1].startswith("'=HYPERLINK")

    upload = ContactUpload.objects.get()
    assert upload.status == "done" and upload.created_by.username == "mia"
    assert contact_list.contacts.count() == ROWS - len(BAD) - len(REPEATS)
    one = Contact.objects.get(phone="+5511910000000")
    assert (one.name, one.attributes) == ("Person 0", {"City": "City 0"})
    first = Contact.objects.get(phone="+5511910000010")  # the first row of it won
    assert (first.name, first.attributes) == ("Person 10", {"City": "City 10"})
    assert not (uploads / upload.stored_name).exists()  # imported: the upload is gone


def test_a_bad_file_is_refused_on_the_form_with_the_reason(
    page: Any, live_server: Any, uploads: Path, tmp_path: Path
) -> None:
    contact_list = make_contact_list(name="Broken")
    role_user(MARKETING)
    binary = tmp_path / "export.csv"
    binary.write_bytes(b"phone\n\x00\x81\x8d\x00garbage")

    log_in(page, live_server.url, "mia")
    page.goto(f"{live_server.url}/admin/campaigns/contactlist/{contact_list.pk}/upload/")
    page.set_input_files("input[name=file]", str(binary))
    page.click("input[type=submit][value='Upload and preview']")

    error = page.inner_text("#upload-form .errorlist")
    assert "not text in UTF-8 or Windows-1252" in error and "CSV UTF-8" in error
    assert not ContactUpload.objects.exists()


def test_a_marketer_sees_letters_rejected_and_a_shared_contact_named_on_the_result(
    wide: Any, live_server: Any, workers: ProcessGroup, uploads: Path, tmp_path: Path
) -> None:
    """Into a new list: a phone with letters is rejected with the reason (never read as a
    keypad), and a contact of the list "VIP" renamed by this file is named on the result."""
    vip = make_contact_list(name="VIP")
    make_contact(phone="+5511999990001", name="Ana", contact_list=vip)
    role_user(MARKETING)
    workers.manage("maintenance", "rqworker", "maintenance")
    file = tmp_path / "autumn.csv"
    file.write_text(
        "Name,Mobile,City\nAna Maria,11 99999-0001,Recife\nBo,11 9ABCD-1234,Natal\n"
        "Cy,11 99999-0003,Sousa\n",
        encoding="utf-8",
    )

    log_in(wide, live_server.url, "mia")
    wide.goto(f"{live_server.url}/admin/campaigns/contactupload/start/")
    wide.fill("#id_new_list", "Autumn")
    wide.click("#upload-start-form input[type=submit]")
    wide.wait_for_selector("#new-list-note")
    assert not ContactList.objects.filter(name="Autumn").exists()  # not before its file
    wide.set_input_files("#upload-form input[type=file]", str(file))
    wide.click("#upload-form input[type=submit]")
    wide.wait_for_selector("#mapping-form")
    wide.select_option("select[name=region]", "BR")
    wide.click("#mapping-form input[type=submit]")
    wide.wait_for_selector("#upload-result", timeout=60_000)

    assert wide.inner_text("#count-rejected") == "1"
    assert "letters in the phone number" in wide.inner_text("#rejections")
    assert "11 9ABCD-1234" in wide.inner_text("#rejections")
    assert wide.inner_text("#changed-elsewhere") == (
        "1 contact in another list was updated (name or columns): +5511999990001, in list 'VIP'."
    )
    wide.screenshot(path="/tmp/contact-upload-changed-elsewhere.png", full_page=True)
    assert not Contact.objects.filter(phone="+5511922231234").exists()
    assert Contact.objects.get(phone="+5511999990001").name == "Ana Maria"

    # The rejected rows, fixed and uploaded again: read as the first upload read them.
    with wide.expect_download() as download:
        wide.click("#download-rejects")
    rows = list(csv.reader(Path(download.value.path()).open(encoding="utf-8")))
    assert rows[0] == ["line", "value", "reason", "default_country", "Name", "Mobile", "City"]
    rows[1][5] = "11 99999-0002"
    fixed = tmp_path / "autumn-fixed.csv"
    with fixed.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    wide.click("text=Autumn")
    wide.click("#upload-contacts")
    wide.set_input_files("#upload-form input[type=file]", str(fixed))
    wide.click("#upload-form input[type=submit]")
    wide.wait_for_selector("#rejects-file-note")
    assert "first upload's default country, BR" in wide.inner_text("#rejects-file-note")
    assert wide.input_value("select[name=region]") == "BR"
    offered = wide.eval_on_selector_all(
        "input[name=attribute_columns]", "boxes => boxes.map(b => b.value)"
    )
    assert "line" not in offered and "reason" not in offered and "City" in offered
    wide.screenshot(path="/tmp/contact-upload-rejects-again.png", full_page=True)
