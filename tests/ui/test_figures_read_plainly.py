"""Figures that used to disagree or read oddly (a list's count at its top and its foot,
percentages rounded to 100 %, the rate after a resume, attempts of sent messages, a number
never read, "Resume now" on a number that is not paused), each read as its role reads it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import CampaignStatus
from delivery.campaigns.progress import campaign_progress, rate_measured, rate_window_start
from delivery.messages import Settlement, settlements_record
from delivery.models import Message, MessageStatus
from delivery.numbers import phone_number_pause
from tests.factories import make_campaign, make_contact, make_message, make_phone_number
from tests.ui.support import role_user
from whatsblast.admin import pagination
from whatsblast.admin.tables import json_table, mapping_table, time_text
from whatsblast.auth.roles import OPERATORS, SUPPORT
from whatsblast.figures import duration_text, percent_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("part", "whole", "digits", "shown"),
    [
        (996, 1000, 0, 99),  # 99.6 % is not everyone
        (9996, 10000, 1, 99.9),
        (1000, 1000, 0, 100),
        (4, 1000, 0, 1),  # 0.4 % is not nobody
        (1, 100000, 1, 0.1),
        (0, 1000, 1, 0.0),
        (505, 1000, 1, 50.5),
        (3, 0, 1, None),
    ],
)
def test_a_percentage_is_never_100_or_0_unless_exact(
    part: int, whole: int, digits: int, shown: float | None
) -> None:
    assert percent_of(part, whole, digits=digits) == shown


def test_a_capped_list_says_the_same_count_at_its_top_and_its_foot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    contact = make_contact(phone="+5511900000001")
    for _ in range(5):  # one recipient, messaged by five campaigns
        make_message(campaign=make_campaign(), contact=contact, to=contact.phone, status="sent")
    client = Client()
    client.force_login(role_user(SUPPORT))
    page = client.get(reverse("admin:delivery_message_changelist"), {"q": "+5511900000001"})
    text = page.content.decode()
    assert page.status_code == 200
    assert text.count("More than 3 messages") == 2, text  # the search bar and the foot
    assert " results" not in text


def test_a_success_recorded_after_its_callback_keeps_its_attempt() -> None:
    """The status callback moved the row on before the sender recorded its send: the row
    keeps the newer status and still counts the attempt that sent it."""
    message = make_message(campaign=make_campaign(), status=MessageStatus.DELIVERED)
    assert message.attempt == 0
    settlements_record(
        [Settlement(message.pk, MessageStatus.SENT, 1, 0, wamid="wamid.late", wa_id="")]
    )
    message.refresh_from_db()
    assert (message.status, message.attempt, message.wamid) == ("delivered", 1, "wamid.late")


def test_the_rate_after_a_resume_leaves_the_paused_time_out() -> None:
    now = timezone.now()
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    campaign.started_at = now - timedelta(minutes=10)
    campaign.guard_since = now - timedelta(seconds=24)  # resumed 24 s ago
    campaign.save()
    # 100 msg/s since the resume; before it, paused.
    for i in range(2400 // 100):
        make_message(
            campaign=campaign, to=f"+551190000{i:04d}", status="sent",
            sent_at=now - timedelta(seconds=i),
        )  # fmt: skip
    for i in range(20):
        make_message(campaign=campaign, to=f"+551191000{i:04d}", status="pending")
    assert rate_window_start(campaign=campaign, now=now) == campaign.guard_since
    progress = campaign_progress(campaign=campaign)
    # 24 messages in the 24 s since the resume: 1/s, not 24 over a minute (0.4/s).
    assert progress.rate_per_second == pytest.approx(1.0, rel=0.05)
    assert progress.eta_seconds == pytest.approx(20, rel=0.05)
    assert not rate_measured(since=now - timedelta(seconds=2), now=now)
    assert rate_measured(since=campaign.guard_since, now=now)


def test_a_number_never_read_says_so_and_offers_resume_only_when_paused() -> None:
    number = make_phone_number()
    client = Client()
    client.force_login(role_user(OPERATORS))
    url = reverse("admin:campaigns_phonenumber_change", args=[number.pk])
    page = client.get(url).content.decode()
    assert "Not read from Meta yet" in page
    assert "the token works" not in page
    assert 'id="resume-form"' not in page

    phone_number_pause(
        phone_number=number, until=timezone.now() + timedelta(minutes=5), reason="test"
    )
    page = client.get(url).content.decode()
    assert 'id="resume-form"' in page and "Resume now" in page

    type(number).objects.filter(pk=number.pk).update(graph_read_at=timezone.now(), graph_error="")
    assert "Read without error: the token works." in client.get(url).content.decode()
    type(number).objects.filter(pk=number.pk).update(graph_error="(#190) token expired")
    assert "Failed: (#190) token expired" in client.get(url).content.decode()
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(29.065856, "29 s"), (185, "3 min 05 s"), (3840, "1 h 04 min"), (183_600, "2 d 03 h")],
)
def test_a_run_reads_as_people_say_it(seconds: float, text: str) -> None:
    assert duration_text(timedelta(seconds=seconds)) == text


def test_a_stored_time_reads_in_the_viewers_zone_without_microseconds() -> None:
    with timezone.override("America/Sao_Paulo"):
        assert time_text("2026-12-01T11:07:03.123456+00:00") == "2026-12-01 08:07:03 -03"
        table = str(json_table([{"at": "2026-12-01T11:07:03.123456+00:00", "code": 131000}]))
    assert "2026-12-01 08:07:03" in table and ".123456" not in table and "T11:07" not in table
    assert time_text("not a time") == "not a time"


def test_buttons_are_numbered_from_one() -> None:
    table = str(mapping_table({"buttons": {"0": {"value": "SUMMER"}, "1": {"field": "code"}}}))
    assert "Button 1" in table and "Button 2" in table and "Button 0" not in table
