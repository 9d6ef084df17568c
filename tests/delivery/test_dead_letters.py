"""Support's requeue and discard: fresh attempts that really go out, audited, decided once."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import django_rq
import pytest
from django.core.exceptions import ValidationError
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.launch import campaign_start
from delivery.dead_letters import dead_letter_discard, dead_letter_request, dead_letter_requeue
from delivery.engine import dispatch
from delivery.engine.completion import campaigns_complete_finished
from delivery.engine.reconcile import reconcile
from delivery.models import DeadLetter, Message, MessageKind, SupportAction
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_message
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("sam", password="pw")


def dead_letter_for(message: Message, **fields: Any) -> DeadLetter:
    Message.objects.filter(pk=message.pk).update(
        status="dead",
        attempt=5,
        last_error_code=131000,
        error_history=[{"attempt": 5, "code": 131000, "title": "Something went wrong"}],
    )
    return DeadLetter.objects.create(
        message=message,
        campaign=message.campaign,
        phone_number=message.phone_number,
        error_code=131000,
        error_title="Something went wrong",
        **fields,
    )


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks


def queued(name: str) -> int:
    return django_rq.get_queue(name).count


def test_requeue_gives_fresh_attempts_reopens_the_campaign_and_kicks_it(
    agent: Any, on_commit: Any
) -> None:
    campaign = make_campaign(status=CampaignStatus.COMPLETED)
    letters = [dead_letter_for(make_message(campaign=campaign)) for _ in range(3)]

    with on_commit(execute=True):
        decision = dead_letter_requeue(dead_letters=letters[:2], user=agent, note="Meta outage")

    assert (decision.done, decision.skipped_resolved, decision.skipped_cancelled) == (2, 0, 0)
    for letter in letters[:2]:
        letter.refresh_from_db()
        assert (letter.status, letter.resolved_by, letter.note) == (
            "requeued",
            agent,
            "Meta outage",
        )
        assert letter.resolved_at is not None
        message = letter.message
        message.refresh_from_db()
        assert (message.status, message.attempt) == ("pending", 0)
        assert message.error_history[-1]["outcome"] == "requeued by support"
        assert len(message.error_history) == 2  # the earlier attempt is kept
    letters[2].refresh_from_db()
    assert letters[2].status == "open"
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING and campaign.completed_at is None
    assert queued("campaigns") >= 1
    actions = SupportAction.objects.filter(dead_letter__in=letters[:2])
    assert {(a.action, a.username, a.note, a.user_id) for a in actions} == {
        ("requeued", "sam", "Meta outage", agent.pk)
    }
    assert actions.count() == 2


def test_an_entry_is_decided_once(agent: Any, django_user_model: Any) -> None:
    other = django_user_model.objects.create_user("kim", password="pw")
    letter = dead_letter_for(make_message(campaign=make_campaign(status="running")))
    assert dead_letter_discard(dead_letters=[letter], user=other, note="duplicate").done == 1

    decision = dead_letter_requeue(dead_letters=[letter.pk], user=agent)

    assert (decision.done, decision.skipped_resolved) == (0, 1)
    letter.refresh_from_db()
    assert (letter.status, letter.resolved_by) == ("discarded", other)
    assert Message.objects.get(pk=letter.message_id).status == "dead"
    assert list(SupportAction.objects.values_list("username", "action")) == [("kim", "discarded")]


def test_a_cancelled_campaign_is_not_sent_to(agent: Any) -> None:
    letter = dead_letter_for(make_message(campaign=make_campaign(status="cancelled")))

    decision = dead_letter_requeue(dead_letters=[letter], user=agent)

    assert (decision.done, decision.skipped_cancelled) == (0, 1)
    letter.refresh_from_db()
    assert letter.status == "open"
    assert Message.objects.get(pk=letter.message_id).status == "dead"
    assert not SupportAction.objects.exists()


def test_a_paused_campaign_keeps_its_requeued_rows_for_the_resume(
    agent: Any, on_commit: Any
) -> None:
    campaign = make_campaign(status="paused")
    letter = dead_letter_for(make_message(campaign=campaign))

    with on_commit(execute=True):
        decision = dead_letter_requeue(dead_letters=[letter], user=agent)

    assert decision.done == 1 and decision.campaigns_kicked == []
    assert Message.objects.get(pk=letter.message_id).status == "pending"
    campaign.refresh_from_db()
    assert campaign.status == "paused"
    assert queued("campaigns") == 0


def test_a_transactional_message_is_queued_on_its_own_queue(agent: Any, on_commit: Any) -> None:
    campaign = make_campaign()
    message = make_message(campaign=campaign)
    Message.objects.filter(pk=message.pk).update(kind=MessageKind.TRANSACTIONAL, campaign=None)
    letter = dead_letter_for(Message.objects.get(pk=message.pk))

    with on_commit(execute=True):
        dead_letter_requeue(dead_letters=[letter], user=agent)

    assert queued("transactional") == 1
    assert Message.objects.get(pk=message.pk).status == "pending"


def test_a_requeued_transactional_message_whose_job_is_lost_is_swept_up_soon(
    agent: Any, on_commit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original send's once-per-attempt mark for attempt 0 stands for five minutes; the
    requeue takes it over for a few seconds only, so a lost job (Redis restarted) does not
    hold the requeued message for those five minutes."""
    monkeypatch.setattr(dispatch, "ENQUEUE_AGAIN_GRACE_S", 0.5)
    message = make_message(campaign=make_campaign())
    Message.objects.filter(pk=message.pk).update(kind=MessageKind.TRANSACTIONAL, campaign=None)
    with on_commit(execute=True):
        assert dispatch.transactional_enqueue(message_id=message.pk, attempt=0)  # first send
    django_rq.get_queue("transactional").empty()
    letter = dead_letter_for(Message.objects.get(pk=message.pk))

    with on_commit(execute=True):
        dead_letter_requeue(dead_letters=[letter], user=agent)
    assert queued("transactional") == 1
    django_rq.get_queue("transactional").empty()  # the job is lost

    with on_commit(execute=True):
        assert dispatch.transactional_due_requeue() == 0  # the requeue's job has its time
    time.sleep(0.6)
    with on_commit(execute=True):
        assert dispatch.transactional_due_requeue() == 1
    assert queued("transactional") == 1


