"""Must show: opt-outs of every kind, through the simulator over real HTTP, hold for the next
campaign to the same list.

The simulator sends the campaign's status callbacks (naming each recipient's
business-scoped user id in value.contacts[], as Meta does in 2026, which every contact
reached learns), then the users act: three tap "stop
marketing messages" (``user_preferences``), three had already stopped, so their sends fail
by status callback with 131050, and one replies "STOP" under a username, with no phone in
the message (``from_user_id`` only). The next campaign to the list skips all seven.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from campaigns.models import CampaignStatus, Contact
from delivery.campaigns.launch import campaign_start
from delivery.models import Message
from delivery.simulator.config import user_id_for, username_for
from tests.engine_support import (
    campaign_on,
    number_on,
    running_simulator,
    settle,
    simulator_calling,
    work_burst,
)
from tests.factories import make_campaign
from tests.webhooks.support import APP_SECRET
from webhooks.applier import events_drain
from webhooks.models import AsyncError, InboundMessage, WebhookEvent

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 30


def phone(i: int) -> str:
    return f"+5511{9_0000_0000 + i:09d}"


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_every_kind_of_opt_out_holds_for_the_next_campaign(
    live_server: Any,
) -> None:
    preference = [phone(i) for i in (1, 2, 3)]
    async_stop = [phone(i) for i in (4, 5, 6)]
    username = phone(7)
    with running_simulator(
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        read_fraction=0.0,
        webhook_batch_size=10,
        preference_recipients={p: "stop" for p in preference},
        async_fail_recipients={p: 131050 for p in async_stop},
        reply_recipients={username: "STOP"},
        username_recipients=[username],
    ) as sim:
        number = number_on(sim, rate=200, reserve=0.0)
        first = campaign_on(sim, number, recipients=RECIPIENTS)
        assert Contact.objects.filter(phone__in=[*preference, *async_stop, username]).count() == 7
        campaign_start(campaign=first)
        settle(sim)

        first.refresh_from_db()
        assert first.status == CampaignStatus.COMPLETED
        # The callbacks were Meta's 2026 shapes: a user_preferences field, and a STOP
        # whose sender is a user id only.
        bodies = [json.loads(bytes(e.body)) for e in WebhookEvent.objects.all()]
        fields = {c["field"] for b in bodies for e in b["entry"] for c in e["changes"]}
        assert fields == {"messages", "user_preferences"}
        stop = InboundMessage.objects.get()
        assert stop.from_phone == "" and stop.from_user_id.startswith("US.")
        assert stop.is_opt_out and stop.contact is not None and stop.contact.phone == username
        assert stop.campaign_id == first.pk

        # Each status of these sends to phones named the user's id only in value.contacts[]
        # (Meta, 2026: recipient_user_id only for a send to a user id, and no contacts[] on
        # a failed status): every contact reached learnt its id from them, the username
        # user its username too; the three whose sends failed learnt nothing.
        values = [c["value"] for b in bodies for e in b["entry"] for c in e["changes"]]
        statuses = [s for v in values for s in v.get("statuses", [])]
        assert {s["status"] for s in statuses} == {"sent", "delivered", "failed"}
        assert not [s for s in statuses if "recipient_user_id" in s]
        assert all(
            v.get("contacts")
            for v in values
            if "statuses" in v and v["statuses"][0]["status"] != "failed"
        )
        known = {str(c.phone): c for c in Contact.objects.all()}
        assert len(known) == RECIPIENTS
        for number_phone, contact in known.items():
            expected = None if number_phone in async_stop else user_id_for(number_phone)
            assert contact.user_id == expected, number_phone
        assert known[username].username == username_for(username).lstrip("@")
        assert {c.username for p, c in known.items() if p != username} == {None}

        stopped = set(
            Contact.objects.filter(opted_out_at__isnull=False).values_list("phone", flat=True)
        )
        assert stopped == {*preference, *async_stop, username}
        failed = Message.objects.filter(campaign=first, status="failed")
        assert set(failed.values_list("to", flat=True)) == set(async_stop)
        assert {m.last_error_code for m in failed} == {131050}

        sent_before = sim.stats()["requests"]
        second = make_campaign(
            phone_number=number, template=first.template, lists=list(first.lists.all())
        )
        campaign_start(campaign=second)
        settle(sim)
        second.refresh_from_db()
        assert second.status == CampaignStatus.COMPLETED
        skipped = Message.objects.filter(campaign=second, status="skipped")
        assert set(skipped.values_list("to", flat=True)) == stopped
        assert set(skipped.values_list("skip_reason", flat=True)) == {"opted out"}
        # Exactly the others were sent to, none of the seven.
        records = sim.records(after=0, bodies=True)
        new = [r for r in records if r["seq"] > sent_before]
        assert len(new) == RECIPIENTS - 7
        assert not {"+" + r["to"].lstrip("+") for r in new} & stopped


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_value_level_130429s_from_the_simulator_slow_the_number(live_server: Any) -> None:
    with simulator_calling(
        live_server,
        APP_SECRET,
        value_error_fraction=0.5,
        value_error_code=130429,
        seed=3,
    ) as sim:
        number = number_on(sim, rate=100, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=10)
        campaign_start(campaign=campaign)
        work_burst()
        assert sim.wait_webhooks_idle(timeout=30)
        events_drain(budget_seconds=30)  # whatever the burst's own applier job left
    assert AsyncError.objects.filter(code=130429).exists()
    number.refresh_from_db()
    assert number.effective_rate is not None and number.effective_rate < 100
    bodies = [json.loads(bytes(e.body)) for e in WebhookEvent.objects.all()]
    errors = [
        err
        for b in bodies
        for e in b["entry"]
        for c in e["changes"]
        for err in c["value"].get("errors", [])
    ]
    assert errors and {err["code"] for err in errors} == {130429}
