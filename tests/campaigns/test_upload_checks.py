"""Uploads that must not surprise: letters in a phone, a shared contact changed from another
list, a rejects file uploaded again, and a new list made only with its file."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.audience.importing import contacts_import
from campaigns.audience.phones import LETTERS, PhoneNormaliser
from campaigns.audience.uploads import (
    contact_file_preview,
    contact_upload_create,
    contact_upload_queue,
    contact_upload_rejects_path,
    upload_dir,
)
from campaigns.models import Contact, ContactList, ContactUpload, ContactUploadStatus
from tests.engine_support import work_burst
from tests.factories import make_contact, make_contact_list
from tests.ui.support import role_user
from whatsblast.admin.uploads import changed_elsewhere_text
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def uploads(tmp_path: Path, settings: Any) -> Path:
    settings.CONTACT_UPLOAD_DIR = tmp_path / "uploads"
    return upload_dir()


def stored(content: str) -> Path:
    path = upload_dir() / f"{uuid.uuid4().hex}.csv"
    path.write_text(content, encoding="utf-8")
    return path


def test_letters_in_a_phone_are_rejected_never_read_as_a_keypad() -> None:
    normalise = PhoneNormaliser("BR")

    # phonenumbers alone reads 9ABCD as 92223: a stranger's number.
    assert normalise("11 9ABCD-1234") == (None, LETTERS)
    assert normalise("+55 11 99999-OOO1") == (None, LETTERS)  # letter O for zero
    assert normalise("11 99999-0001") == ("+5511999990001", None)
    assert normalise("call me")[1] != LETTERS  # no digits: not a typo of a number


def test_an_upload_rejects_a_phone_with_letters_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "leads.csv"
    path.write_text("name,phone\nAna,11 9ABCD-1234\nBo,11 99999-0002\n", encoding="utf-8")

    result = contacts_import(path=path, list_name="leads", region="BR")

    assert (result.imported, result.rejected) == (1, 1)
    rejection = result.rejections[0]
    assert (rejection.line, rejection.value, rejection.reason) == (2, "11 9ABCD-1234", LETTERS)
    assert not Contact.objects.filter(phone="+5511922231234").exists()


@pytest.mark.django_db(transaction=True)
def test_a_contact_of_another_list_changed_by_an_upload_is_named_on_the_result() -> None:
    vip = make_contact_list(name="VIP")
    make_contact(phone="+5511999990001", name="Ana", contact_list=vip)
    make_contact(phone="+5511999990002", name="Bo", contact_list=vip)  # unchanged below
    make_contact(phone="+5511999990003", name="Cy", attributes={"city": "Natal"})  # no list
    path = stored(
        "name,phone,city\n"
        "Ana Maria,11 99999-0001,\n"  # renamed
        "Bo,11 99999-0002,\n"  # the same: not a change
        "Cy,11 99999-0003,Recife\n"  # changed, but on no other list
        "Di,11 99999-0004,Sousa\n"  # new
    )
    upload = contact_upload_create(
        contact_list=make_contact_list(name="Leads"), path=path, original_name="l.csv", user=None
    )
    contact_upload_queue(upload=upload, phone_column="phone", name_column="name", region="BR")

    work_burst("maintenance")

    upload.refresh_from_db()
    assert upload.status == ContactUploadStatus.DONE, upload.error
    assert upload.result["changed_elsewhere"] == 1
    assert upload.result["changed_elsewhere_listed"] == [
        {"phone": "+5511999990001", "lists": ["VIP"]}
    ]
    text = changed_elsewhere_text(upload.result)
    assert text == (
        "1 contact in another list was updated (name or columns): +5511999990001, in list 'VIP'."
    )
    page = Client()
    page.force_login(role_user(MARKETING))
    html = page.get(reverse("admin:campaigns_contactupload_change", args=[upload.pk])).content
    assert "in list &#x27;VIP&#x27;" in html.decode()


def test_the_result_names_a_few_and_counts_the_rest() -> None:
    result = {
        "changed_elsewhere": 7,
        "changed_elsewhere_listed": [
            {"phone": "+5511999990001", "lists": ["A", "VIP"]},
            {"phone": "+5511999990002", "lists": ["VIP"]},
        ],
    }

    assert changed_elsewhere_text(result) == (
        "7 contacts in other lists were updated (name or columns): +5511999990001, in lists "
        "'A', 'VIP'; +5511999990002, in list 'VIP'; and 5 more."
    )
    assert changed_elsewhere_text({"changed_elsewhere": 0}) == ""


@pytest.mark.django_db(transaction=True)
def test_the_rejects_file_keeps_the_country_and_its_own_columns_are_not_attributes() -> None:
    first = contact_upload_create(
        contact_list=make_contact_list(name="Leads"),
        path=stored("Name,Mobile,City\nAna,11 99999-0001,Recife\nBo,11 9999X-0002,Natal\n"),
        original_name="leads.csv",
        user=None,
    )
    contact_upload_queue(upload=first, phone_column="Mobile", name_column="Name", region="BR")
    work_burst("maintenance")
    first.refresh_from_db()
    rejects = contact_upload_rejects_path(upload=first)
    assert rejects is not None
    rows = list(csv.reader(rejects.open(encoding="utf-8")))
    assert rows[0] == ["line", "value", "reason", "default_country", "Name", "Mobile", "City"]
    assert rows[1][3:] == ["BR", "Bo", "11 9999X-0002", "Natal"]

    # Fixed in a spreadsheet and uploaded again: a national number, as the first time.
    rows[1][5] = "11 99999-0002"
    fixed = upload_dir() / f"{uuid.uuid4().hex}.csv"
    with fixed.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    preview = contact_file_preview(fixed)
    assert preview.rejects_file and preview.default_country == "BR"
    assert preview.other_columns == ["City"]
    again = contact_upload_create(
        contact_list=first.contact_list, path=fixed, original_name="fixed.csv", user=None
    )
    assert again.region == "BR" and again.attribute_columns == ["City"]
    contact_upload_queue(
        upload=again, phone_column="Mobile", name_column="Name", region=again.region
    )
    work_burst("maintenance")

    again.refresh_from_db()
    assert (again.result["imported"], again.result["rejected"]) == (1, 0), again.result
    bo = Contact.objects.get(phone="+5511999990002")
    assert (bo.name, bo.attributes) == ("Bo", {"City": "Natal"})


def test_a_rejects_file_of_a_rejects_file_does_not_pile_up_columns(tmp_path: Path) -> None:
    path = tmp_path / "again.csv"
    path.write_text(
        "line,value,reason,default_country,Name,Mobile\n3,x,invalid phone number,BR,Bo,1A\n",
        encoding="utf-8",
    )
    rejects = tmp_path / "rejects.csv"

    contacts_import(path=path, list_name="leads", region="BR", rejects_path=rejects)

    rows = list(csv.reader(rejects.open(encoding="utf-8")))
    assert rows[0] == ["line", "value", "reason", "default_country", "Name", "Mobile"]
    assert rows[1] == ["2", "1A", LETTERS, "BR", "Bo", "1A"]


def test_a_new_list_is_created_only_when_its_file_is_submitted() -> None:
    page = Client()
    page.force_login(role_user(MARKETING))

    start = page.post(
        reverse("admin:campaigns_contactupload_start"), {"contact_list": "", "new_list": "VIP"}
    )
    assert start.status_code == 302 and not ContactList.objects.filter(name="VIP").exists()
    form = page.get(start["Location"])
    assert "is created when you upload its file" in form.content.decode()

    empty = upload_dir() / "empty.csv"
    empty.write_text("name,phone\n", encoding="utf-8")  # a header, no contacts
    with empty.open("rb") as f:
        refused = page.post(start["Location"], {"file": f})
    assert refused.status_code == 200 and "cannot be imported" in refused.content.decode()
    assert not ContactList.objects.filter(name="VIP").exists()

    good = upload_dir() / "vip.csv"
    good.write_text("name,phone\nAna,+5511999990001\n", encoding="utf-8")
    with good.open("rb") as f:
        accepted = page.post(start["Location"], {"file": f})
    assert accepted.status_code == 302
    upload = ContactUpload.objects.get()
    assert upload.contact_list.name == "VIP"
