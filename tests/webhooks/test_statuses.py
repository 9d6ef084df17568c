"""Status callbacks applied to messages: every kind, any order, duplicates, the race."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from delivery.models import Message
from tests.webhooks.support import (
    apply,
    fixture_json,
    make_message,
    retarget,
    statuses_of,
    store,
    store_and_apply,
)
from webhooks.models import UnmatchedStatus, WebhookEvent, WebhookEventStatus

pytestmark = pytest.mark.django_db

WAMID = "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA="
FAILED_WAMID = "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA"


def at(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def for_message(name: str, message: Message, **kwargs: Any) -> dict[str, Any]:
    """A recorded payload whose callback data points at ``message``."""
    return retarget(fixture_json(name), callbacks={"wb:9001": message.callback_data}, **kwargs)


def test_sent_records_time_conversation_and_pricing() -> None:
    message = make_message(status="sending", wamid=WAMID)
    report = store_and_apply(for_message("status_sent", message))
    message.refresh_from_db()
    assert report.messages_updated == 1
    assert message.status == "sent"
    assert message.sent_at == at(1750030073)
    assert message.conversation_id == "72b14d6bd5407799e66f64d1b338e567"
    assert message.pricing_category == "marketing"
    assert message.billable is True


def test_delivered_then_read_move_forward_with_their_times() -> None:
    message = make_message(status="sent", wamid=WAMID)
    store_and_apply(for_message("status_delivered", message))
    message.refresh_from_db()
    assert (message.status, message.delivered_at) == ("delivered", at(1750030080))
    store_and_apply(for_message("status_read", message))
    message.refresh_from_db()
    assert (message.status, message.read_at) == ("read", at(1750030150))
    assert message.delivered_at == at(1750030080)


def test_read_before_delivered_keeps_read_and_fills_the_delivered_time() -> None:
    message = make_message(status="sent", wamid=WAMID)
    store_and_apply(for_message("status_read", message))
    message.refresh_from_db()
    assert message.status == "read"
    # A read implies delivered: its time stands in until the delivered callback says more.
    assert message.delivered_at == at(1750030150)
    store_and_apply(for_message("status_delivered", message))
    message.refresh_from_db()
    assert message.status == "read"
    assert message.read_at == at(1750030150)
    # The late delivered still brings its pricing, which the read callback lacked.
    assert message.pricing_category == "marketing"


def test_delivered_before_sent_never_moves_back_to_sent() -> None:
    message = make_message(status="sending", wamid=WAMID)
    store_and_apply(for_message("status_delivered", message))
    store_and_apply(for_message("status_sent", message))
    message.refresh_from_db()
    assert message.status == "delivered"
    # The delivered time stood in for sent; the late sent does not overwrite it.
    assert message.sent_at == at(1750030080)
    assert message.conversation_id == "72b14d6bd5407799e66f64d1b338e567"


def test_failed_persists_the_error_code_title_and_details() -> None:
    message = make_message(status="sent", wamid=FAILED_WAMID, attempt=1)
    store_and_apply(fixture_json("status_failed"))
    message.refresh_from_db()
    assert message.status == "failed"
    assert message.failed_at == at(1751142888)
    assert message.last_error_code == 131049
    assert message.last_error_title.startswith("This message was not delivered")
    assert message.last_error_details.startswith("In order to maintain a healthy")
    assert message.error_history[-1]["code"] == 131049
    assert message.error_history[-1]["attempt"] == 1


def test_a_failed_after_delivered_changes_nothing() -> None:
    message = make_message(status="delivered", wamid=FAILED_WAMID, delivered_at=timezone.now())
    store_and_apply(fixture_json("status_failed"))
    message.refresh_from_db()
    assert message.status == "delivered"
    assert message.last_error_code is None
    assert message.error_history == []


@pytest.mark.parametrize("name", ["status_played", "status_unknown"])
def test_played_and_unknown_statuses_are_counted_and_change_nothing(name: str) -> None:
    message = make_message(status="delivered", wamid=WAMID)
    report = store_and_apply(fixture_json(name))
    message.refresh_from_db()
    assert message.status == "delivered"
    assert report.events == 1 and report.statuses == 1
    status = statuses_of(fixture_json(name))[0]["status"]
    event = WebhookEvent.objects.get()
    assert event.status == WebhookEventStatus.PROCESSED
    assert event.summary == {f"statuses.{status}": 1}


@pytest.mark.parametrize("before", ["sending", "unknown", "pending"])
def test_any_evidence_settles_a_message_in_doubt(before: str) -> None:
    message = make_message(status=before, wamid=None)
    store_and_apply(for_message("status_sent", message))
    message.refresh_from_db()
    assert message.status == "sent"
    assert message.wamid == WAMID


@pytest.mark.parametrize("final", ["dead", "skipped"])
def test_final_states_are_never_moved_by_a_callback(final: str) -> None:
    message = make_message(status=final, wamid=WAMID)
    store_and_apply(for_message("status_read", message))
    message.refresh_from_db()
    assert message.status == final
    assert message.read_at is None


def test_a_cancelled_message_that_reached_meta_after_all_takes_meta_s_word() -> None:
    """Cancelled after an ambiguous attempt (no wamid known): Meta's callback, matched by
    our callback data, says it went out, and that is what the row must show."""
    message = make_message(status="cancelled", wamid=None)
    store_and_apply(for_message("status_delivered", message))
    message.refresh_from_db()
    assert message.status == "delivered"
    assert message.wamid == WAMID and message.delivered_at is not None


def test_duplicated_callbacks_in_one_post_and_across_posts_apply_once() -> None:
    message = make_message(status="sent", wamid=FAILED_WAMID, attempt=2)
    payload = fixture_json("status_failed")
    value = payload["entry"][0]["changes"][0]["value"]
    value["statuses"] = value["statuses"] * 3
    store_and_apply(payload)
    # Meta re-batches: the same status inside another body is a new event, same effect.
    payload["entry"][0]["time"] = 1751142999
    store_and_apply(payload)
    message.refresh_from_db()
    assert message.status == "failed"
    assert len(message.error_history) == 1


def test_re_applying_a_processed_event_changes_nothing() -> None:
    message = make_message(status="sending", wamid=WAMID)
    store_and_apply(for_message("status_sent", message))
    store_and_apply(for_message("status_read", message))
    before = Message.objects.values().get(pk=message.pk)
    WebhookEvent.objects.update(status=WebhookEventStatus.PENDING)
    report = apply()
    assert report.events == 2
    assert report.messages_updated == 0
    assert Message.objects.values().get(pk=message.pk) == before


def test_several_entries_and_changes_in_one_post_are_all_applied() -> None:
    a = make_message(status="sending")
    b = make_message(status="sent", wamid="wamid.BATCH-B")
    c = make_message(status="sending")
    d = make_message(status="sent", wamid="wamid.BATCH-D")
    payload = retarget(
        fixture_json("batch_multi"),
        callbacks={"wb:9101": a.callback_data, "wb:9103": c.callback_data},
    )
    report = store_and_apply(payload)
    for m in (a, b, c, d):
        m.refresh_from_db()
    assert (a.status, a.wamid, a.read_at) == ("read", "wamid.BATCH-A", at(1750030090))
    assert (b.status, b.sent_at, b.pricing_category) == ("delivered", at(1750030079), "marketing")
    assert (c.status, c.wamid) == ("sent", "wamid.BATCH-C")
    assert (d.status, d.last_error_code) == ("failed", 131026)
    assert report.statuses == 6
    assert report.messages_updated == 4
    assert report.inbound == 1
    event = WebhookEvent.objects.get()
    assert event.summary["ignored.account_alerts"] == 1
    assert event.summary["statuses.sent"] == 3


def test_unknown_fields_are_ignored() -> None:
    message = make_message(status="sent", wamid=WAMID)
    payload = fixture_json("status_read")
    payload["brand_new_top_level"] = {"x": 1}
    payload["entry"][0]["brand_new"] = True
    statuses_of(payload)[0]["brand_new_field"] = [1, {"deep": None}]
    store_and_apply(payload)
    message.refresh_from_db()
    assert message.status == "read"


def test_a_status_before_its_wamid_is_recorded_matches_by_callback_data() -> None:
    # The webhook beat the sending worker: the row has no wamid yet.
    message = make_message(status="sending", wamid=None)
    store_and_apply(for_message("status_delivered", message))
    message.refresh_from_db()
    assert (message.status, message.wamid) == ("delivered", WAMID)
    assert not UnmatchedStatus.objects.exists()


def test_callback_data_wins_over_the_wamid() -> None:
    ours = make_message(status="sent", wamid=None)
    other = make_message(status="sent", wamid=WAMID)  # holds the wamid the callback carries
    store_and_apply(for_message("status_delivered", ours))
    ours.refresh_from_db()
    other.refresh_from_db()
    assert ours.status == "delivered"
    assert ours.wamid is None  # the wamid stays with the row that has it (unique)
    assert other.status == "sent"


def test_an_unmatched_status_is_kept_and_applied_when_its_message_appears() -> None:
    payload = retarget(fixture_json("status_read"), wamids={WAMID: "wamid.LATE"})
    report = store_and_apply(payload)
    assert report.unmatched_new == 1
    waiting = UnmatchedStatus.objects.get()
    assert (waiting.wamid, waiting.status, waiting.reported_at) == ("wamid.LATE", "read", None)
    # The worker records the wamid; the next applier run (once the retry is due) matches it.
    message = make_message(status="sent", wamid="wamid.LATE")
    UnmatchedStatus.objects.update(next_try_at=timezone.now())
    report = apply()
    message.refresh_from_db()
    assert message.status == "read"
    assert report.unmatched_matched == 1
    assert not UnmatchedStatus.objects.exists()


def test_an_unmatched_status_is_retried_then_reported_never_dropped(
    settings: Any, caplog: Any
) -> None:
    settings.WEBHOOK_UNMATCHED_RETRY_SECONDS = 60
    store_and_apply(retarget(fixture_json("status_sent"), callbacks={"wb:9001": "wb:999999999"}))
    row = UnmatchedStatus.objects.get()
    assert row.callback_data == "wb:999999999"
    # Still inside the window: retried, backed off.
    UnmatchedStatus.objects.update(next_try_at=timezone.now())
    report = apply()
    row.refresh_from_db()
    assert (report.unmatched_retried, row.attempts, row.reported_at) == (1, 1, None)
    assert row.next_try_at > timezone.now()
    # Past the window: reported, logged, and kept for support.
    UnmatchedStatus.objects.update(
        first_seen_at=timezone.now() - timedelta(seconds=61), next_try_at=timezone.now()
    )
    report = apply()
    row.refresh_from_db()
    assert report.unmatched_reported == 1
    assert row.reported_at is not None
    assert any("matched no message" in r.getMessage() for r in caplog.records)
    # A reported row is not retried again.
    UnmatchedStatus.objects.update(next_try_at=timezone.now())
    assert apply().unmatched_retried == 0


def test_a_redelivered_unmatched_status_is_kept_once() -> None:
    payload = retarget(fixture_json("status_read"), wamids={WAMID: "wamid.NOBODY"})
    store_and_apply(payload)
    payload["entry"][0]["time"] = 1  # another body, same status
    assert store_and_apply(payload).unmatched_new == 0
    assert UnmatchedStatus.objects.count() == 1


def test_a_status_without_a_timestamp_takes_its_event_time() -> None:
    message = make_message(status="sent", wamid=WAMID)
    payload = fixture_json("status_read")
    statuses_of(payload)[0]["timestamp"] = "yesterday"
    store(payload)
    apply()
    message.refresh_from_db()
    assert message.status == "read"
    assert message.read_at == WebhookEvent.objects.get().received_at


def test_one_wamid_claimed_by_two_messages_is_not_recorded_but_both_statuses_apply() -> None:
    a = make_message(status="sending", wamid=None)
    b = make_message(status="sending", wamid=None)
    payload = fixture_json("status_sent")
    value = payload["entry"][0]["changes"][0]["value"]
    first = value["statuses"][0]
    value["statuses"] = [
        dict(first, biz_opaque_callback_data=a.callback_data),
        dict(first, biz_opaque_callback_data=b.callback_data),
    ]
    report = store_and_apply(payload)
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.status, a.wamid, b.status, b.wamid) == ("sent", None, "sent", None)
    assert report.failed == 0


@pytest.mark.parametrize(
    "name", ["status_sent", "status_delivered", "status_read", "status_failed", "status_played"]
)
def test_a_single_status_reduces_as_the_same_status_received_twice(name: str) -> None:
    from webhooks.payloads import body_parse
    from webhooks.statuses import statuses_reduce

    (status, *_) = body_parse(fixture_json(name)).statuses
    single = statuses_reduce([(1, status)])  # the one-status fast path
    twice = statuses_reduce([(1, status), (1, status)])  # the general reduction
    assert single == twice
