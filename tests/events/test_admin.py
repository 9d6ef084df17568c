"""The admin's event subscriptions: an operator adds one (its secret shown once), pauses and
resumes it, and replays its dead letters to a real receiver; Support looks; Marketing is
refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from delivery.events.router import events_route
from delivery.events.subscriptions import subscription_create
from delivery.events.types import EVENT_TYPES
from delivery.models import Event, EventDeadLetter, EventOutbox, EventSubscription
from tests.events.receiver import Receiver
from tests.ui.support import role_user
from whatsblast.auth.roles import MARKETING, OPERATORS, SUPPORT

pytestmark = pytest.mark.django_db

LIST = "/admin/delivery/eventsubscription/"
ADD = "/admin/delivery/eventsubscription/add/"


def change_url(subscription: EventSubscription) -> str:
    return reverse("admin:delivery_eventsubscription_change", args=[subscription.pk])


def action_url(verb: str, subscription: EventSubscription) -> str:
    return reverse(f"admin:delivery_eventsubscription_{verb}", args=[subscription.pk])


def client_for(role: str) -> Client:
    client = Client()
    client.force_login(role_user(role))
    return client


@pytest.fixture
def operator() -> Client:
    return client_for(OPERATORS)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def dead_letters(subscription: EventSubscription, count: int) -> list[Event]:
    """``count`` events the receiver did not take in time, set aside as the deliverer does."""
    EventOutbox.objects.bulk_create(
        [
            EventOutbox(
                event_type="message.failed",
                message_id=500 + i,
                data={"message_id": 500 + i, "status": "failed"},
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
                subscription=subscription, event=e, attempts=9, last_error="HTTP 503: busy"
            )
            for e in events
        ]
    )
    return events


def test_an_operator_adds_one_and_sees_its_secret_once(operator: Client) -> None:
    form = operator.get(ADD).content.decode()
    assert "<code>reply.received</code> — A contact wrote to the number" in form
    assert form.count('type="checkbox" name="event_types"') == len(EVENT_TYPES)
    assert 'name="secret"' not in form  # made by the service, never typed in

    response = operator.post(
        ADD,
        {
            "name": "Order system",
            "url": "https://orders.example.com/hooks",
            "event_types": ["message.failed", "reply.received"],
        },
        follow=True,
    )

    subscription = EventSubscription.objects.get()
    secret = subscription.secret.reveal()
    page = response.content.decode()
    assert f'<code id="wb-event-secret">{secret}</code>' in page
    assert "copy it now; it is not shown again" in page
    assert subscription.event_types == ["message.failed", "reply.received"]
    assert subscription.api_key is None and subscription.active
    # Never again: the change page, the list, the history.
    for url in (
        change_url(subscription),
        LIST,
        reverse("admin:delivery_eventsubscription_history", args=[subscription.pk]),
    ):
        again = operator.get(url)
        assert again.status_code == 200
        assert secret not in again.content.decode(), url
    change = operator.get(change_url(subscription)).content.decode()
    assert "Set (shown once, when the subscription was created)." in change
    # Editing it keeps its secret.
    operator.post(
        change_url(subscription),
        {"name": "Orders", "url": "https://orders.example.com/v2", "event_types": []},
    )
    subscription.refresh_from_db()
    assert (subscription.name, subscription.event_types) == ("Orders", [])
    assert subscription.secret.reveal() == secret


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"url": "ftp://files.example.com/in"}, "An http:// or https:// URL with a host."),
        ({"url": "not a url"}, "Enter a valid URL."),
        ({"event_types": ["message.lost"]}, "Select a valid choice."),
        ({"name": ""}, "This field is required."),
    ],
)
def test_the_add_form_refuses_what_the_service_would(
    operator: Client, fields: dict[str, object], error: str
) -> None:
    data = {"name": "CRM", "url": "https://crm.example.com/h", "event_types": [], **fields}
    page = operator.post(ADD, data).content.decode()
    assert error in page
    assert not EventSubscription.objects.exists()


def test_the_list_shows_state_backlog_and_failures(operator: Client) -> None:
    healthy, _ = subscription_create(name="Warehouse", url="https://wh.example.com/h")
    failing, _ = subscription_create(
        name="Helpdesk", url="https://help.example.com/h", event_types=["reply.received"]
    )
    EventOutbox.objects.bulk_create(
        [EventOutbox(event_type="message.sent", data={"i": i}) for i in range(3)]
    )
    events_route()
    EventSubscription.objects.filter(pk=failing.pk).update(
        failing_since=timezone.now() - timedelta(minutes=20),
        last_error="ConnectionError: refused",
        active=False,
        paused_reason="Paused after failing for 1 h 0 min: ConnectionError: refused",
    )
    EventSubscription.objects.filter(pk=healthy.pk).update(delivered_total=12345)

    page = operator.get(LIST).content.decode()

    assert "Warehouse" in page and "https://wh.example.com/h" in page and "12,345" in page
    assert ">Paused after failing for 1 h 0 min<" in page
    assert "reply.received" in page and ">all<" in page
    assert ">3<" in page  # the warehouse's backlog: every type
    assert "≤ 3" in page  # the helpdesk's: an upper bound
    assert "ConnectionError: refused" in page
    change = operator.get(change_url(failing)).content.decode()
    assert "events waiting" in change.lower()
    assert 'id="resume-form"' in change and 'id="pause-form"' not in change


def test_pause_and_resume_from_its_page_and_from_the_list(operator: Client) -> None:
    subscription, _ = subscription_create(name="CRM", url="https://crm.example.com/h")

    page = operator.get(change_url(subscription)).content.decode()
    assert 'id="pause-form"' in page and 'id="resume-form"' not in page
    done = operator.post(
        action_url("pause", subscription), {"reason": "receiver migration"}, follow=True
    )
    subscription.refresh_from_db()
    assert (subscription.active, subscription.paused_reason) == (False, "receiver migration")
    assert "“CRM” is paused" in done.content.decode()
    assert 'id="resume-form"' in done.content.decode()

    done = operator.post(action_url("resume", subscription), follow=True)
    subscription.refresh_from_db()
    assert subscription.active and subscription.paused_reason == ""
    assert "resumed: deliveries carry on from where it stopped" in done.content.decode()

    ask = {"_selected_action": [subscription.pk], "index": 0}
    operator.post(LIST, {**ask, "action": "pause_subscriptions"})
    subscription.refresh_from_db()
    assert (subscription.active, subscription.paused_reason) == (False, "paused by otto")
    operator.post(LIST, {**ask, "action": "resume_subscriptions"})
    subscription.refresh_from_db()
    assert subscription.active


def test_replay_sends_the_dead_letters_to_the_receiver_and_marks_them(
    operator: Client, receiver: Receiver
) -> None:
    subscription, secret = subscription_create(name="CRM", url=receiver.url)
    events = dead_letters(subscription, 2)

    page = operator.get(change_url(subscription)).content.decode()
    assert 'id="replay-form"' in page and "2 waiting for a replay, 2 in all" in page
    assert page.count("<td><code>message.failed</code></td>") == 2 and "HTTP 503: busy" in page
    assert 'name="csrfmiddlewaretoken"' in page

    done = operator.post(action_url("replay", subscription), follow=True).content.decode()

    assert "Replayed 2 dead letter(s): the receiver took them." in done
    assert [e["id"] for e in receiver.events()] == [str(e.event_id) for e in events]
    assert receiver.all_signed(secret)
    assert not EventDeadLetter.objects.filter(replayed_at__isnull=True).exists()
    assert "0 waiting for a replay, 2 in all" in done and 'id="replay-form"' not in done
    # Nothing waiting: nothing sent.
    again = operator.post(action_url("replay", subscription), follow=True).content.decode()
    assert "No dead letters wait for a replay." in again
    assert len(receiver.received) == 1


def test_a_refused_replay_says_what_the_receiver_answered(
    operator: Client, receiver: Receiver
) -> None:
    subscription, _ = subscription_create(name="CRM", url=receiver.url)
    dead_letters(subscription, 3)
    receiver.mode = "error"

    done = operator.post(action_url("replay", subscription), follow=True).content.decode()

    assert "Replay failed: the receiver did not take the 3 dead letter(s)" in done
    assert "HTTP 500: receiver failing" in done
    assert EventDeadLetter.objects.filter(replayed_at__isnull=True).count() == 3


def test_a_replay_or_a_test_event_needs_a_post_with_the_csrf_token(receiver: Receiver) -> None:
    subscription, _ = subscription_create(name="CRM", url=receiver.url)
    dead_letters(subscription, 1)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(role_user(OPERATORS))

    for verb in ("replay", "ping"):
        assert strict.post(action_url(verb, subscription)).status_code == 403
        assert strict.get(action_url(verb, subscription)).status_code == 302
    assert not receiver.received


def test_support_looks_but_cannot_act() -> None:
    subscription, secret = subscription_create(name="CRM", url="https://crm.example.com/h")
    dead_letters(subscription, 1)
    support = client_for(SUPPORT)

    assert support.get(LIST).status_code == 200
    page = support.get(change_url(subscription)).content.decode()
    assert "1 waiting for a replay" in page and secret not in page
    assert 'id="replay-form"' not in page and 'id="pause-form"' not in page
    assert 'id="ping-form"' not in page
    assert "need the Operators role" in page
    assert support.get(ADD).status_code == 403
    for verb in ("pause", "resume", "replay", "ping"):
        assert support.post(action_url(verb, subscription)).status_code == 403
    subscription.refresh_from_db()
    assert subscription.active
    assert not EventDeadLetter.objects.filter(replayed_at__isnull=False).exists()


def test_marketing_is_refused_everything(receiver: Receiver) -> None:
    subscription, _ = subscription_create(name="CRM", url=receiver.url)
    dead_letters(subscription, 1)
    marketer = client_for(MARKETING)

    for url in (LIST, ADD, change_url(subscription)):
        assert marketer.get(url).status_code == 403, url
    assert marketer.post(ADD, {"name": "x", "url": "https://x.example.com/h"}).status_code == 403
    for verb in ("pause", "resume", "replay"):
        assert marketer.post(action_url(verb, subscription)).status_code == 403
    assert "Event subscriptions" not in marketer.get("/admin/").content.decode()
    subscription.refresh_from_db()
    assert subscription.active and EventSubscription.objects.count() == 1
    assert not receiver.received


def test_the_list_costs_a_fixed_number_of_queries_with_many_subscriptions(
    operator: Client, django_assert_max_num_queries: Any
) -> None:
    EventSubscription.objects.bulk_create(
        [
            EventSubscription(
                name=f"hook {i}",
                url=f"https://h{i}.example.com/h",
                secret=f"whsec_{i}",
                event_types=["message.sent"] if i % 2 else [],
            )
            for i in range(2000)
        ]
    )
    subscription = EventSubscription.objects.first()
    assert subscription is not None
    dead_letters(subscription, 3)
    operator.get(LIST)  # warm: content types, session

    for params in ({}, {"q": "hook 1"}, {"o": "5"}):
        with django_assert_max_num_queries(15):
            assert operator.get(LIST, params).status_code == 200


def test_the_types_journeys_send_out_can_be_subscribed_to(operator: Client) -> None:
    from tests.factories import make_phone_number
    from tests.journeys.support import journey_live

    journey_live(
        make_phone_number(),
        {
            "entry": {"type": "event", "event": "order_created"},
            "steps": [{"id": "tell", "type": "emit", "event": "order.cancel_requested"}],
        },
        name="cash on delivery",
    )
    form = operator.get(ADD).content.decode()
    assert "<code>order.cancel_requested</code> — sent out by the journey cash on delivery" in form
    response = operator.post(
        ADD,
        {
            "name": "Shop",
            "url": "https://shop.example/hooks",
            "event_types": ["order.cancel_requested"],
        },  # fmt: skip
    )
    assert response.status_code == 302
    assert EventSubscription.objects.get(name="Shop").event_types == ["order.cancel_requested"]
