"""The cart reminder, end to end with real processes: events through the API, a worker
SIGKILLed and Redis restarted during the wait, reminders through the engine to the
simulator, replies back through the webhook.

1,000 carts: 300 check out inside the hour, 100 update their cart twice more (their waits
start over, no second instance), so exactly the other 700 are reminded, once each, an hour
after their last cart event, inside their send window. Of the 700, 100 reply to the
reminder and 50 buy after it: the second reminder, 24 hours later, reaches the other 550.

The hour and the day are not waited for: every stored time is moved back (``travel``),
so the processes' real clocks read as if that much time had passed.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from django.db.models import Count
from django.test import override_settings
from django.utils import timezone

from campaigns.models import Contact
from campaigns.windows.daily import SendWindow
from delivery.api.keys import api_key_create
from delivery.models import ApiScope, Message, MessageStatus
from journeys.models import ExitKind, InstanceState, JourneyInstance
from tests.engine_support import number_on, running_simulator
from tests.faults.services import PrivateRedis, short_tmpdir
from tests.journeys.support import journey_live, sends, template_on, travel
from whatsblast.core.counters import writes_resume
from whatsblast.core.processes import ProcessGroup, service_environment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APP_SECRET = "journeys-cart-secret"  # noqa: S105
PEOPLE = 1000
ZONE = ZoneInfo("America/Sao_Paulo")


# Meta's components of the reminders: the person's name, and the cart's path as the
# button's URL suffix (the shape the template sync stores).
CART_TEMPLATE = [
    {"type": "BODY", "text": "Hi {{1}}, your cart is waiting", "example": {"body_text": [["Ana"]]}},
    {"type": "BUTTONS", "buttons": [
        {"type": "URL", "text": "Back to cart", "url": "https://shop.example/{{1}}",
         "example": ["https://shop.example/c/1"]},
    ]},
]  # fmt: skip


def cart_journey(window: str) -> dict[str, Any]:
    reminder = {"body": {"1": {"field": "name"}}, "buttons": {"0": {"property": "cart_path"}}}
    return {
        "entry": {"type": "event", "event": "cart_updated"},
        "key": "cart_id",
        "exits": [{"event": "checkout", "reason": "bought"}],
        "window": window,
        "time_zone": "America/Sao_Paulo",
        "steps": [
            {"id": "wait", "type": "wait", "delay": {"hours": 1}},
            {"id": "remind", "type": "send", "template": "cart_reminder", "mapping": reminder},
            {"id": "reply", "type": "wait", "for_reply": True, "timeout": {"hours": 24},
             "on_reply": "replied"},
            {"id": "again", "type": "send", "template": "cart_last_call", "mapping": reminder},
            {"id": "done", "type": "exit", "reason": "reminded twice"},
            {"id": "replied", "type": "exit", "reason": "replied"},
        ],
    }  # fmt: skip


@pytest.fixture
def redis_server(settings: Any) -> Iterator[PrivateRedis]:
    directory = short_tmpdir("wbj-")
    server = PrivateRedis(directory).start()
    settings.REDIS_URL = server.url
    # A new mapping, not the queues' own dicts changed in place: the settings fixture puts
    # the old one back after the test, and nothing later meets the stopped server.
    settings.RQ_QUEUES = {
        name: {**queue, "URL": server.url} for name, queue in settings.RQ_QUEUES.items()
    }
    yield server
    server.stop()
    writes_resume()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def processes(tmp_path: Any, redis_server: PrivateRedis) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "LOG_LEVEL": "WARNING",
        "CAMPAIGN_SLOT_RATE": "200",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def post_events(url: str, key: str, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), 500):
        response = requests.post(
            f"{url}/api/v1/events",
            json={"events": events[start : start + 500]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json()["rejected"] == 0, response.text


def wait_for(what: str, check: Any, group: ProcessGroup, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        group.check()
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def window_around_now() -> SendWindow:
    """A send window open from two hours ago to six hours on, in São Paulo."""
    now = timezone.now().astimezone(ZONE)
    start, end = now - timedelta(hours=2), now + timedelta(hours=6)
    return SendWindow(
        start.time().replace(second=0, microsecond=0), end.time().replace(second=0, microsecond=0)
    )


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_cart_reminders_reach_exactly_who_should_once_through_a_crash_and_a_redis_restart(
    processes: ProcessGroup, redis_server: PrivateRedis, live_server: Any
) -> None:
    people = [f"+55119{70000000 + i:08d}" for i in range(PEOPLE)]
    buyers, updaters = people[:300], people[300:400]
    reminded = people[300:]
    repliers, late_buyers = reminded[:100], reminded[100:150]
    with running_simulator(
        latency_ms=50,
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        read_fraction=0.0,
        reply_recipients={phone.lstrip("+"): "is it still in stock?" for phone in repliers},
        user_delay_ms=200,
    ) as sim:
        number = number_on(sim, rate=200, reserve=0.2)
        for name in ("cart_reminder", "cart_last_call"):
            template_on(number, name, sim=sim, components=CART_TEMPLATE)
        Contact.objects.bulk_create(Contact(phone=p, name=f"Ana {i}") for i, p in enumerate(people))
        window = window_around_now()
        journey = journey_live(number, cart_journey(str(window)), name="cart reminder")
        _, key = api_key_create(
            name="shop", all_numbers=True, scopes=[ApiScope.CAMPAIGNS], requests_per_second=1000
        )
        victim = processes.manage("victim", "rqworker", "transactional", "campaigns", "maintenance")
        processes.manage("ticker", "ticker", "--every", "1")

        def cart(phone: str, version: int) -> dict[str, Any]:
            return {
                "phone": phone,
                "name": "cart_updated",
                "id": f"{phone}-{version}",
                "properties": {"cart_id": f"cart-{phone[-6:]}", "cart_path": f"c/{phone[-6:]}"},
            }

        post_events(live_server.url, key, [cart(p, 1) for p in people])
        wait_for(
            "every cart to start an instance",
            lambda: JourneyInstance.objects.filter(journey=journey).count() == PEOPLE,
            processes,
        )
        # Inside the hour: 300 buy, 100 change their cart twice.
        post_events(
            live_server.url,
            key,
            [
                {"phone": p, "name": "checkout", "properties": {"cart_id": f"cart-{p[-6:]}"}}
                for p in buyers
            ]
            + [cart(p, 2) for p in updaters],
        )
        time.sleep(1.5)
        post_events(live_server.url, key, [cart(p, 3) for p in updaters])
        wait_for(
            "the checkouts to end 300 instances",
            lambda: (
                JourneyInstance.objects.filter(
                    journey=journey, exit_kind=ExitKind.EXIT_EVENT
                ).count()
                == 300
            ),
            processes,
        )
        wait_for(
            "the updates to be routed",
            lambda: not _unrouted(),
            processes,
        )
        # During the wait: a worker killed mid-work, Redis restarted (queues lost).
        processes.kill(victim, signal.SIGKILL)
        redis_server.stop()
        time.sleep(1)
        redis_server.start()
        processes.manage("survivor", "rqworker", "transactional", "campaigns", "maintenance")
        last_cart = dict(
            JourneyInstance.objects.filter(journey=journey).values_list(
                "contact__phone", "waiting_since"
            )
        )
        # An hour later (for all but the 100 whose waits restarted seconds later).
        travel(timedelta(hours=1))
        wait_for(
            "700 reminders sent",
            lambda: (
                Message.objects.filter(
                    journey_step="remind", status__in=("sent", "delivered", "read")
                ).count()
                == 700
            ),
            processes,
            timeout=120,
        )
        reminders = list(Message.objects.filter(journey_step="remind"))
        assert sorted(m.to for m in reminders) == sorted(reminded)
        assert JourneyInstance.objects.filter(journey=journey).count() == PEOPLE  # no second one
        for message in reminders:
            waited = message.created_at - (last_cart[message.to] - timedelta(hours=1))
            assert timedelta(hours=1) <= waited <= timedelta(hours=1, seconds=15), (
                message.to,
                waited,
            )
        for message in reminders:
            assert window.is_open(ZONE, message.sent_at), (message.to, message.sent_at)
        at_meta = sends(sim, number.phone_number_id)
        assert {to for to, template in at_meta if template == "cart_reminder"} == set(reminded)
        assert set(at_meta.values()) == {1}
        # The 100 repliers' waits end "replied"; 50 buy after the reminder.
        wait_for(
            "the replies to end 100 waits",
            lambda: (
                JourneyInstance.objects.filter(journey=journey, exit_reason="replied").count()
                == 100
            ),
            processes,
        )
        post_events(
            live_server.url,
            key,
            [
                {"phone": p, "name": "checkout", "properties": {"cart_id": f"cart-{p[-6:]}"}}
                for p in late_buyers
            ],
        )
        wait_for(
            "50 more checkouts",
            lambda: (
                JourneyInstance.objects.filter(
                    journey=journey, exit_kind=ExitKind.EXIT_EVENT
                ).count()
                == 350
            ),
            processes,
        )
        travel(timedelta(hours=24))
        second = set(reminded) - set(repliers) - set(late_buyers)
        wait_for(
            "550 second reminders",
            lambda: (
                Message.objects.filter(
                    journey_step="again", status__in=("sent", "delivered", "read")
                ).count()
                == len(second)
            ),
            processes,
            timeout=120,
        )
        assert (
            set(Message.objects.filter(journey_step="again").values_list("to", flat=True)) == second
        )
        wait_for(
            "every instance to leave",
            lambda: (
                not JourneyInstance.objects.filter(
                    journey=journey, state=InstanceState.ACTIVE
                ).exists()
            ),
            processes,
        )
        reasons = dict(
            JourneyInstance.objects.filter(journey=journey)
            .values_list("exit_reason")
            .annotate(n=Count("id"))
        )
        assert reasons == {
            "bought (event checkout)": 350,
            "replied": 100,
            "reminded twice": 550,
        }
        # Once each: one message per instance and step, and Meta got no repeat.
        per_step = Message.objects.values("journey_instance_id", "journey_step").annotate(
            n=Count("id")
        )
        assert all(row["n"] == 1 for row in per_step)
        at_meta = sends(sim, number.phone_number_id)
        assert set(at_meta.values()) == {1}
        assert sum(1 for _, t in at_meta if t == "cart_last_call") == len(second)
        assert not Message.objects.filter(
            status__in=(MessageStatus.FAILED, MessageStatus.DEAD)
        ).exists()


def _unrouted() -> bool:
    from journeys.models import ContactEvent

    return ContactEvent.objects.filter(routed_at__isnull=True).exists()
