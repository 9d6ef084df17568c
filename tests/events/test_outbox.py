"""Events are written by triggers in the transaction of the change they report."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus
from delivery.consent import contacts_resume, contacts_stop
from delivery.events.router import events_route
from delivery.events.subscriptions import subscription_create
from delivery.messages import MessageUpdate, status_updates_apply
from delivery.models import Click, Conversion, ConversionSource, Event, EventOutbox
from tests.factories import make_campaign, make_contact, make_message
from webhooks.models import InboundMessage

pytestmark = pytest.mark.django_db


def update(message: Any, status: str, **fields: Any) -> MessageUpdate:
    now = timezone.now()
    values: dict[str, Any] = {
        "message_id": message.pk,
        "status": status,
        "wamid": None,
        "sent_at": now if status == "sent" else None,
        "delivered_at": now if status == "delivered" else None,
        "read_at": now if status == "read" else None,
        "failed_at": now if status == "failed" else None,
        "error_code": None,
        "error_title": None,
        "error_details": None,
        "conversation_id": None,
        "pricing_category": None,
        "billable": None,
    }
    values.update(fields)
    return MessageUpdate(**values)


def outbox() -> list[tuple[str, int | None, dict[str, Any]]]:
    return list(EventOutbox.objects.order_by("id").values_list("event_type", "message_id", "data"))


def test_without_a_subscription_nothing_is_written() -> None:
    campaign = make_campaign()
    message = make_message(campaign=campaign, status="sending", wamid="wamid.A1")
    status_updates_apply([update(message, "delivered")])
    assert EventOutbox.objects.count() == 0


def test_each_status_change_of_a_message_is_one_event_in_its_order() -> None:
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    campaign = make_campaign()
    message = make_message(campaign=campaign, status="sending", wamid="wamid.A1")
    other = make_message(campaign=campaign, status="sending", wamid="wamid.A2")
    status_updates_apply([update(message, "sent")])
    status_updates_apply([update(message, "delivered")])
    status_updates_apply([update(message, "read")])
    status_updates_apply(
        [update(other, "failed", error_code=131026, error_title="Message undeliverable")]
    )
    # A receipt that moves nothing (read again) writes nothing.
    status_updates_apply([update(message, "read")])
    found = [(t, m) for t, m, _ in outbox()]
    assert found == [
        ("message.sent", message.pk),
        ("message.delivered", message.pk),
        ("message.read", message.pk),
        ("message.failed", other.pk),
    ]
    failed = outbox()[-1][2]
    assert failed["error"] == {"code": 131026, "title": "Message undeliverable"}
    assert failed["campaign_id"] == campaign.pk and failed["to"] == other.to


def test_a_status_reached_over_others_gives_each_step_in_order() -> None:
    """One applied batch can take a message from sending to read: the receiver still gets
    sent, delivered and read, in that order; a failed message that is then delivered gets
    delivered only (it had been sent)."""
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    campaign = make_campaign()
    jumped = make_message(campaign=campaign, status="sending", wamid="wamid.J1")
    late = make_message(campaign=campaign, status="failed", wamid="wamid.J2")
    status_updates_apply([update(jumped, "read")])
    status_updates_apply([update(late, "delivered")])
    assert [(t, m) for t, m, _ in outbox()] == [
        ("message.sent", jumped.pk),
        ("message.delivered", jumped.pk),
        ("message.read", jumped.pk),
        ("message.delivered", late.pk),
    ]
    assert [d["status"] for _, _, d in outbox()] == ["sent", "delivered", "read", "delivered"]


def test_a_change_rolled_back_leaves_no_event() -> None:
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    message = make_message(campaign=make_campaign(), status="sending", wamid="wamid.B1")
    with pytest.raises(RuntimeError), transaction.atomic():
        status_updates_apply([update(message, "delivered")])
        assert EventOutbox.objects.count() == 2  # sent, delivered
        raise RuntimeError("the transaction fails after the change")
    assert EventOutbox.objects.count() == 0


def test_clicks_replies_consent_conversions_campaigns_and_the_guard() -> None:
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    contact = make_contact()
    campaign = make_campaign()
    message = make_message(campaign=campaign, contact=contact, status="sent", wamid="wamid.C1")
    now = timezone.now()
    Click.objects.create(
        message=message, campaign=campaign, contact=contact, clicked_at=now, is_preview=True
    )
    Click.objects.create(message=message, campaign=campaign, contact=contact, clicked_at=now)
    InboundMessage.objects.create(
        wamid="wamid.IN1",
        from_phone=contact.phone,
        type="text",
        text="Yes please",
        sent_at=now,
        phone_number=campaign.phone_number,
        contact=contact,
        campaign=campaign,
        context_wamid="wamid.C1",
        payload={},
    )
    contacts_stop(contact_ids=[contact.pk], at=now, reason="STOP")
    contacts_resume(contact_ids=[contact.pk], at=now)
    Conversion.objects.create(
        contact=contact,
        phone=contact.phone,
        event="purchase",
        value=Decimal("25.50"),
        currency="EUR",
        occurred_at=now,
        source=ConversionSource.API,
        dedupe_key="k1",
        message=message,
        campaign=campaign,
        attributed_by="delivered",
    )
    Conversion.objects.create(
        phone=contact.phone,
        event="purchase",
        occurred_at=now,
        source=ConversionSource.API,
        dedupe_key="k2",
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    Campaign.objects.filter(pk=campaign.pk).update(guard_rate_cap=5.0, guard_reason="slow")
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.PAUSED, status_reason="Quality guard: 6% opt-outs"
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.COMPLETED)
    found = outbox()
    assert [t for t, _, _ in found] == [
        "message.clicked",  # the preview fetcher's click is not an event
        "reply.received",
        "contact.opted_out",
        "contact.opted_in",
        "conversion.attributed",  # the unattributed one is not
        "campaign.started",
        "guard.acted",
        "campaign.paused",
        "guard.acted",
        "campaign.resumed",
        "campaign.completed",
    ]
    by_type = {t: (m, d) for t, m, d in found}
    assert by_type["reply.received"][0] == message.pk
    assert by_type["reply.received"][1]["text"] == "Yes please"
    assert by_type["conversion.attributed"][1]["value"] == 25.5
    actions = [d["action"] for t, _, d in found if t == "guard.acted"]
    assert actions == ["slowed", "paused"]


@pytest.mark.django_db(transaction=True)
def test_an_event_committed_late_with_a_lower_id_is_routed_after_those_before_it() -> None:
    """Outbox ids are taken at insert; the router gives seq in commit order, so a cursor
    over seq never steps over an event that committed late."""
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    # A second connection with Django's own parameters (host, socket, port, test database).
    late = connection.get_new_connection(connection.get_connection_params())
    try:
        with late.cursor() as cursor:
            # Taken first (lower id), committed last.
            cursor.execute(
                "INSERT INTO delivery_eventoutbox (event_type, data) VALUES ('late', '{}')"
            )
        EventOutbox.objects.create(event_type="early", data={})
        assert events_route() == 1
        late.commit()
    finally:
        late.close()
    assert events_route() == 1
    assert list(Event.objects.order_by("seq").values_list("event_type", flat=True)) == [
        "early",
        "late",
    ]
    seqs = list(Event.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == [seqs[0], seqs[0] + 1]
    assert EventOutbox.objects.count() == 0


def test_an_old_event_routed_keeps_when_it_happened() -> None:
    subscription_create(name="shop", url="http://127.0.0.1:1/hooks")
    at = timezone.now() - timedelta(hours=3)
    EventOutbox.objects.create(event_type="message.sent", data={}, occurred_at=at)
    events_route()
    assert Event.objects.get().occurred_at == at
