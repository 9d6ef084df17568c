"""Recording outcomes: retries, dead letters, opt-outs, and never overwriting evidence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.models import Contact
from delivery.campaigns.launch import campaign_start
from delivery.cloud.client import Accepted, ApiError
from delivery.cloud.outcomes import classify
from delivery.engine.settle import Effects, RetryPolicy, settle
from delivery.messages import claim_campaign_batch, settlements_record
from delivery.models import DeadLetter, Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db(transaction=True)


def one_claimed(**campaign_fields):
    contact_list = make_contact_list()
    make_contact(phone="+393331234567", name="Lia", contact_list=contact_list)
    campaign = make_campaign(lists=[contact_list], **campaign_fields)
    campaign_start(campaign=campaign)
    [claimed] = claim_campaign_batch(campaign_id=campaign.pk, limit=1)
    return campaign, claimed


def error(code: int, http: int = 400, reached: bool = True) -> ApiError:
    return ApiError(http, code, None, f"title {code}", f"details {code}", None, reached, 0.1)


def record(claimed, result, policy=None):
    policy = policy or RetryPolicy(max_attempts=3)
    effects = Effects()
    settlement = settle(
        message=claimed,
        result=result,
        outcome=classify(result),
        policy=policy,
        now=timezone.now(),
        effects=effects,
    )
    settlements_record(
        [settlement] if settlement else [], opted_out_contact_ids=effects.opted_out_contact_ids
    )
    return effects, settlement


def test_success_records_wamid_and_sent_time() -> None:
    _, claimed = one_claimed()
    record(claimed, Accepted("wamid.A1", "393331234567", "accepted", 0.2))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.SENT
    assert message.wamid == "wamid.A1" and message.sent_at is not None
    assert message.attempt == 1


def test_success_never_moves_a_message_back() -> None:
    """The delivered webhook beat the send response: keep delivered, still store the wamid."""
    _, claimed = one_claimed()
    Message.objects.filter(pk=claimed.id).update(status=MessageStatus.DELIVERED)
    record(claimed, Accepted("wamid.B2", "393331234567", None, 0.2))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.DELIVERED
    assert message.wamid == "wamid.B2"


def test_transient_errors_back_off_then_dead_letter() -> None:
    campaign, claimed = one_claimed(max_attempts=2)
    record(claimed, error(131000, 500), RetryPolicy(max_attempts=2))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.PENDING
    assert message.attempt == 1
    assert message.next_attempt_at <= timezone.now() + timedelta(seconds=2.1)
    Message.objects.filter(pk=claimed.id).update(next_attempt_at=timezone.now())
    [again] = claim_campaign_batch(campaign_id=campaign.pk, limit=1)
    record(again, error(131000, 500), RetryPolicy(max_attempts=2))
    message.refresh_from_db()
    assert message.status == MessageStatus.DEAD
    dead = DeadLetter.objects.get(message=message)
    assert dead.error_code == 131000
    assert [a["code"] for a in dead.attempts] == [131000, 131000]
    assert dead.payload["to"] == "+393331234567"


def test_pair_limit_reschedules_with_4_to_the_x() -> None:
    _, claimed = one_claimed()
    before = timezone.now()
    record(claimed, error(131056))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.PENDING
    assert message.pair_limit_hits == 1
    assert message.attempt == 0  # not the message's fault
    assert (
        before + timedelta(seconds=0.9) <= message.next_attempt_at <= before + timedelta(seconds=2)
    )


def test_per_user_marketing_cap_waits_a_day() -> None:
    _, claimed = one_claimed()
    record(claimed, error(131049))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.PENDING
    assert message.next_attempt_at >= timezone.now() + timedelta(hours=23, minutes=59)


def test_marketing_opt_out_fails_and_marks_the_contact() -> None:
    _, claimed = one_claimed()
    record(claimed, error(131050))
    assert Message.objects.get(pk=claimed.id).status == MessageStatus.FAILED
    assert Contact.objects.get(pk=claimed.contact_id).opted_out_at is not None


def test_permanent_error_fails_with_code_and_title() -> None:
    _, claimed = one_claimed()
    record(claimed, error(131026))
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.FAILED
    assert (message.last_error_code, message.last_error_title) == (131026, "title 131026")
    assert message.failed_at is not None


def test_ambiguous_timeout_becomes_unknown_not_resent() -> None:
    _, claimed = one_claimed()
    timeout = ApiError(None, None, None, "read timeout", "", None, True, 10.0)
    record(claimed, timeout)
    message = Message.objects.get(pk=claimed.id)
    assert message.status == MessageStatus.UNKNOWN
    assert message.claimed_at is not None


def test_campaign_broken_releases_the_row_untouched() -> None:
    _, claimed = one_claimed()
    effects, settlement = record(claimed, error(190, 401))
    assert settlement is None
    assert effects.campaign_broken_reason and "190" in effects.campaign_broken_reason
    assert effects.released_ids == [claimed.id]
