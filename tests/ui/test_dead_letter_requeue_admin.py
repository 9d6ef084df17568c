"""Support's requeue pages: one account on the dead letter after a requeue, requeue at a
chosen time, failed messages requeued from the Messages list, and the History and Recent
actions pages showing each decision."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from delivery.models import Message
from tests.factories import make_campaign, make_message
from tests.ui.support import dead_message, message_status, role_user
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db


@pytest.fixture
def support(client: Client) -> Client:
    client.force_login(role_user(SUPPORT))
    return client


def detail(client: Client, pk: int) -> str:
    return client.get(reverse("admin:delivery_deadletter_change", args=[pk])).content.decode()


def summary_of(html: str) -> str:
    start = html.index('id="message-summary"')
    return html[start : html.index("</p>", start)]


def test_after_a_requeue_the_status_line_tells_one_account(support: Client) -> None:
    letter = dead_message()
    # The last life had been read (an earlier send): the requeue must not carry it over.
    long_ago = timezone.now() - timedelta(days=1)
    Message.objects.filter(pk=letter.message_id).update(sent_at=long_ago, read_at=long_ago)
    support.post(reverse("admin:delivery_deadletter_requeue", args=[letter.pk]), {"note": "x"})

    waiting = summary_of(detail(support, letter.pk))
    assert "Dead-lettered" in waiting and "after 3 attempts" in waiting
    assert "Requeued" in waiting and "by sam" in waiting and "due at once" in waiting
    assert "0 attempts since" in waiting and "waiting to be sent, due" in waiting
    assert ">Pending<" in waiting and "Read" not in waiting

    # The fresh send goes out and is read.
    sent = timezone.now() + timedelta(seconds=5)
    Message.objects.filter(pk=letter.message_id).update(
        status="read",
        attempt=1,
        sent_at=sent,
        delivered_at=sent + timedelta(seconds=1),
        read_at=sent + timedelta(seconds=60),
    )
    html = detail(support, letter.pk)
    read = summary_of(html)
    assert "1 attempt since" in read and ">Read<" in read
    assert "sent " in read and "delivered " in read and "read " in read
    assert 'id="attempts-since"' in html and "sent: Meta accepted it" in html
    assert "Not sent again yet." not in html

    # Failed again, with the error and its time.
    Message.objects.filter(pk=letter.message_id).update(
        status="failed",
        attempt=1,
        sent_at=None,
        read_at=None,
        delivered_at=None,
        failed_at=sent,
        last_error_code=131026,
        last_error_title="Message undeliverable",
    )
    failed = summary_of(detail(support, letter.pk))
    assert "failed again" in failed and "131026 Message undeliverable" in failed


def test_requeue_at_a_chosen_time_from_the_detail_page(support: Client) -> None:
    letter = dead_message()
    url = reverse("admin:delivery_deadletter_requeue", args=[letter.pk])
    page = detail(support, letter.pk)
    assert 'name="when" value="at"' in page and 'type="datetime-local"' in page

    missing = support.post(url, {"when": "at", "at": "", "note": ""}, follow=True)
    assert "Give the time to requeue at" in missing.content.decode()
    past = support.post(url, {"when": "at", "at": "2020-01-01T10:00"}, follow=True)
    assert "That time has passed" in past.content.decode()
    assert message_status(letter) == "dead"

    at = (timezone.localtime() + timedelta(days=1)).replace(second=0, microsecond=0)
    support.post(url, {"when": "at", "at": at.strftime("%Y-%m-%dT%H:%M"), "note": "after 9"})

    message = Message.objects.get(pk=letter.message_id)
    assert (message.status, message.next_attempt_at) == ("pending", at)
    shown = summary_of(detail(support, letter.pk))
    assert f"due {at:%Y-%m-%d %H:%M}:00 UTC: 0 attempts since" in shown


def test_history_and_recent_actions_show_the_decisions(support: Client) -> None:
    requeued, discarded = dead_message(), dead_message()
    support.post(reverse("admin:delivery_deadletter_requeue", args=[requeued.pk]), {"note": "a"})
    support.post(reverse("admin:delivery_deadletter_discard", args=[discarded.pk]), {"note": "b"})

    history = support.get(reverse("admin:delivery_deadletter_history", args=[requeued.pk]))
    html = history.content.decode()
    assert history.status_code == 200 and "no change history" not in html.lower()
    assert "Requeued with fresh attempts, due now. Note: a" in html and "sam" in html
    assert 'href="' + reverse("admin:delivery_deadletter_history", args=[requeued.pk]) in detail(
        support, requeued.pk
    )
    home = support.get(reverse("admin:index")).content.decode()
    recent = home[home.index("Recent actions") :]
    assert f"dead letter for message {requeued.message_id}" in recent
    assert f"dead letter for message {discarded.message_id}" in recent
    assert reverse("admin:delivery_deadletter_change", args=[requeued.pk]) in recent


def test_support_requeues_failed_messages_from_the_messages_list(
    support: Client, client: Client
) -> None:
    campaign = make_campaign(status="completed")
    failed = make_message(campaign=campaign, status="failed", last_error_code=131026)
    sent = make_message(campaign=campaign, status="sent")
    changelist = reverse("admin:delivery_message_changelist")
    ask = {
        "action": "requeue_failed_selected",
        "_selected_action": [failed.pk, sent.pk],
        "index": 0,
    }

    confirm = support.post(changelist, ask).content.decode()
    assert "2 selected messages" in confirm and "1 failed." in confirm
    done = support.post(changelist, {**ask, "confirm": "yes", "when": "now"}, follow=True)

    text = done.content.decode()
    assert "1 failed message(s) requeued" in text
    assert f"1 not requeued (already sent again): #{sent.pk}" in text
    assert Message.objects.get(pk=failed.pk).status == "pending"
    history = support.get(reverse("admin:delivery_message_history", args=[failed.pk]))
    assert "Requeued with fresh attempts, due now." in history.content.decode()


def test_marketing_is_not_offered_the_failed_requeue(client: Client) -> None:
    client.force_login(role_user(MARKETING))
    make_message(campaign=make_campaign(status="completed"), status="failed")
    page = client.get(reverse("admin:delivery_message_changelist")).content.decode()
    assert "requeue_failed_selected" not in page
