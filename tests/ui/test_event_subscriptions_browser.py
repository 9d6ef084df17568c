"""An operator adds an event subscription in a real browser, copies its secret (shown once),
finds it in the list, and replays its dead letters to a live receiver.

Headless system Chromium against the live server (the fixtures of tests/ui/browser); the
screenshot is docs/screenshots/event-subscriptions.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from delivery.events.router import events_route
from delivery.models import Event, EventDeadLetter, EventOutbox, EventSubscription
from tests.events.receiver import Receiver
from tests.ui.browser.conftest import (  # noqa: F401 - fixtures used by name
    browser,
    log_in,
    screenshot,
    wide,
)
from tests.ui.support import role_user
from whatsblast.auth.roles import OPERATORS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.browser]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def set_aside(subscription: EventSubscription, count: int) -> list[Event]:
    """``count`` events its receiver did not take within a day: dead letters."""
    EventOutbox.objects.bulk_create(
        [
            EventOutbox(
                event_type="reply.received" if i % 2 else "message.failed",
                message_id=700 + i,
                data={"message_id": 700 + i},
                occurred_at=timezone.now() - timedelta(days=1, minutes=count - i),
            )
            for i in range(count)
        ]
    )
    events_route()
    events = list(Event.objects.order_by("-seq")[:count])[::-1]
    # The deliverer moves the cursor past what it sets aside.
    EventSubscription.objects.filter(pk=subscription.pk).update(cursor=events[-1].seq)
    EventDeadLetter.objects.bulk_create(
        [
            EventDeadLetter(
                subscription=subscription,
                event=event,
                attempts=12,
                last_error="ConnectionError: connection refused",
            )
            for event in events
        ]
    )
    return events


def test_an_operator_subscribes_copies_the_secret_once_and_replays_dead_letters(
    wide: Any,  # noqa: F811 - the fixture imported above
    live_server: Any,
    receiver: Receiver,
    settings: Any,
) -> None:
    role_user(OPERATORS)
    base = live_server.url
    log_in(wide, base, "otto")

    wide.goto(f"{base}/admin/")
    wide.click("text=Event subscriptions")
    wide.click(".object-tools a.addlink")
    # As production runs: a receiver inside the network is refused, with the reason.
    settings.EVENTS_ALLOW_PRIVATE_URLS = False
    wide.fill("#id_name", "Metadata probe")
    wide.fill("#id_url", "http://169.254.169.254/latest/meta-data/")
    wide.click("input[name=_save]")
    assert "Events go to public addresses only: 169.254.169.254 is not a public address" in (
        wide.inner_text(".field-url")
    )
    assert not EventSubscription.objects.exists()
    settings.EVENTS_ALLOW_PRIVATE_URLS = True  # the test's receiver is on this machine
    wide.fill("#id_name", "Order system")
    wide.fill("#id_url", receiver.url)
    wide.check("input[name=event_types][value='message.failed']")
    wide.check("input[name=event_types][value='reply.received']")
    assert "A contact wrote to the number" in wide.inner_text("#id_event_types")
    wide.click("input[name=_save]")

    shown = wide.inner_text("#wb-event-secret")
    subscription = EventSubscription.objects.get()
    assert shown == subscription.secret.reveal() and shown.startswith("whsec_")
    assert "it is not shown again" in wide.inner_text(".messagelist")
    row = wide.inner_text("#result_list tbody tr")
    assert "Order system" in row and receiver.url in row
    assert "message.failed, reply.received" in row and "Active" in row
    wide.reload()
    assert wide.locator("#wb-event-secret").count() == 0
    assert shown not in wide.content()

    events = set_aside(subscription, 3)
    wide.click("text=Order system")
    assert "3 waiting for a replay, 3 in all" in wide.inner_text("#dead-letters-summary")
    assert wide.locator("#dead-letters tbody tr").count() == 3
    assert shown not in wide.content()
    wide.click("#replay-form input[type=submit]")

    assert "Replayed 3 dead letter(s): the receiver took them." in wide.inner_text(".messagelist")
    assert "0 waiting for a replay, 3 in all" in wide.inner_text("#dead-letters-summary")
    assert wide.locator("#replay-form").count() == 0
    assert [e["id"] for e in receiver.events()] == [str(e.event_id) for e in events]
    assert receiver.all_signed(shown)

    # A test event, to check the receiver: signed, sent at once, deliveries untouched.
    cursor = EventSubscription.objects.get().cursor
    receiver.mode = "error"
    wide.click("#ping-form input[type=submit]")
    assert "did not take the test event: HTTP 500" in wide.inner_text(".messagelist .error")
    receiver.mode = "ok"
    wide.click("#ping-form input[type=submit]")
    assert "the receiver took it (2xx)" in wide.inner_text(".messagelist .success")
    assert receiver.events()[-1]["type"] == "ping" and receiver.all_signed(shown)
    assert EventSubscription.objects.get().cursor == cursor
    screenshot(wide, "event-subscriptions.png", full_page=True)