def test_discard_needs_a_note_and_leaves_the_message_dead(agent: Any) -> None:
    letter = dead_letter_for(make_message(campaign=make_campaign()))
    with pytest.raises(ValidationError, match="note is required"):
        dead_letter_discard(dead_letters=[letter], user=agent, note="  ")

    decision = dead_letter_discard(dead_letters=[letter], user=agent, note="number unreachable")

    assert decision.done == 1
    letter.refresh_from_db()
    assert (letter.status, letter.note, letter.resolved_by) == (
        "discarded",
        "number unreachable",
        agent,
    )
    assert Message.objects.get(pk=letter.message_id).status == "dead"
    assert SupportAction.objects.get().action == "discarded"


def test_the_rendered_request_has_no_token() -> None:
    campaign = make_campaign()
    number = campaign.phone_number
    message = make_message(campaign=campaign, params={"body": ["Ana"]})

    request = dead_letter_request(message=message)

    assert request["url"].endswith(f"/{number.phone_number_id}/messages")
    assert request["body"]["template"]["components"] == [
        {"type": "body", "parameters": [{"type": "text", "text": "Ana"}]}
    ]
    assert request["body"]["biz_opaque_callback_data"] == f"wb:{message.pk}"
    assert number.access_token.reveal() not in repr(request)


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_requeued_dead_letter_is_really_sent(django_user_model: Any) -> None:
    agent = django_user_model.objects.create_user("sam", password="pw")
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=2, max_attempts=1)
        sim.configure(mode="all_5xx")
        campaign_start(campaign=campaign)
        work_burst()
        reconcile()
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED
        assert set(Message.objects.filter(campaign=campaign).values_list("status", flat=True)) == {
            "dead"
        }
        sim.configure(mode="normal")

        decision = dead_letter_requeue(
            dead_letters=DeadLetter.objects.filter(campaign=campaign), user=agent, note="retry"
        )
        work_burst()

        assert decision.done == 2
        statuses = list(Message.objects.filter(campaign=campaign).values_list("status", flat=True))
        assert statuses == ["sent", "sent"]
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED


def test_a_requeue_keeps_when_the_campaign_first_finished(agent: Any, on_commit: Any) -> None:
    started = timezone.now() - timedelta(hours=2)
    campaign = make_campaign(status=CampaignStatus.RUNNING, started_at=started)
    letter = dead_letter_for(make_message(campaign=campaign))
    assert campaigns_complete_finished(campaign_id=campaign.pk) == [campaign.pk]
    campaign.refresh_from_db()
    first = campaign.first_completed_at
    assert first is not None and first == campaign.completed_at
    Campaign.objects.filter(pk=campaign.pk).update(
        first_completed_at=started + timedelta(minutes=40),
        completed_at=started + timedelta(minutes=40),
    )

    with on_commit(execute=True):
        dead_letter_requeue(dead_letters=[letter], user=agent, note="Meta outage")
    Message.objects.filter(pk=letter.message_id).update(status="delivered")
    assert campaigns_complete_finished(campaign_id=campaign.pk) == [campaign.pk]

    campaign.refresh_from_db()
    assert campaign.first_completed_at == started + timedelta(minutes=40)
    assert campaign.completed_at is not None
    assert campaign.completed_at > campaign.first_completed_at
    page = Client()
    page.force_login(role_user(MARKETING))
    report = page.get(reverse("admin:campaigns_campaign_report", args=[campaign.pk]))
    text = " ".join(report.content.decode().split())
    assert "ran 40 min" in text, text[:3000]
    assert "Messages sent again later (requeued or retried) settled by" in text
