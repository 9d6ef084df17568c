"""Support's requeue: due now or at a chosen time, the last life cleared, the engine's
backoff between the fresh attempts, failed messages (never dead-lettered) requeued with
the same guards, and every decision in the admin's LogEntry."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from campaigns.models import CampaignStatus, Contact
from delivery.campaigns.launch import campaign_start
from delivery.dead_letters import (
    REQUEUED_OUTCOME,
    dead_letter_discard,
    dead_letter_requeue,
    message_failed_requeue,
)
from delivery.engine.backoff import BASE_S
from delivery.models import DeadLetter, Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_message
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("sam", password="pw")


def dead_letter_for(message: Message) -> DeadLetter:
    Message.objects.filter(pk=message.pk).update(
        status="dead", attempt=5, last_error_code=131000, failed_at=timezone.now()
    )
    return DeadLetter.objects.create(
        message=message,
        campaign=message.campaign,
        phone_number=message.phone_number,
        error_code=131000,
        error_title="Something went wrong",
    )


def log_entries(model: type, ids: list[int]) -> list[LogEntry]:
    kind = ContentType.objects.get_for_model(model)
    return list(
        LogEntry.objects.filter(content_type=kind, object_id__in=[str(i) for i in ids]).order_by(
            "object_id"
        )
    )


def test_a_requeue_at_a_chosen_time_is_due_then_and_says_so(agent: Any) -> None:
    letter = dead_letter_for(make_message(campaign=make_campaign(status="completed")))
    at = timezone.now() + timedelta(hours=3)

    decision = dead_letter_requeue(dead_letters=[letter], user=agent, note="after the fix", at=at)

    assert decision.done == 1
    message = Message.objects.get(pk=letter.message_id)
    assert (message.status, message.attempt, message.next_attempt_at) == ("pending", 0, at)
    mark = message.error_history[-1]
    assert mark["outcome"] == REQUEUED_OUTCOME and mark["by"] == "sam"
    assert datetime.fromisoformat(mark["due_at"]) == at
    [entry] = log_entries(DeadLetter, [letter.pk])
    assert (entry.user_id, entry.action_flag) == (agent.pk, CHANGE)
    assert "Requeued with fresh attempts, due " in entry.change_message
    assert "Note: after the fix" in entry.change_message


def test_a_requeue_now_is_due_at_once_and_times_long_past_or_far_ahead_are_refused(
    agent: Any,
) -> None:
    letter = dead_letter_for(make_message(campaign=make_campaign(status="completed")))
    for at, words in (
        (timezone.now() - timedelta(hours=1), "That time has passed"),
        (timezone.now() + timedelta(days=31), "within the next 30 days"),
    ):
        with pytest.raises(ValidationError, match=words):
            dead_letter_requeue(dead_letters=[letter], user=agent, at=at)
    assert Message.objects.get(pk=letter.message_id).status == "dead"

    # A time a moment ago (the form stood open) means now, not that moment.
    a_moment_ago = timezone.now() - timedelta(seconds=30)
    dead_letter_requeue(dead_letters=[letter], user=agent, at=a_moment_ago)
    message = Message.objects.get(pk=letter.message_id)
    assert message.status == "pending"
    assert a_moment_ago < message.next_attempt_at <= timezone.now()


def test_a_requeue_clears_the_last_life_so_the_new_send_records_its_own(agent: Any) -> None:
    long_ago = timezone.now() - timedelta(days=2)
    message = make_message(campaign=make_campaign(status="completed"))
    letter = dead_letter_for(message)
    Message.objects.filter(pk=message.pk).update(
        wamid="wamid.earlier", sent_at=long_ago, delivered_at=long_ago, read_at=long_ago
    )

    dead_letter_requeue(dead_letters=[letter], user=agent)

    message.refresh_from_db()
    assert message.wamid is None
    assert (message.sent_at, message.delivered_at, message.read_at, message.failed_at) == (
        None,
        None,
        None,
        None,
    )


def test_a_discard_is_in_the_log_too(agent: Any) -> None:
    letter = dead_letter_for(make_message(campaign=make_campaign(status="completed")))
    dead_letter_discard(dead_letters=[letter], user=agent, note="number gone")
    [entry] = log_entries(DeadLetter, [letter.pk])
    assert entry.change_message == "Discarded: the message stays dead. Note: number gone"


def test_failed_messages_are_requeued_and_every_refusal_says_why(agent: Any) -> None:
    campaign = make_campaign(status="completed")
    failed = make_message(
        campaign=campaign,
        status="failed",
        attempt=1,
        last_error_code=131026,
        wamid="wamid.failed",
        sent_at=timezone.now(),
        failed_at=timezone.now(),
    )
    opted_out_contact = Contact.objects.create(phone="+5511900001111", opted_out_at=timezone.now())
    opted_out = make_message(campaign=campaign, status="failed", contact=opted_out_contact)
    stopped = make_message(campaign=campaign, status="failed", last_error_code=131050)
    already_sent = make_message(campaign=campaign, status="sent")
    dead = make_message(campaign=campaign, status="dead")
    cancelled = make_message(campaign=make_campaign(status="cancelled"), status="failed")
    ids = [failed.pk, opted_out.pk, stopped.pk, already_sent.pk, dead.pk, cancelled.pk]

    result = message_failed_requeue(messages=ids + [10**12], user=agent, note="number fixed")

    assert result.requeued == [failed.pk]
    assert result.refused == {
        opted_out.pk: "the recipient opted out",
        stopped.pk: "the recipient opted out",
        already_sent.pk: "already sent again",
        dead.pk: "dead: requeue its dead letter",
        cancelled.pk: "campaign cancelled",
        10**12: "no such message",
    }
    failed.refresh_from_db()
    assert (failed.status, failed.attempt, failed.wamid, failed.sent_at) == (
        "pending",
        0,
        None,
        None,
    )
    assert failed.error_history[-1]["outcome"] == REQUEUED_OUTCOME
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING  # running again for its requeued row
    statuses = dict(Message.objects.filter(pk__in=ids).values_list("id", "status"))
    assert statuses[stopped.pk] == "failed" and statuses[cancelled.pk] == "failed"
    [entry] = log_entries(Message, ids)
    assert entry.object_id == str(failed.pk) and "Note: number fixed" in entry.change_message
    summary = result.summary()
    assert summary.startswith("1 failed message(s) requeued")
    assert f"2 not requeued (the recipient opted out): #{opted_out.pk}, #{stopped.pk}" in summary

    # Once requeued it is no longer failed: a second agent's requeue is refused.
    again = message_failed_requeue(messages=[failed.pk], user=agent)
    assert again.refused == {failed.pk: "already being sent again"}


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_requeued_persistent_failure_spends_its_attempts_spaced_by_the_backoff(
    django_user_model: Any,
) -> None:
    agent = django_user_model.objects.create_user("sam", password="pw")
    max_attempts = 5
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        campaign = campaign_on(sim, number, recipients=1, max_attempts=1)
        sim.configure(mode="all_5xx")
        campaign_start(campaign=campaign)
        work_burst()
        maintenance_tick()
        [letter] = DeadLetter.objects.filter(campaign=campaign)
        campaign.__class__.objects.filter(pk=campaign.pk).update(max_attempts=max_attempts)
        due = timezone.now() + timedelta(seconds=2)

        dead_letter_requeue(dead_letters=[letter], user=agent, at=due)
        deadline = time.monotonic() + 120
        while Message.objects.filter(
            pk=letter.message_id, status__in=("pending", "sending")
        ).exists():
            assert time.monotonic() < deadline
            work_burst()
            maintenance_tick()
            time.sleep(0.2)

    message = Message.objects.get(pk=letter.message_id)
    assert message.status == "dead"
    history = message.error_history
    mark = max(i for i, a in enumerate(history) if a.get("outcome") == REQUEUED_OUTCOME)
    fresh = history[mark + 1 :]
    assert [a["attempt"] for a in fresh] == list(range(1, max_attempts + 1))
    times = [datetime.fromisoformat(a["at"]) for a in fresh]
    # Not before the chosen time, and each retry after the last: never all at once.
    assert times[0] >= due
    assert times == sorted(times) and len(set(times)) == len(times)
    # The engine's full-jitter backoff after attempt n waits up to BASE_S * 2^n seconds
    # (2 + 4 + 8 + 16 = 30 s at most over four retries): five attempts in under a second,
    # as before the fix, would take four near-zero draws in a row.
    ceilings = [BASE_S * 2**n for n in range(1, max_attempts)]
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    assert all(gap <= ceiling + 5 for gap, ceiling in zip(gaps, ceilings, strict=True)), gaps
    assert sum(gaps) > 1.0, gaps
    assert DeadLetter.objects.filter(message_id=message.pk, status="open").count() == 1
