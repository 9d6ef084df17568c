"""The support pages for dead letters: find, inspect, requeue or discard, audited."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from delivery.models import DeadLetter, SupportAction
from tests.factories import make_campaign, make_phone_number
from tests.ui.support import dead_message, message_status, role_user
from whatsblast.auth.roles import SUPPORT

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/delivery/deadletter/"


@pytest.fixture
def support(client: Client) -> Client:
    client.force_login(role_user(SUPPORT))
    return client


def listed(page: str, letter: DeadLetter) -> bool:
    return f"/admin/delivery/deadletter/{letter.pk}/change/" in page


def test_the_list_filters_by_code_campaign_number_status_date_and_recipient(
    support: Client,
) -> None:
    first = dead_message()
    other_campaign = make_campaign(phone_number=make_phone_number(), status="completed")
    second = dead_message(campaign=other_campaign, to="+5511988887777")
    DeadLetter.objects.filter(pk=second.pk).update(
        error_code=131049, error_title="Not delivered to maintain healthy ecosystem engagement"
    )
    old = dead_message()
    DeadLetter.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=400), status="discarded"
    )

    page = support.get(CHANGELIST).content.decode()
    # The list opens on the open ones: the discarded one is behind "All".
    assert listed(page, first) and listed(page, second) and not listed(page, old)
    everything = support.get(CHANGELIST, {"status__exact": "all"}).content.decode()
    assert all(listed(everything, x) for x in (first, second, old))
    assert "131049 Not delivered to maintain healthy ecosystem engagement" in page  # the filter
    by_code = support.get(CHANGELIST, {"error_code": "131049"}).content.decode()
    assert listed(by_code, second) and not listed(by_code, first)
    by_campaign = support.get(CHANGELIST, {"campaign__id__exact": other_campaign.pk})
    assert listed(by_campaign.content.decode(), second)
    assert not listed(by_campaign.content.decode(), first)
    by_number = support.get(
        CHANGELIST, {"phone_number__id__exact": first.phone_number_id}
    ).content.decode()
    assert listed(by_number, first) and not listed(by_number, second)
    open_only = support.get(CHANGELIST, {"status__exact": "open"}).content.decode()
    assert not listed(open_only, old)
    this_year = support.get(CHANGELIST, {"created_at__year": timezone.now().year}).content.decode()
    assert not listed(this_year, old) and listed(this_year, first)
    for typed in ("+5511988887777", "5511988887777", "+55 (11) 98888-7777", "0055 11 98888 7777"):
        found = support.get(CHANGELIST, {"q": typed}).content.decode()
        assert listed(found, second) and not listed(found, first), typed


def test_the_detail_page_shows_the_message_its_request_and_every_attempt(
    support: Client,
) -> None:
    letter = dead_message()
    number = letter.phone_number

    page = support.get(reverse("admin:delivery_deadletter_change", args=[letter.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    assert letter.message.to in html
    assert f"/{number.phone_number_id}/messages" in html
    assert "&quot;biz_opaque_callback_data&quot;: &quot;wb:" in html
    assert "&quot;text&quot;: &quot;Ana&quot;" in html
    assert number.access_token.reveal() not in html
    assert html.count("Something went wrong") >= 3
    for attempt in (1, 2, 3):
        assert f"attempt {attempt} failed" in html
    assert 'id="requeue-form"' in html and 'id="discard-form"' in html
    assert "Nobody has decided on this entry yet." in html


def test_requeue_from_the_detail_page_is_audited(
    support: Client, django_capture_on_commit_callbacks: Any
) -> None:
    letter = dead_message()
    url = reverse("admin:delivery_deadletter_requeue", args=[letter.pk])

    with django_capture_on_commit_callbacks(execute=True):
        response = support.post(url, {"note": "Meta had an outage"}, follow=True)

    html = response.content.decode()
    assert "1 dead letter(s) requeued." in html
    assert message_status(letter) == "pending"
    assert 'id="audit-trail"' in html and "Meta had an outage" in html and "sam" in html
    assert 'id="requeue-form"' not in html  # decided: no more buttons
    action = SupportAction.objects.get()
    assert (action.username, action.action, action.note) == (
        "sam",
        "requeued",
        "Meta had an outage",
    )


def test_discard_from_the_detail_page_needs_a_note(support: Client) -> None:
    letter = dead_message()
    url = reverse("admin:delivery_deadletter_discard", args=[letter.pk])

    refused = support.post(url, {"note": ""}, follow=True).content.decode()
    assert "a note is required" in refused
    assert DeadLetter.objects.get(pk=letter.pk).status == "open"

    support.post(url, {"note": "recipient left the company"})
    letter.refresh_from_db()
    assert (letter.status, letter.note) == ("discarded", "recipient left the company")
    assert message_status(letter) == "dead"


def test_bulk_requeue_confirms_with_a_note_then_decides_every_selected_entry(
    support: Client, django_capture_on_commit_callbacks: Any
) -> None:
    letters = [dead_message() for _ in range(3)]
    chosen = [letters[0].pk, letters[1].pk]
    ask = {"action": "requeue_selected", "_selected_action": chosen, "index": 0}

    confirm = support.post(CHANGELIST, ask).content.decode()
    assert "2 selected dead letters" in confirm and 'name="confirm"' in confirm
    assert message_status(letters[0]) == "dead"
    with django_capture_on_commit_callbacks(execute=True):
        done = support.post(
            CHANGELIST, {**ask, "confirm": "yes", "note": "bulk retry"}, follow=True
        )

    assert "2 dead letter(s) requeued." in done.content.decode()
    assert [message_status(x) for x in letters] == ["pending", "pending", "dead"]
    assert SupportAction.objects.filter(note="bulk retry").count() == 2


def test_bulk_discard_across_a_filtered_list(support: Client) -> None:
    letters = [dead_message() for _ in range(3)]
    DeadLetter.objects.filter(pk=letters[2].pk).update(error_code=470)
    ask = {
        "action": "discard_selected",
        "select_across": "1",
        "_selected_action": [letters[0].pk],  # the ticked box of the page shown
        "index": 0,
        "confirm": "yes",
    }
    filtered = f"{CHANGELIST}?error_code=131000"

    refused = support.post(filtered, {**ask, "note": " "}).content.decode()
    assert "Say why these dead letters are discarded." in refused
    done = support.post(filtered, {**ask, "note": "test numbers"}, follow=True)

    assert "2 dead letter(s) discarded." in done.content.decode()
    statuses = [DeadLetter.objects.get(pk=x.pk).status for x in letters]
    assert statuses == ["discarded", "discarded", "open"]


def test_the_rendered_request_is_valid_json(support: Client) -> None:
    letter = dead_message()
    response = support.get(reverse("admin:delivery_deadletter_change", args=[letter.pk]))
    body = response.context["request_body"]
    assert json.loads(body)["to"] == letter.message.to
