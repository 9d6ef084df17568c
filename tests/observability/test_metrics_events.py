"""The event subscriptions' gauges: paused subscriptions, each one's backlog, and how long
the oldest event has waited (for an active subscription, or in the outbox)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from delivery.events.router import events_route
from delivery.events.subscriptions import subscription_create, subscription_pause
from delivery.models import Event, EventOutbox, EventSubscription
from tests.observability.support import scrape

pytestmark = pytest.mark.django_db


def emit(event_type: str, n: int, *, minutes_ago: float) -> None:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    EventOutbox.objects.bulk_create(
        [EventOutbox(event_type=event_type, data={"i": i}, occurred_at=at) for i in range(n)]
    )


def newest() -> int:
    return int(Event.objects.order_by("-seq").values_list("seq", flat=True)[0])


def test_without_subscriptions_nothing_waits() -> None:
    metrics = scrape()

    assert metrics.value("whatsblast_collector_up", source="events") == 1
    assert metrics.value("whatsblast_event_subscriptions_paused") == 0
    assert metrics.value("whatsblast_events_oldest_waiting_seconds") == 0
    assert not metrics.matching("whatsblast_events_backlog")


def test_backlog_and_oldest_waiting_follow_each_subscriptions_cursor_and_types() -> None:
    everything, _ = subscription_create(name="warehouse", url="http://127.0.0.1:1/h")
    replies, _ = subscription_create(
        name="helpdesk", url="http://127.0.0.1:1/h", event_types=["reply.received"]
    )
    twin, _ = subscription_create(name="warehouse", url="http://127.0.0.1:2/h")
    emit("message.sent", 5, minutes_ago=20)
    emit("reply.received", 2, minutes_ago=3)
    events_route()
    # The twin took everything already: nothing waits for it.
    EventSubscription.objects.filter(pk=twin.pk).update(cursor=newest())

    metrics = scrape()

    backlog = "whatsblast_events_backlog"
    assert metrics.value(backlog, subscription="warehouse", subscription_id=str(everything.pk)) == 7
    assert metrics.value(backlog, subscription="helpdesk", subscription_id=str(replies.pk)) == 2
    assert metrics.value(backlog, subscription="warehouse", subscription_id=str(twin.pk)) == 0
    oldest = metrics.value("whatsblast_events_oldest_waiting_seconds")
    assert 20 * 60 - 5 < oldest < 20 * 60 + 60  # the warehouse's first message.sent
    assert metrics.value("whatsblast_event_subscriptions_paused") == 0


def test_a_paused_subscription_is_counted_and_its_wait_left_to_the_paused_alert() -> None:
    paused, _ = subscription_create(name="erp", url="http://127.0.0.1:1/h")
    keeping_up, _ = subscription_create(name="crm", url="http://127.0.0.1:1/h")
    emit("message.failed", 3, minutes_ago=30)
    events_route()
    EventSubscription.objects.filter(pk=keeping_up.pk).update(cursor=newest())
    subscription_pause(subscription=paused, reason="Paused after failing for 1 h 0 min")

    metrics = scrape()

    assert metrics.value("whatsblast_event_subscriptions_paused") == 1
    assert metrics.value("whatsblast_events_backlog", subscription="erp", **_id(paused)) == 3
    assert metrics.value("whatsblast_events_oldest_waiting_seconds") == 0


def test_events_not_routed_yet_wait_for_everyone() -> None:
    subscription_create(name="crm", url="http://127.0.0.1:1/h")
    emit("campaign.started", 1, minutes_ago=16)  # in the outbox: no events worker ran

    oldest = scrape().value("whatsblast_events_oldest_waiting_seconds")

    assert 16 * 60 - 5 < oldest < 16 * 60 + 60


def test_a_failing_events_query_costs_only_its_own_gauges(monkeypatch: Any) -> None:
    from whatsblast.observability import collector

    def broken() -> None:
        raise RuntimeError("statement timeout")

    monkeypatch.setattr(collector, "events_snapshot", broken)
    metrics = scrape()

    assert metrics.value("whatsblast_collector_up", source="events") == 0
    assert metrics.value("whatsblast_collector_up", source="postgres") == 1
    assert "whatsblast_events_oldest_waiting_seconds" not in metrics.names
    assert "whatsblast_messages_pending" in metrics.names


def _id(subscription: EventSubscription) -> dict[str, str]:
    return {"subscription_id": str(subscription.pk)}
