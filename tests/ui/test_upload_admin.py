"""The contact upload pages: upload, choose columns, progress, result and rejected rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from campaigns.models import Contact, ContactUpload
from tests.engine_support import work_burst
from tests.factories import make_contact_list
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db

LEADS = (
    "Name,Mobile,City,Plan\n"
    "Ana,+55 11 99999-0001,Recife,gold\n"
    "Bo,(11) 99999-0002,Natal,silver\n"
    "Eve,=cmd|' /C calc'!A0,Nowhere,\n"
    "Cy,12,Sousa,\n"
)


@pytest.fixture(autouse=True)
def uploads(tmp_path: Path, settings: Any) -> Path:
    settings.CONTACT_UPLOAD_DIR = tmp_path / "uploads"
    return settings.CONTACT_UPLOAD_DIR


@pytest.fixture
def marketer(client: Client) -> Client:
    client.force_login(role_user(MARKETING))
    return client


def csv_file(content: str | bytes, name: str = "leads.csv") -> SimpleUploadedFile:
    data = content.encode() if isinstance(content, str) else content
    return SimpleUploadedFile(name, data, content_type="text/csv")


@pytest.mark.django_db(transaction=True)
def test_upload_choose_columns_import_and_read_the_result(marketer: Client, uploads: Path) -> None:
    contact_list = make_contact_list(name="spring leads")
    upload_url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])

    response = marketer.post(upload_url, {"file": csv_file(LEADS)})

    upload = ContactUpload.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:campaigns_contactupload_map", args=[upload.pk])
    assert (uploads / upload.stored_name).read_text() == LEADS
    preview = marketer.get(response["Location"]).content.decode()
    assert "<th>Mobile</th>" in preview and "<td>Recife</td>" in preview
    assert '<option value="Mobile" selected>' in preview
    assert '<option value="BR">Brazil (BR, +55)</option>' in preview
    assert "Windows (Excel" in preview or ", UTF-8," in preview  # not "utf-8-sig"

    queued = marketer.post(
        response["Location"],
        {
            "phone_column": "Mobile",
            "name_column": "Name",
            "region": "BR",
            "attribute_columns": ["City"],
        },
    )
    status_url = reverse("admin:campaigns_contactupload_change", args=[upload.pk])
    assert queued["Location"] == status_url
    waiting = marketer.get(status_url).content.decode()
    assert 'id="upload-progress"' in waiting and "admin_ui/progress.js" in waiting
    assert (
        marketer.get(reverse("admin:campaigns_contactupload_progress", args=[upload.pk])).json()[
            "status"
        ]
        == "queued"
    )

    work_burst("maintenance")

    done = marketer.get(status_url).content.decode()
    assert 'id="upload-progress"' not in done
    assert '<strong id="count-imported">2</strong>' in done
    assert '<strong id="count-rejected">2</strong>' in done
    assert "not a possible number" in done or "invalid phone number" in done
    progress = marketer.get(reverse("admin:campaigns_contactupload_progress", args=[upload.pk]))
    assert progress.json() | {"error": ""} == progress.json()
    assert progress.json()["finished"] and progress.json()["percent"] == 100
    rejects = marketer.get(reverse("admin:campaigns_contactupload_rejects", args=[upload.pk]))
    assert rejects["Content-Disposition"] == 'attachment; filename="leads-rejected.csv"'
    lines = b"".join(rejects.streaming_content).decode().splitlines()
    assert lines[0].startswith("line,value,reason,")  # then the file's own columns
    assert lines[1].startswith("4,'=cmd|")  # a formula, neutralised for spreadsheets
    ana = Contact.objects.get(phone="+5511999990001")
    assert (ana.name, ana.attributes) == ("Ana", {"City": "Recife"})
    assert set(contact_list.contacts.values_list("phone", flat=True)) == {
        "+5511999990001",
        "+5511999990002",
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "The submitted file is empty."),
        (b"\x00\x01binary\xff\xfe\x00\x00", "not text in UTF-8 or Windows-1252"),
        (b"phone,name\n", "header row but no contacts"),
    ],
)
def test_a_bad_file_is_refused_on_the_form(
    marketer: Client, uploads: Path, content: bytes, message: str
) -> None:
    contact_list = make_contact_list()
    url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])

    page = marketer.post(url, {"file": csv_file(content)})

    assert page.status_code == 200
    assert message in page.content.decode()
    assert not ContactUpload.objects.exists()
    assert not any(uploads.iterdir())


def test_an_upload_past_the_size_cap_is_dropped_while_it_streams(
    marketer: Client, uploads: Path, settings: Any
) -> None:
    settings.CONTACT_UPLOAD_MAX_BYTES = 64 * 1024
    contact_list = make_contact_list()
    big = "phone\n" + "+5511999990001\n" * 10_000  # ~150 KB
    url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])

    page = marketer.post(url, {"file": csv_file(big)})

    assert "The file is larger than 0 MB" in page.content.decode()
    assert not ContactUpload.objects.exists()
    assert not any(uploads.iterdir())


@pytest.mark.django_db(transaction=True)
def test_no_phone_column_is_asked_for_and_a_wrong_choice_refused(marketer: Client) -> None:
    contact_list = make_contact_list()
    url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])
    response = marketer.post(url, {"file": csv_file("who,digits\nAna,5511999990001\n")})
    page = marketer.get(response["Location"]).content.decode()
    assert '<option value="who">' in page and '<option value="digits">' in page

    wrong = marketer.post(response["Location"], {"phone_column": "Phone"})
    assert "Select a valid choice" in wrong.content.decode()

    marketer.post(response["Location"], {"phone_column": "digits", "name_column": "who"})
    work_burst("maintenance")
    assert Contact.objects.get().name == "Ana"


def test_the_upload_form_is_csrf_protected(uploads: Path) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(role_user(MARKETING))
    contact_list = make_contact_list()
    url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])

    response = client.post(url, {"file": csv_file(LEADS)})

    assert response.status_code == 403
    assert not ContactUpload.objects.exists()
    assert not uploads.exists() or not any(uploads.iterdir())


def test_an_upload_waiting_for_its_columns_sends_the_uploader_to_choose_them(
    marketer: Client, django_user_model: Any
) -> None:
    from django.contrib.auth.models import Permission

    contact_list = make_contact_list()
    url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])
    marketer.post(url, {"file": csv_file(LEADS)})
    upload = ContactUpload.objects.get()
    status_url = reverse("admin:campaigns_contactupload_change", args=[upload.pk])

    assert marketer.get(status_url)["Location"].endswith(f"/{upload.pk}/map/")
    viewer = django_user_model.objects.create_user("val", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_contactupload"))
    client = Client()
    client.force_login(viewer)
    page = client.get(status_url).content.decode()
    assert "Waiting for the columns to be chosen" in page and "upload-progress" not in page
    assert (
        client.get(reverse("admin:campaigns_contactupload_map", args=[upload.pk])).status_code
        == 403
    )


# 0001 on lines 2 and 5 and 0002 on lines 3 and 6: with two-row batches each pair is split.
REPEATS = (
    "Name,Mobile,City\n"
    "Ana,+55 11 99999-0001,Recife\n"
    "Bo,(11) 99999-0002,Natal\n"
    "Cy,(11) 99999-0003,Sousa\n"
    "Ana B,+5511999990001,\n"
    "Bob,11 99999-0002,Olinda\n"
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("policy", "ana", "counts"),
    [
        ("last", ("Ana B", {"City": "Recife"}), ("3", "2", "0")),
        ("first", ("Ana", {"City": "Recife"}), ("3", "2", "0")),
    ],
)
def test_repeated_numbers_across_batches_are_merged_by_the_chosen_policy_and_listed(
    marketer: Client, settings: Any, policy: str, ana: tuple[str, Any], counts: tuple[str, ...]
) -> None:
    settings.CONTACT_IMPORT_BATCH_SIZE = 2
    contact_list = make_contact_list(name="repeats")
    upload_url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])
    map_url = marketer.post(upload_url, {"file": csv_file(REPEATS)})["Location"]
    form = marketer.get(map_url).content.decode()
    assert 'value="last"' in form and "First row wins" in form and "Reject repeated" in form

    status_url = marketer.post(
        map_url,
        {
            "phone_column": "Mobile",
            "name_column": "Name",
            "region": "BR",
            "attribute_columns": ["City"],
            "duplicate_policy": policy,
        },
    )["Location"]
    work_burst("maintenance")

    page = marketer.get(status_url).content.decode()
    imported, merged, rejected = counts
    assert f'<strong id="count-imported">{imported}</strong>' in page
    assert f'<strong id="count-merged">{merged}</strong>' in page
    assert f'<strong id="count-rejected">{rejected}</strong>' in page
    label = "Last row wins" if policy == "last" else "First row wins"
    assert f'<strong id="duplicate-policy">{label}</strong>' in page
    assert (
        '<td class="num">5</td><td>+5511999990001</td><td class="num">2</td>' in page
        and '<td class="num">6</td><td>+5511999990002</td><td class="num">3</td>' in page
    )
    contact = Contact.objects.get(phone="+5511999990001")
    assert (contact.name, contact.attributes) == ana
    bo = Contact.objects.get(phone="+5511999990002")
    assert bo.name == ("Bob" if policy == "last" else "Bo")


@pytest.mark.django_db(transaction=True)
def test_rejected_repeats_are_in_the_report_and_the_reuploadable_rejects_file(
    marketer: Client, settings: Any
) -> None:
    settings.CONTACT_IMPORT_BATCH_SIZE = 2
    contact_list = make_contact_list(name="strict")
    upload_url = reverse("admin:campaigns_contactlist_upload", args=[contact_list.pk])
    map_url = marketer.post(upload_url, {"file": csv_file(REPEATS)})["Location"]
    status_url = marketer.post(
        map_url,
        {
            "phone_column": "Mobile",
            "name_column": "Name",
            "region": "BR",
            "duplicate_policy": "reject",
        },
    )["Location"]
    work_burst("maintenance")

    page = marketer.get(status_url).content.decode()
    upload = ContactUpload.objects.get()
    assert upload.duplicate_policy == "reject"
    assert '<strong id="count-imported">1</strong>' in page
    assert '<strong id="count-rejected">4</strong>' in page
    assert 'id="duplicates-rejected"' in page and 'id="repeats"' not in page
    assert "the number is also on line 5: repeated numbers are rejected" in page
    rejects = marketer.get(reverse("admin:campaigns_contactupload_rejects", args=[upload.pk]))
    lines = b"".join(rejects.streaming_content).decode().splitlines()
    assert lines[0] == "line,value,reason,default_country,Name,Mobile,City"
    assert [line.split(",")[0] for line in lines[1:]] == ["2", "3", "5", "6"]
    assert lines[1].endswith(",Ana,'+55 11 99999-0001,Recife")
    assert set(contact_list.contacts.values_list("phone", flat=True)) == {"+5511999990003"}
