"""Phone numbers in the admin: rate, tier, quality, a real pause and resume, a test send."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import PhoneNumber
from delivery.engine.pacing import number_bucket
from delivery.models import Message, MessageKind
from delivery.numbers import TEST_SEND_KEY_NAME
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import make_account, make_phone_number, make_template
from tests.ui.support import role_user
from whatsblast.auth.roles import OPERATORS

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(role_user(OPERATORS))
    return client


def change_url(number: PhoneNumber) -> str:
    return reverse("admin:campaigns_phonenumber_change", args=[number.pk])


def number_form(number: PhoneNumber, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "phone_number_id": number.phone_number_id,
        "display_phone_number": number.display_phone_number,
        "account": number.account_id,
        "access_token": "",
        "api_base_url": "",
        "rate_per_second": number.rate_per_second,
        "transactional_reserve": number.transactional_reserve,
        "paused_until_0": "",
        "paused_until_1": "",
        "paused_reason": "",
    }
    data.update(overrides)
    return data


def test_the_list_shows_tier_effective_rate_quality_and_pause(operator: Client) -> None:
    number = make_phone_number(
        account=make_account(messaging_limit_tier="TIER_10K"),
        rate_per_second=80,
        effective_rate=51.2,
        quality_rating="YELLOW",
        paused_until=timezone.now() + timedelta(hours=1),
        paused_reason="quality dropped",
    )

    page = operator.get(reverse("admin:campaigns_phonenumber_changelist")).content.decode()

    assert number.display_phone_number in page
    assert "10,000" in page
    assert "51.2 (lowered after throttling)" in page
    assert "Medium" in page
    assert ": quality dropped" in page


def test_pausing_in_the_form_holds_every_worker_and_resume_lets_go(operator: Client) -> None:
    number = make_phone_number()
    bucket = number_bucket(number)
    until = timezone.localtime(timezone.now() + timedelta(minutes=30))

    response = operator.post(
        change_url(number),
        number_form(
            number,
            paused_until_0=until.strftime("%Y-%m-%d"),
            paused_until_1=until.strftime("%H:%M:%S"),
            paused_reason="template review",
        ),
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert 1790 <= bucket.paused_for() <= 1800
    page = operator.get(change_url(number)).content.decode()
    assert "Paused until" in page and "(template review)" in page

    resumed = operator.post(
        reverse("admin:campaigns_phonenumber_resume", args=[number.pk]), follow=True
    )

    assert "sends again now" in resumed.content.decode()
    number.refresh_from_db()
    assert (number.paused_until, number.paused_reason) == (None, "")
    assert bucket.paused_for() == 0
    assert "Sending." in resumed.content.decode()
    assert LogEntry.objects.filter(change_message__contains="Resumed now").count() == 1


def test_resume_also_lifts_the_limiter_hold_after_throttling(operator: Client) -> None:
    number = make_phone_number()
    number_bucket(number).pause(20)  # what delivery.engine.adaptive does after 130429
    assert "holds sends for 20 s more" in operator.get(change_url(number)).content.decode()

    operator.post(
        reverse("admin:campaigns_phonenumber_changelist"),
        {"action": "resume_numbers", "_selected_action": [number.pk], "index": 0},
    )

    assert number_bucket(number).paused_for() == 0


def test_a_pause_in_the_past_is_refused(operator: Client) -> None:
    number = make_phone_number()
    past = timezone.localtime(timezone.now() - timedelta(minutes=5))
    page = operator.post(
        change_url(number),
        number_form(
            number,
            paused_until_0=past.strftime("%Y-%m-%d"),
            paused_until_1=past.strftime("%H:%M:%S"),
        ),
    ).content.decode()
    assert "A pause must end in the future" in page


@pytest.mark.django_db(transaction=True)
def test_a_test_send_goes_out_through_the_transactional_path(operator: Client) -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=20)
        template = make_template(account=number.account, name="otp", body_text="Code {{1}}")
        sim.add_template(name="otp", language="en_US", body_params=1)
        url = reverse("admin:campaigns_phonenumber_test_send", args=[number.pk])

        response = operator.post(
            url, {"to": "+55 11 98765-0001", "template": template.pk, "body_params": "482913"}
        )

        message = Message.objects.get()
        assert response["Location"] == f"{url}?message={message.pk}"
        assert message.kind == MessageKind.TRANSACTIONAL
        assert message.api_key.name == TEST_SEND_KEY_NAME
        waiting = operator.get(response["Location"]).content.decode()
        assert '<meta http-equiv="refresh" content="2">' in waiting
        work_burst("transactional")
        [record] = sim.records(bodies=True)

    sent = json.loads(record["body"])
    assert sent["to"] == "+5511987650001"
    assert sent["template"]["components"][0]["parameters"] == [{"type": "text", "text": "482913"}]
    page = operator.get(response["Location"]).content.decode()
    assert '<span class="wb-status" id="test-send-status">Sent</span>' in page
    assert "refresh" not in page


def test_a_test_send_refused_by_the_api_checks_says_why(operator: Client) -> None:
    number = make_phone_number()
    template = make_template(account=number.account, name="promo", body_text="Hi {{1}}")
    url = reverse("admin:campaigns_phonenumber_test_send", args=[number.pk])

    text = operator.post(url, {"to": "+5511987650001", "text": "hello"}).content.decode()
    params = operator.post(url, {"to": "+5511987650001", "template": template.pk}).content
    bad_to = operator.post(url, {"to": "12", "text": "x"}).content.decode()

    assert "only be sent within 24 hours" in text
    assert "Template takes 1 params, got 0." in params.decode()
    assert "to: Not a phone number" in bad_to
    assert not Message.objects.exists()
