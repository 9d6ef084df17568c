"""Sends Meta holds for quality assessment (template pacing): read from the send response,
stored with the wamid in the batch's one statement, counted on the campaign page and by
``campaign status``, and named (never acted on) by the quality guard.

The campaign runs go over real HTTP to the simulator, on real PostgreSQL and Redis.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.guard import campaign_guard, guard_summary, guard_window
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.progress import campaign_progress
from delivery.campaigns.retry import campaign_retry_failed
from delivery.cloud.client import (
    HELD_FOR_QUALITY_ASSESSMENT,
    Accepted,
    CloudApiClient,
    SendRequest,
    parse_response,
)
from delivery.messages import Settlement, settlements_record
from delivery.models import Message, MessageStatus
from delivery.simulator.config import SimConfig
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_message

GRAPH = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "graph"
EXPLANATION = "Meta is pacing this template"


def fixture_body(name: str) -> bytes:
    return (GRAPH / f"{name}.json").read_bytes()


# --- the client reads message_status ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "message_status"),
    [
        ("meta_doc_send_response_template_accepted", "accepted"),
        # Sends Meta documents without the field (a user id; a phone and a user id).
        ("meta_doc_send_response_to_bsuid", None),
        ("meta_doc_send_response_phone_and_bsuid", None),
    ],
)
def test_the_client_reads_message_status_from_meta_s_published_responses(
    fixture: str, message_status: str | None
) -> None:
    result = parse_response(status=200, body=fixture_body(fixture), headers={}, latency_s=0.1)

    assert isinstance(result, Accepted)
    assert result.wamid.startswith("wamid.")
    assert result.message_status == message_status
    assert result.held_for_quality_assessment is False


def test_a_held_answer_is_read_as_held() -> None:
    # No held response is published by Meta; Meta's own accepted example carrying the
    # other value of its documented enum (OpenAPI ``MessageStatus``; "Template pacing").
    data = json.loads(fixture_body("meta_doc_send_response_template_accepted"))
    data["messages"][0]["message_status"] = "held_for_quality_assessment"
    result = parse_response(status=200, body=json.dumps(data).encode(), headers={}, latency_s=0)

    assert isinstance(result, Accepted)
    assert result.message_status == HELD_FOR_QUALITY_ASSESSMENT
    assert result.held_for_quality_assessment is True
    assert result.wamid == data["messages"][0]["id"]


def test_a_message_status_of_another_type_is_ignored_not_fatal() -> None:
    body = b'{"contacts":[{"wa_id":"1"}],"messages":[{"id":"wamid.Z","message_status":["held"]}]}'
    result = parse_response(status=200, body=body, headers={}, latency_s=0)

    assert isinstance(result, Accepted)
    assert result.message_status is None and not result.held_for_quality_assessment


# --- the simulator answers held -------------------------------------------------------------------


def test_the_simulator_holds_a_named_template_s_sends_and_a_share_of_the_others() -> None:
    client = CloudApiClient(api_version="v23.0", connect_timeout=2.0, read_timeout=5.0)
    with running_simulator(seed=5) as sim:
        sim.add_number(phone_number_id="7001", access_token="tok", rate=1000)
        for name in ("paced_promo", "plain_promo"):
            sim.add_template(name=name, language="en_US", body_params=1)

        def send(template: str, i: int) -> Accepted:
            result = client.send(
                SendRequest(
                    base_url=sim.url,
                    phone_number_id="7001",
                    access_token="tok",
                    to=f"+55119{i:08d}",
                    callback_data=f"wb:{i}",
                    template_name=template,
                    language="en_US",
                    params={"body": ["x"]},
                )
            )
            assert isinstance(result, Accepted), result
            return result

        sim.configure(quality_held_templates=["paced_promo"])
        assert all(send("paced_promo", i).held_for_quality_assessment for i in range(5))
        plain = send("plain_promo", 5)
        assert plain.message_status == "accepted" and not plain.held_for_quality_assessment

        sim.configure(quality_held_templates=[], quality_held_fraction=0.3)
        held = sum(send("plain_promo", 10 + i).held_for_quality_assessment for i in range(200))
        assert 30 <= held <= 90
        assert sim.stats()["held_for_quality_assessment"] == 5 + held
    client.close()


def test_a_held_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="quality_held_fraction"):
        SimConfig().updated({"quality_held_fraction": 1.5})


# --- stored with the wamid, in the batch's one statement ------------------------------------------


@pytest.mark.django_db
def test_the_batch_records_which_sends_meta_held_in_one_update() -> None:
    campaign = make_campaign()
    held, plain, late = (
        make_message(campaign=campaign, status=MessageStatus.SENDING) for _ in range(3)
    )
    # A delivery receipt beat the send's own answer to this row.
    Message.objects.filter(pk=late.pk).update(status=MessageStatus.DELIVERED)

    def sent(message: Message, wamid: str, is_held: bool) -> Settlement:
        return Settlement(
            message.pk, MessageStatus.SENT, 1, 0, wamid=wamid, wa_id="1",
            held_for_quality_assessment=is_held,
        )  # fmt: skip

    with CaptureQueriesContext(connection) as queries:
        recorded = settlements_record(
            [
                sent(held, "wamid.H", True),
                sent(plain, "wamid.P", False),
                sent(late, "wamid.L", True),
            ]
        )

    assert recorded == 2
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("\nUPDATE")]
    assert len(updates) == 2  # the batch's UPDATE, and the one for late successes
    flags = dict(Message.objects.values_list("wamid", "held_for_quality_assessment"))
    assert flags == {"wamid.H": True, "wamid.P": False, "wamid.L": True}
    assert Message.objects.get(pk=late.pk).status == MessageStatus.DELIVERED


@pytest.mark.django_db
def test_a_retried_send_forgets_that_meta_held_its_earlier_attempt() -> None:
    campaign = make_campaign(status=CampaignStatus.COMPLETED)
    message = make_message(campaign=campaign, status=MessageStatus.SENDING)
    settlements_record(
        [Settlement(message.pk, MessageStatus.SENT, 1, 0, wamid="wamid.R", wa_id="1",
                    held_for_quality_assessment=True)]
    )  # fmt: skip
    # Released, then failed at Meta with a transient error: a retry sends it afresh.
    Message.objects.filter(pk=message.pk).update(
        status=MessageStatus.FAILED, last_error_code=131000
    )

    assert campaign_retry_failed(campaign=campaign).retried == 1

    message.refresh_from_db()
    assert message.status == MessageStatus.PENDING and message.wamid is None
    assert message.held_for_quality_assessment is False


# --- a campaign through the simulator: stored, counted, reported by the guard ---------------------


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=2.0, GUARD_INTERVAL_SECONDS=0)
def test_a_paced_campaign_s_held_sends_are_stored_counted_and_named_by_the_guard(
    client: Client,
) -> None:
    with running_simulator(quality_held_fraction=0.4, seed=3) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(
            sim, number, recipients=80, guard_window_sends=500, guard_min_sample=10
        )
        campaign_start(campaign=campaign)
        work_burst()
        held_answers = sim.stats()["held_for_quality_assessment"]

    messages = Message.objects.filter(campaign=campaign)
    assert set(messages.values_list("status", flat=True)) == {MessageStatus.SENT}
    stored = messages.filter(held_for_quality_assessment=True).count()
    assert 0 < held_answers < 80 and stored == held_answers

    # The progress both the page and the command read.
    campaign = Campaign.objects.select_related("phone_number").get(pk=campaign.pk)
    assert campaign_progress(campaign=campaign).held_for_quality_assessment == stored

    # The campaign page: the count and what it means.
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    html = client.get(f"/admin/campaigns/campaign/{campaign.pk}/change/").content.decode()
    assert f"Held for quality assessment: {stored}." in html
    assert EXPLANATION in html and "132015" in html
    assert f"Meta held {stored} of the latest 80 sends" in html

    # manage.py campaign status, as JSON and as text.
    out = StringIO()
    call_command("campaign", "status", str(campaign.pk), "--json", stdout=out)
    assert json.loads(out.getvalue())["held_for_quality_assessment"] == stored
    out = StringIO()
    call_command("campaign", "status", str(campaign.pk), stdout=out)
    assert f"Held for quality assessment: {stored}." in out.getvalue()

    # The guard counts them in its window, names them, and does not act on them.
    window = guard_window(campaign=campaign)
    assert (window.sends, window.held, window.rate) == (80, stored, 0.0)
    assert f"{stored} of them ({stored / 80:.1%}) held by Meta" in window.describe()
    assert guard_summary(campaign=campaign)["held"] == stored
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    campaign.refresh_from_db()
    assert campaign_guard(campaign=campaign) == ""
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING and campaign.guard_rate_cap is None


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=2.0)
def test_every_send_held_neither_slows_nor_pauses_a_running_campaign() -> None:
    with running_simulator(seed=4) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        campaign = campaign_on(
            sim,
            number,
            recipients=40,
            guard_window_sends=40,
            guard_min_sample=10,
            guard_slow_rate=0.01,
            guard_pause_rate=0.02,
        )
        sim.configure(quality_held_templates=[campaign.template.name])
        campaign_start(campaign=campaign)
        work_burst()

    assert Message.objects.filter(campaign=campaign, held_for_quality_assessment=True).count() == 40
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    campaign = Campaign.objects.select_related("phone_number").get(pk=campaign.pk)
    assert guard_window(campaign=campaign).held_share == 1.0
    assert campaign_guard(campaign=campaign) == ""
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING and campaign.guard_rate_cap is None
    warning = str(guard_summary(campaign=campaign)["held_warning"])
    assert warning.startswith("Warning: Meta held 40 of the latest 40 sends (100.0%)")


@pytest.mark.django_db
def test_a_campaign_nothing_was_held_of_shows_no_held_line(client: Client) -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    make_message(campaign=campaign, status=MessageStatus.SENT)
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")

    html = client.get(f"/admin/campaigns/campaign/{campaign.pk}/change/").content.decode()

    assert 'id="wb-held"' in html and "Held for quality assessment:" not in html
    assert guard_summary(campaign=campaign)["held_warning"] == ""
    out = StringIO()
    call_command("campaign", "status", str(campaign.pk), stdout=out)
    assert "held" not in out.getvalue().lower()
