"""Conversions: stored once, attributed in the INSERT (delivered, clicked, holdout, the
window, the latest touch), and a campaign's ROI and lift computed by hand."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from campaigns.models import Campaign, Contact, RateCard
from delivery.campaigns.skips import HOLDOUT
from delivery.engagement.conversions import conversions_record
from delivery.engagement.roi import (
    campaign_conversions_by_variant,
    campaign_roi,
    message_conversion_counts,
)
from delivery.models import Click, Conversion, Message, MessageStatus
from tests.factories import make_campaign, make_contact, make_message

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)
LAUNCH = NOW - timedelta(days=20)
KEY = 1  # an API key id: the dedupe key names it, nothing else does


def message_for(
    campaign: Campaign,
    contact: Contact,
    *,
    status: str = MessageStatus.DELIVERED,
    created_at: datetime = LAUNCH,
    **fields: Any,
) -> Message:
    message = make_message(
        campaign=campaign, contact=contact, to=contact.phone, status=status, **fields
    )
    # created_at is auto_now_add: the launch time is set afterwards.
    Message.objects.filter(pk=message.pk).update(created_at=created_at)
    return message


def holdout_for(campaign: Campaign, contact: Contact, *, created_at: datetime = LAUNCH) -> Message:
    return message_for(
        campaign, contact, status=MessageStatus.SKIPPED, skip_reason=HOLDOUT, created_at=created_at
    )


def record(*items: dict[str, Any], idempotency_key: str | None = None):
    return conversions_record(api_key_id=KEY, items=items, idempotency_key=idempotency_key)


def purchase(contact: Contact, at: datetime, **fields: Any) -> dict[str, Any]:
    return {"phone": contact.phone, "event": "purchase", "occurred_at": at.isoformat(), **fields}


def test_a_conversion_after_a_delivered_message_is_that_messages() -> None:
    campaign = make_campaign(attribution_days=7)
    contact = make_contact()
    message = message_for(campaign, contact, delivered_at=LAUNCH + timedelta(hours=1))
    result = record(purchase(contact, LAUNCH + timedelta(days=3), value="19.90", currency="brl"))
    assert (result.stored, result.attributed, result.unmatched) == (1, 1, 0)
    item = result.items[0]
    assert (item.message_id, item.campaign_id, item.attributed_by) == (
        message.pk,
        campaign.pk,
        "delivered",
    )
    row = Conversion.objects.get()
    assert (row.contact_id, row.value, row.currency, row.source) == (
        contact.pk,
        Decimal("19.9000"),
        "BRL",
        "api",
    )
    assert row.attributed_by == "delivered" and row.message_id == message.pk


def test_a_read_message_whose_delivery_receipt_was_lost_counts_as_delivered() -> None:
    campaign = make_campaign()
    contact = make_contact()
    message = message_for(
        campaign, contact, status=MessageStatus.READ, read_at=LAUNCH + timedelta(hours=2)
    )
    item = record(purchase(contact, LAUNCH + timedelta(days=1))).items[0]
    assert (item.message_id, item.attributed_by) == (message.pk, "delivered")


def test_outside_the_window_or_before_the_message_nothing_is_attributed() -> None:
    campaign = make_campaign(attribution_days=7)
    contact = make_contact()
    message_for(campaign, contact, delivered_at=LAUNCH)
    late, early = record(
        purchase(contact, LAUNCH + timedelta(days=7, seconds=1)),
        purchase(contact, LAUNCH - timedelta(minutes=1)),
    ).items
    assert late.status == early.status == "stored"
    assert late.campaign_id is None and late.attributed_by == ""
    assert early.campaign_id is None
    # The window is the campaign's own: a 30-day campaign still counts the late one.
    other = make_campaign(attribution_days=30)
    contact2 = make_contact()
    message_for(other, contact2, delivered_at=LAUNCH)
    assert record(purchase(contact2, LAUNCH + timedelta(days=8))).items[0].campaign_id == other.pk


def test_a_pending_or_failed_message_is_never_credited() -> None:
    campaign = make_campaign()
    contact = make_contact()
    message_for(campaign, contact, status=MessageStatus.FAILED)
    message_for(make_campaign(), contact, status=MessageStatus.PENDING)
    result = record(purchase(contact, LAUNCH + timedelta(days=1)))
    assert result.attributed == 0 and result.items[0].contact_matched


def test_a_click_by_a_person_attributes_even_an_old_delivery_and_wins_as_latest_touch() -> None:
    clicked_campaign, later_campaign = make_campaign(attribution_days=7), make_campaign()
    contact = make_contact()
    # Delivered 10 days before the conversion (outside the window) but clicked 1 day before.
    clicked = message_for(clicked_campaign, contact, delivered_at=LAUNCH)
    Click.objects.create(
        message=clicked,
        campaign=clicked_campaign,
        contact=contact,
        clicked_at=LAUNCH + timedelta(days=9),
    )
    # Another campaign delivered 2 days before the conversion: an earlier touch.
    message_for(later_campaign, contact, delivered_at=LAUNCH + timedelta(days=8))
    item = record(purchase(contact, LAUNCH + timedelta(days=10))).items[0]
    assert (item.message_id, item.attributed_by) == (clicked.pk, "clicked")


def test_a_link_preview_fetch_is_not_a_click() -> None:
    campaign = make_campaign(attribution_days=7)
    contact = make_contact()
    message = message_for(campaign, contact, delivered_at=LAUNCH)
    Click.objects.create(
        message=message,
        campaign=campaign,
        contact=contact,
        clicked_at=LAUNCH + timedelta(days=9),
        is_preview=True,
    )
    item = record(purchase(contact, LAUNCH + timedelta(days=10))).items[0]
    assert item.campaign_id is None


def test_the_latest_delivered_message_wins() -> None:
    first, second = make_campaign(), make_campaign()
    contact = make_contact()
    message_for(first, contact, delivered_at=LAUNCH + timedelta(days=1))
    latest = message_for(second, contact, delivered_at=LAUNCH + timedelta(days=2))
    # Delivered after the conversion: cannot have led to it.
    message_for(make_campaign(), contact, delivered_at=LAUNCH + timedelta(days=4))
    item = record(purchase(contact, LAUNCH + timedelta(days=3))).items[0]
    assert (item.message_id, item.campaign_id) == (latest.pk, second.pk)


def test_a_holdout_row_takes_a_conversion_only_when_no_message_reached_the_person() -> None:
    held, sent = make_campaign(holdout_percent=10), make_campaign()
    alone, reached = make_contact(), make_contact()
    holdout_row = holdout_for(held, alone)
    holdout_for(held, reached)
    delivered = message_for(sent, reached, delivered_at=LAUNCH + timedelta(days=1))
    result = record(
        purchase(alone, LAUNCH + timedelta(days=2)),
        purchase(reached, LAUNCH + timedelta(days=2)),
        purchase(alone, LAUNCH + timedelta(days=8)),  # the holdout's window has closed
    )
    first, second, third = result.items
    assert (first.message_id, first.attributed_by) == (holdout_row.pk, "holdout")
    assert (second.message_id, second.attributed_by) == (delivered.pk, "delivered")
    assert third.campaign_id is None
    assert (result.attributed, result.holdout) == (1, 1)


def test_duplicates_by_item_id_and_by_idempotency_key_are_stored_once() -> None:
    contact = make_contact()
    by_id = purchase(contact, NOW, id="order-1", value=5, currency="USD")
    first = record(by_id, by_id)  # twice in one batch
    assert [i.status for i in first.items] == ["stored", "duplicate"]
    again = record({**by_id, "value": 6}, idempotency_key="other")  # same id, any request
    assert (again.stored, again.duplicates) == (0, 1)
    no_id = purchase(contact, NOW)
    assert record(no_id, no_id, idempotency_key="batch-7").stored == 2  # two positions
    replay = record(no_id, no_id, idempotency_key="batch-7")
    assert (replay.stored, replay.duplicates) == (0, 2)
    # Without an id or a key nothing identifies a retry: stored each time.
    assert record(no_id).stored == record(no_id).stored == 1
    assert Conversion.objects.count() == 1 + 2 + 2
    keys = set(Conversion.objects.values_list("dedupe_key", flat=True))
    assert {
        f"api:{KEY}:id:order-1",
        f"api:{KEY}:idem:batch-7:0",
        f"api:{KEY}:idem:batch-7:1",
    } <= keys


def test_an_unknown_person_is_stored_unattributed_and_user_ids_are_matched() -> None:
    known = make_contact(phone=None, user_id="BR.1234567890")
    result = record(
        {"phone": "+55 (11) 98765-4321", "event": "signup"},
        {"user_id": "BR.1234567890", "event": "signup"},
    )
    unknown, by_user = result.items
    assert (result.stored, result.unmatched) == (2, 1)
    assert unknown.contact_matched is False
    assert by_user.contact_matched is True
    stored = Conversion.objects.get(pk=unknown.conversion_id)
    assert (stored.phone, stored.contact_id) == ("+5511987654321", None)
    assert Conversion.objects.get(pk=by_user.conversion_id).contact_id == known.pk


def test_bad_items_are_named_and_the_good_ones_stored() -> None:
    contact = make_contact()
    result = record(
        purchase(contact, NOW),
        {"phone": "12", "event": "purchase"},
        {"phone": contact.phone, "event": "purchase", "value": "1,5", "currency": "BRL"},
        {"phone": contact.phone, "event": "purchase", "value": 3, "currency": "R$1"},
        {"phone": contact.phone, "event": "purchase", "occurred_at": "2026-05-01T10:00:00"},
        {"phone": contact.phone, "event": "purchase", "value": 3},
        {"phone": contact.phone, "event": " "},
        {"phone": contact.phone, "event": "purchase", "value": -1, "currency": "BRL"},
        {
            "phone": contact.phone,
            "event": "x",
            "occurred_at": (NOW + timedelta(days=1)).isoformat(),
        },
    )
    assert (result.received, result.stored, result.rejected) == (9, 1, 8)
    errors = {i.index: i.errors for i in result.items if i.status == "rejected"}
    assert set(errors[1]) == {"conversions[1].phone"}
    assert set(errors[2]) == {"conversions[2].value"}
    assert errors[3] == {
        "conversions[3].currency": "An ISO 4217 code: three letters, e.g. BRL, USD."
    }
    assert "offset" in errors[4]["conversions[4].occurred_at"]
    assert errors[5] == {"conversions[5].currency": "A value needs its currency."}
    assert set(errors[6]) == {"conversions[6].event"}
    assert set(errors[7]) == {"conversions[7].value"}
    assert errors[8] == {"conversions[8].occurred_at": "In the future."}
    assert Conversion.objects.count() == 1


def test_campaign_roi_and_lift_by_hand() -> None:
    """Ten recipients sent, one failed, five held out; by hand:

    - attributed conversions: contact 0 twice (10.00 + 6.00), contacts 1, 2, 3
      (20.00, 5.50, 4.50): 5 conversions, revenue 46.00 USD; contact 4 converted 10 days
      after delivery, outside the 7-day window: not attributed, not in the lift;
    - holdout contact 0 converted (8.00): a control conversion, not revenue;
    - messages sent 10; revenue per message 46.00 / 10 = 4.6000;
    - cost: 10 charged marketing messages at 0.0625 USD = 0.6250; ROI 46 / 0.625 = 73.6000;
    - lift: treated are the 11 the campaign tried (10 sent and the failed one: intention to
      treat), 4 of them converted in the window: 4/11 = 0.363636; control 1/5 = 0.2;
      difference 0.163636. Wilson 95 % intervals (z = 1.959964, z^2 = 3.841459):
      4/11 -> denominator 1 + 3.841459 / 11 = 1.349224, centre (0.363636 + 0.174612) /
      1.349224 = 0.398932, half (1.959964 / 1.349224) * sqrt(0.363636 * 0.636364 / 11
      + 3.841459 / 484) = 0.247267 -> [0.151665, 0.646199]; 1/5 -> centre
      (0.2 + 0.384146) / 1.768292 = 0.330345, half 1.108393 * sqrt(0.032 + 0.038415)
      = 0.294121 -> [0.036224, 0.624466]. Newcombe: low = 0.163636 - sqrt((0.363636 -
      0.151665)^2 + (0.624466 - 0.2)^2) = -0.310814; high = 0.163636 + sqrt((0.646199 -
      0.363636)^2 + (0.2 - 0.036224)^2) = 0.490231. Relative lift 0.363636 / 0.2 - 1 =
      0.818182.
    """
    RateCard.objects.create(
        country_prefix="*", category="marketing", price=Decimal("0.0625"), currency="USD"
    )
    campaign = make_campaign(attribution_days=7, holdout_percent=33)
    treated = [make_contact() for _ in range(10)]
    control = [make_contact() for _ in range(5)]
    delivered_at = LAUNCH + timedelta(hours=1)
    messages = [
        message_for(
            campaign,
            contact,
            delivered_at=delivered_at,
            sent_at=LAUNCH,
            pricing_category="marketing",
            pricing_type="regular",
            variant=i % 2,
        )
        for i, contact in enumerate(treated)
    ]
    message_for(campaign, make_contact(), status=MessageStatus.FAILED)
    for contact in control:
        holdout_for(campaign, contact)
    day2 = LAUNCH + timedelta(days=2)
    result = record(
        purchase(treated[0], day2, value="10.00", currency="USD"),
        purchase(treated[0], day2 + timedelta(hours=1), value=6, currency="USD"),
        purchase(treated[1], day2, value="20.00", currency="USD"),
        purchase(treated[2], day2, value=5.5, currency="USD"),
        purchase(treated[3], day2, value="4.50", currency="usd"),
        purchase(treated[4], LAUNCH + timedelta(days=10), value="99.00", currency="USD"),
        purchase(control[0], day2, value="8.00", currency="USD"),
    )
    assert (result.stored, result.attributed, result.holdout) == (7, 5, 1)

    roi = campaign_roi(campaign)
    assert roi.currency == "USD"
    assert roi.conversions == 5
    assert roi.revenue == Decimal("46.00")
    assert roi.revenue_by_currency == {"USD": Decimal("46.00")}
    assert roi.holdout_conversions == 1
    assert roi.messages_sent == 10
    assert roi.revenue_per_message == Decimal("4.6000")
    assert (roi.cost.cost, roi.cost.charged, roi.cost.unpriced) == (Decimal("0.625"), 10, 0)
    assert roi.cost_known
    assert roi.return_on_spend == Decimal("73.6000")

    lift = roi.lift
    assert lift is not None and lift.comparison is not None
    assert (lift.treated, lift.treated_converted, lift.control, lift.control_converted) == (
        11,
        4,
        5,
        1,
    )
    assert (lift.treated_rate, lift.control_rate) == (4 / 11, 0.2)
    assert lift.comparison.difference == pytest.approx(0.163636, abs=1e-6)
    assert lift.comparison.interval.low == pytest.approx(-0.310814, abs=2e-6)
    assert lift.comparison.interval.high == pytest.approx(0.490231, abs=2e-6)
    assert lift.comparison.relative_lift == pytest.approx(0.818182, abs=1e-6)
    assert not lift.comparison.significant
    assert lift.complete  # launched 20 days ago, a 7-day window

    # By variant (messages 0, 2 are variant 0; 1, 3 variant 1): variant 0 has contact 0's
    # two conversions (16.00) and contact 2's (5.50); variant 1 contact 1's and 3's.
    assert campaign_conversions_by_variant(campaign.pk) == {
        0: (3, Decimal("21.50")),
        1: (2, Decimal("24.50")),
    }
    counts = message_conversion_counts([m.pk for m in messages])
    assert counts == {
        messages[0].pk: (2, Decimal("16.00")),
        messages[1].pk: (1, Decimal("20.00")),
        messages[2].pk: (1, Decimal("5.50")),
        messages[3].pk: (1, Decimal("4.50")),
    }


def test_roi_without_a_rate_card_or_holdout_says_so() -> None:
    campaign = make_campaign()
    contact = make_contact()
    message_for(
        campaign, contact, delivered_at=LAUNCH, pricing_category="marketing", pricing_type="regular"
    )
    record(purchase(contact, LAUNCH + timedelta(days=1), value=12, currency="EUR"))
    record(purchase(contact, LAUNCH + timedelta(days=2), value=3, currency="BRL"))
    record(purchase(contact, LAUNCH + timedelta(days=3), value=4, currency="BRL"))
    roi = campaign_roi(campaign)
    assert roi.currency == "BRL"  # more of its conversions are in BRL
    assert roi.revenue == Decimal("7.0000")
    assert roi.revenue_by_currency == {"BRL": Decimal("7.0000"), "EUR": Decimal("12.0000")}
    assert roi.return_on_spend is None and not roi.cost_known
    assert roi.lift is None
    assert any("rate card" in note for note in roi.notes)
    assert any("EUR" in note for note in roi.notes)
