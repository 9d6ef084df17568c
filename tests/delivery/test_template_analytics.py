"""Meta's template analytics read over real HTTP from the simulator, which counts what it
really sent, delivered and read, the quick-reply taps it posted (answering a send, as Meta's
inbound ``context``) and the Marketing Messages API link clicks it posted; the report's
cached copy; Meta's documented example response parsed
(tests/fixtures/real/graph/meta_doc_template_analytics.json).

The taps also land, signed, on the live webhook: the tap is stored answering its message and
counted for that message's campaign.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.utils import timezone

from campaigns.models import Campaign, PhoneNumber, Template
from delivery.engagement.buttons import ButtonTaps, campaign_button_taps
from delivery.graph_reads import (
    ANALYTICS_FAILURE_CACHE_SECONDS,
    TemplateAnalyticsError,
    TemplateButtonClicks,
    _analytics_day,
    campaign_template_analytics,
    template_analytics_read,
)
from delivery.simulator.server import SimulatorServer
from tests.engine_support import number_on, simulator_calling
from tests.factories import make_campaign, make_contact, make_message, make_template
from webhooks.applier import events_drain
from webhooks.models import InboundMessage
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db(transaction=True)

APP_SECRET = "analytics-secret"
FIXTURE = (
    Path(__file__).resolve().parent.parent / "fixtures/real/graph/meta_doc_template_analytics.json"
)


@pytest.fixture
def sim(live_server: Any, settings: Any) -> Any:
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    with simulator_calling(
        live_server, APP_SECRET, read_fraction=1.0, delivered_fraction=1.0
    ) as server:
        yield server


@pytest.fixture
def number(sim: SimulatorServer) -> PhoneNumber:
    return number_on(sim, rate=100, reserve=0.0, display_phone_number="15550783881")


def registered(sim: SimulatorServer, number: PhoneNumber, name: str) -> Template:
    sim.add_template(
        name=name,
        language="en_US",
        body_params=1,
        buttons=["quick_reply", "url"],
        waba_id=number.account.waba_id,
    )
    meta_id = sim.template_ids()[(name, "en_US")]
    return make_template(account=number.account, name=name, meta_template_id=meta_id)


def send(sim: SimulatorServer, number: PhoneNumber, template: Template, to: str) -> str:
    """One template send over HTTP, as the engine makes it; returns its wamid."""
    body = {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "template",
        "template": {
            "name": template.name,
            "language": {"code": template.language},
            "components": [
                {"type": "body", "parameters": [{"type": "text", "text": "Ana"}]},
                {
                    "type": "button",
                    "sub_type": "url",
                    "index": "1",
                    "parameters": [{"type": "text", "text": "x"}],
                },
            ],
        },
    }
    version = settings.WHATSAPP_API_VERSION
    response = requests.post(
        f"{sim.url}/{version}/{number.phone_number_id}/messages",
        json=body,
        headers={"Authorization": "Bearer sim-token"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["messages"][0]["id"])


def window() -> tuple[Any, Any]:
    now = timezone.now()
    return now - timedelta(days=1), now + timedelta(minutes=1)


def test_meta_counts_what_was_sent_delivered_read_tapped_and_clicked(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    offer = registered(sim, number, "offer")
    other = registered(sim, number, "other")
    wamids = [send(sim, number, offer, f"+551199990000{i}") for i in range(3)]
    send(sim, number, other, "+5511999900009")
    sim.event("button_reply", wamid=wamids[0], text="Yes")
    sim.event("button_reply", wamid=wamids[1], text="Yes")
    for _ in range(2):  # one person clicking twice: two clicks, one unique
        sim.event(
            "link_click", phone_number_id=number.phone_number_id, wamid=wamids[2], button="Shop"
        )
    assert sim.wait_webhooks_idle(timeout=30)

    start, end = window()
    days = template_analytics_read(number.account, [offer.meta_template_id], start, end)

    assert len(days) == 1
    day = days[0]
    assert (day.template_id, day.day) == (offer.meta_template_id, timezone.now().date())
    assert (day.sent, day.delivered, day.read) == (3, 3, 3)
    assert set(day.clicked) == {
        TemplateButtonClicks("quick_reply_button", "Yes", 2),
        TemplateButtonClicks("url_button", "Shop", 2),
        TemplateButtonClicks("unique_url_button", "Shop", 1),
    }
    assert day.clicks == 4  # the unique entry counts the same clicks again
    assert day.cost == Decimal("0")  # the simulator prices nothing unless told
    # Both templates in one read; the other was sent once and nobody tapped it.
    both = template_analytics_read(
        number.account, [offer.meta_template_id, other.meta_template_id], start, end
    )
    by_id = {d.template_id: d for d in both}
    assert (by_id[other.meta_template_id].sent, by_id[other.meta_template_id].clicked) == (1, ())


def test_more_than_ten_templates_are_read_ten_at_a_time(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    offer = registered(sim, number, "offer")
    send(sim, number, offer, "+5511999900001")
    assert sim.wait_webhooks_idle(timeout=30)
    start, end = window()
    # Meta refuses more than 10 ids (the simulator too): 11 unknown ones, then ours.
    ids = [str(900 + i) for i in range(11)] + [offer.meta_template_id]
    days = template_analytics_read(number.account, ids, start, end)
    assert [(d.template_id, d.sent) for d in days] == [(offer.meta_template_id, 1)]
    too_many = requests.get(
        f"{sim.url}/{settings.WHATSAPP_API_VERSION}/{number.account.waba_id}/template_analytics",
        params={
            "start": "0",
            "end": "1",
            "granularity": "DAILY",
            "template_ids": json.dumps(ids),
        },
        headers={"Authorization": "Bearer sim-token"},
        timeout=10,
    )
    assert too_many.status_code == 400
    assert too_many.json()["error"]["code"] == 100


def test_a_refused_token_is_an_error_that_says_so(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    PhoneNumber.objects.filter(pk=number.pk).update(access_token="wrong-token")
    start, end = window()
    with pytest.raises(TemplateAnalyticsError, match="190"):
        template_analytics_read(number.account, ["1"], start, end)


def test_the_report_reads_the_campaign_templates_once_and_caches_them(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    offer = registered(sim, number, "offer")
    campaign = make_campaign(
        phone_number=number, template=offer, started_at=timezone.now() - timedelta(hours=1)
    )
    get_redis().delete(f"wb:template-analytics:{campaign.pk}")
    ana = make_contact(phone="+5511999900001")
    wamid = send(sim, number, offer, ana.phone or "")
    # The send as the engine records it, so the tap webhook can name its campaign.
    make_message(campaign=campaign, to=ana.phone, contact=ana, wamid=wamid, status="sent")
    sim.event("button_reply", wamid=wamid, text="Tell me more")
    assert sim.wait_webhooks_idle(timeout=30)
    events_drain(budget_seconds=30)

    first = campaign_template_analytics(campaign)
    assert first.error == ""
    assert first.templates == {offer.meta_template_id: "offer (en_US)"}
    assert [(d.day, d.sent, d.clicks) for d in first.days] == [(timezone.now().date(), 1, 1)]
    # Cached: the simulator forgetting everything changes nothing for a few minutes.
    sim.reset()
    again = campaign_template_analytics(campaign)
    assert again == first
    # The tap arrived on the webhook, answering the campaign's message.
    tap = InboundMessage.objects.get(type="button")
    assert (tap.context_wamid, tap.campaign_id, tap.contact_id) == (wamid, campaign.pk, ana.pk)
    assert campaign_button_taps(campaign.pk) == [ButtonTaps("Tell me more", "Tell me more", 1, 1)]


def test_a_failed_read_is_remembered_for_a_minute_not_asked_again_on_every_view(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    offer = registered(sim, number, "offer")
    campaign = make_campaign(
        phone_number=number, template=offer, started_at=timezone.now() - timedelta(hours=1)
    )
    get_redis().delete(f"wb:template-analytics:{campaign.pk}")
    PhoneNumber.objects.filter(pk=number.pk).update(access_token="wrong-token")
    campaign.refresh_from_db()
    first = campaign_template_analytics(campaign)
    assert "190" in first.error
    asked = sim.stats()["requests"]
    assert campaign_template_analytics(campaign) == first
    assert sim.stats()["requests"] == asked  # answered from the cache, no Graph call
    ttl = get_redis().ttl(f"wb:template-analytics:{campaign.pk}")
    assert 0 < ttl <= ANALYTICS_FAILURE_CACHE_SECONDS


def test_a_campaign_not_started_or_without_meta_ids_reads_nothing(
    sim: SimulatorServer, number: PhoneNumber
) -> None:
    template = make_template(account=number.account, name="local_only")
    draft: Campaign = make_campaign(phone_number=number, template=template)
    assert campaign_template_analytics(draft).error == "not started"
    Campaign.objects.filter(pk=draft.pk).update(started_at=timezone.now())
    draft.refresh_from_db()
    assert campaign_template_analytics(draft).error == "no template has Meta's id yet"
    assert sim.stats()["requests"] == 0


def test_meta_documented_example_parses() -> None:
    points = json.loads(FIXTURE.read_text())["data"][0]["data_points"]
    first, second = (_analytics_day(p) for p in points)
    assert (first.template_id, first.day, first.sent, first.clicked) == (
        "1421988012088524",
        date(2024, 6, 11),
        1,
        (),
    )
    assert first.cost == Decimal("0.01")
    assert second.clicked == (
        TemplateButtonClicks("quick_reply_button", "Contact Support", 108),
        TemplateButtonClicks("unique_url_button", "Tell me more", 16),
    )
    assert (second.clicks, second.cost) == (108, Decimal("0.03"))
