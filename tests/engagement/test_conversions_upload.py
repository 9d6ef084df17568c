"""The admin's conversion upload, as a Marketing user through the Django test client: good
rows stored and attributed, bad rows reported by line, the same file twice stored once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from delivery.models import Conversion, MessageStatus
from tests.factories import make_campaign, make_contact, make_message
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, SUPPORT, roles_sync

pytestmark = pytest.mark.django_db

UPLOAD_URL = "/admin/delivery/conversion/upload/"
LIST_URL = "/admin/delivery/conversion/"


@pytest.fixture(autouse=True)
def roles() -> None:
    roles_sync()  # the groups as roles.py says now (conversion permissions included)


def client_for(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


def test_marketing_uploads_a_file_good_rows_stored_bad_rows_by_line() -> None:
    contact = make_contact()
    campaign = make_campaign()
    delivered = timezone.now() - timedelta(days=2)
    message = make_message(
        campaign=campaign,
        contact=contact,
        to=contact.phone,
        status=MessageStatus.DELIVERED,
        delivered_at=delivered,
    )
    at = (delivered + timedelta(days=1)).isoformat()
    text = (
        "Phone;EVENT;Value;Currency;Occurred_At\n"
        f"{contact.phone};purchase;19,90;BRL;{at}\n"  # line 2: a decimal comma is no decimal
        f"{contact.phone};purchase;19.90;BRL;{at}\n"  # line 3: good, attributed
        f"+5511987654321;signup;;;{at}\n"  # line 4: good, nobody we know
        f"{contact.phone};purchase;5;BRL;\n"  # line 5: no date
        "\n"
        f"nope;purchase;5;BRL;{at}\n"  # line 7: not a phone
    )
    client = client_for(MARKETING)
    page = client.get(LIST_URL)
    assert page.status_code == 200 and b"Upload conversions (CSV)" in page.content
    file = SimpleUploadedFile("conv.csv", text.encode(), content_type="text/csv")
    response = client.post(UPLOAD_URL, {"file": file})
    assert response.status_code == 200
    assert b"2 stored" in response.content
    bad = response.context["bad_rows"]
    assert [line for line, _ in bad] == [2, 5, 7]
    assert set(bad[0][1]) == {"value"} and set(bad[1][1]) == {"occurred_at"}
    assert set(bad[2][1]) == {"phone"}
    stored = Conversion.objects.order_by("id")
    assert [(c.source, c.message_id, c.attributed_by) for c in stored] == [
        ("upload", message.pk, "delivered"),
        ("upload", None, ""),
    ]
    # The same file again: nothing stored twice.
    again = SimpleUploadedFile("conv.csv", text.encode(), content_type="text/csv")
    assert client.post(UPLOAD_URL, {"file": again}).status_code == 200
    assert Conversion.objects.count() == 2


def test_a_file_without_the_columns_is_refused_whole() -> None:
    client = client_for(MARKETING)
    file = SimpleUploadedFile("c.csv", b"email,event\na@b.c,purchase\n", content_type="text/csv")
    response = client.post(UPLOAD_URL, {"file": file})
    assert response.status_code == 200
    assert b"Missing column(s): phone or user_id, occurred_at." in response.content
    assert not Conversion.objects.exists()


def test_a_clean_file_redirects_to_the_list() -> None:
    client = client_for(MARKETING)
    at = (timezone.now() - timedelta(hours=1)).isoformat()
    file = SimpleUploadedFile(
        "c.csv", f"user_id,event,occurred_at\nBR.1,signup,{at}\n".encode(), content_type="text/csv"
    )
    response = client.post(UPLOAD_URL, {"file": file})
    assert response.status_code == 302 and response["Location"] == LIST_URL
    assert Conversion.objects.get().user_id == "BR.1"


def test_support_reads_the_list_but_cannot_upload() -> None:
    client = client_for(SUPPORT)
    page = client.get(LIST_URL)
    assert page.status_code == 200 and b"Upload conversions" not in page.content
    assert client.get(UPLOAD_URL).status_code == 403


def test_an_id_column_makes_a_row_the_same_conversion_in_any_file() -> None:
    from io import BytesIO

    from delivery.engagement.conversions import conversions_from_csv

    contact = make_contact()
    day = (timezone.now() - timedelta(days=1)).isoformat()
    first = (
        f"id,phone,event,value,currency,occurred_at\nA-1,{contact.phone},purchase,10,EUR,{day}\n"
    )
    # Another export of the same orders, one more row, the columns in another order.
    second = (
        "occurred_at;event;phone;id\n"
        f"{day};purchase;{contact.phone};A-1\n"
        f"{day};purchase;{contact.phone};A-2\n"
    )
    assert conversions_from_csv(BytesIO(first.encode())).result.stored == 1
    again = conversions_from_csv(BytesIO(second.encode())).result
    assert (again.stored, again.duplicates) == (1, 1)
    assert sorted(Conversion.objects.values_list("dedupe_key", flat=True)) == [
        "upload:id:A-1",
        "upload:id:A-2",
    ]
