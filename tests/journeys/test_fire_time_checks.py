"""A send step as it fires: every check made then, each outcome written with its reason."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from campaigns.models import Contact, TemplateCategory, TemplateStatus
from delivery.engine.transactional import REPLY_BUTTONS
from delivery.models import Message, MessageKind, ServiceWindow
from journeys.models import ExitKind, HistoryKind, JourneyHistory, JourneyInstance
from tests.factories import make_phone_number
from tests.journeys.support import journey_live, post, run, template_on

pytestmark = pytest.mark.django_db

# 12:00 UTC: 09:00 in São Paulo, 20:00 in Manila.
T0 = datetime.fromisoformat("2026-12-01T12:00:00+00:00")
NAME = {"body": {"1": {"field": "name"}}}


def one_send(**extra: Any) -> dict[str, Any]:
    send = {"id": "offer", "type": "send", "template": "offer", "mapping": NAME}
    send.update(extra.pop("send", {}))
    return {"entry": {"type": "event", "event": "go"}, "steps": [send], **extra}


@pytest.fixture
def number() -> Any:
    return make_phone_number()


def enter(phone: str, at: datetime = T0, **contact: Any) -> JourneyInstance:
    contact.setdefault("name", "Ana")
    Contact.objects.update_or_create(phone=phone, defaults=contact)
    post([{"phone": phone, "name": "go"}], now=at)
    run(at)
    return JourneyInstance.objects.get(contact__phone=phone)


def said(instance: JourneyInstance) -> list[tuple[str, str]]:
    return [
        (h.kind, h.detail)
        for h in JourneyHistory.objects.filter(instance=instance).order_by("id")
        if h.kind not in (HistoryKind.ENTERED,)
    ]


def test_an_opted_out_contact_is_not_sent_and_leaves(number: Any) -> None:
    template_on(number, "offer")
    journey_live(number, one_send())
    instance = enter("+5511987650001", opted_out_at=T0)
    instance.refresh_from_db()
    assert not Message.objects.exists()
    assert (instance.state, instance.exit_kind) == ("exited", ExitKind.OPTED_OUT)
    assert said(instance)[0] == (HistoryKind.SKIPPED, "opted out: not sent")


def test_outside_the_window_in_the_persons_zone_it_goes_at_the_opening(number: Any) -> None:
    template_on(number, "offer")
    journey_live(number, one_send(window="09:00-18:00"))
    manila = enter("+63281230001")  # 20:00 there: closed
    sao_paulo = enter("+5511987650001")  # 09:00 there: open
    assert Message.objects.filter(to="+5511987650001").count() == 1
    manila.refresh_from_db()
    opening = datetime.fromisoformat("2026-12-02T01:00:00+00:00")  # 09:00 in Manila
    assert manila.due_at == opening
    assert said(manila) == [
        (
            HistoryKind.DEFERRED,
            "outside the send window 09:00-18:00 in Asia/Manila: goes at "
            "2026-12-02 09:00 Asia/Manila",
        )
    ]
    run(opening - timedelta(minutes=1))
    assert not Message.objects.filter(to="+63281230001").exists()
    run(opening)
    assert Message.objects.filter(to="+63281230001").count() == 1
    del sao_paulo


def test_a_paused_template_waits_says_so_once_then_gives_up_at_the_lateness_limit(
    number: Any,
) -> None:
    template = template_on(number, "offer", status=TemplateStatus.PAUSED)
    journey_live(number, one_send(lateness_hours=3))
    instance = enter("+5511987650001")
    for hours in (1, 2):
        run(T0 + timedelta(hours=hours, seconds=1))
    assert not Message.objects.exists()
    assert said(instance) == [
        (HistoryKind.DEFERRED, "template offer (en_US) is paused at Meta: waiting (checked hourly)")
    ]
    run(T0 + timedelta(hours=3, seconds=2))
    assert said(instance)[-2] == (
        HistoryKind.SKIPPED,
        "template offer (en_US) stayed paused past the journey's lateness limit (3 h): not sent",
    )
    # Back to approved in time, another person gets it.
    template.status = TemplateStatus.APPROVED
    template.save()
    enter("+5511987650002", at=T0 + timedelta(hours=4))
    assert Message.objects.count() == 1


def test_a_disabled_template_is_skipped_and_the_journey_goes_on(number: Any) -> None:
    template_on(number, "offer", status=TemplateStatus.DISABLED)
    journey_live(number, one_send())
    instance = enter("+5511987650001")
    assert said(instance)[0] == (
        HistoryKind.SKIPPED,
        "template offer (en_US) is disabled: not sent",
    )
    instance.refresh_from_db()
    assert instance.exit_kind == ExitKind.COMPLETED


def test_a_utility_template_recategorised_as_marketing_follows_the_us_rule_at_fire_time(
    number: Any,
) -> None:
    template = template_on(number, "offer", category=TemplateCategory.UTILITY)
    journey_live(number, one_send())
    enter("+12125550001")
    assert Message.objects.count() == 1  # utility: New York is sent
    template.category = TemplateCategory.MARKETING  # Meta re-categorised it since
    template.save()
    later = enter("+12125550002", at=T0 + timedelta(hours=1))
    assert Message.objects.count() == 1
    assert said(later)[0] == (
        HistoryKind.SKIPPED,
        "US number: Meta does not deliver marketing templates to US numbers",
    )


def test_a_step_late_past_the_limit_is_skipped_saying_by_how_much(number: Any) -> None:
    template_on(number, "offer")
    journey_live(number, one_send(lateness_hours=2))
    Contact.objects.create(phone="+5511987650001", name="Ana")
    post([{"phone": "+5511987650001", "name": "go"}], now=T0)
    from journeys.routing import events_route
    from journeys.sweep import journeys_sweep

    events_route(now=T0)
    journeys_sweep(now=T0 + timedelta(hours=5))  # the sweep was down for five hours
    [instance] = JourneyInstance.objects.all()
    assert not Message.objects.exists()
    assert said(instance)[0] == (
        HistoryKind.SKIPPED,
        "late: due 2026-12-01 12:00 UTC, reached 5 h after, past the journey's limit of 2 h: "
        "not sent",
    )


def test_a_held_out_person_passes_every_step_and_is_sent_nothing(number: Any) -> None:
    template_on(number, "offer")
    journey = journey_live(number, one_send(holdout_percent=50))
    phones = [f"+55119876{i:05d}" for i in range(200)]
    Contact.objects.bulk_create(Contact(phone=p, name="Ana") for p in phones)
    post([{"phone": p, "name": "go"} for p in phones], now=T0)
    run(T0)
    held = JourneyInstance.objects.filter(journey=journey, holdout=True)
    assert 70 <= held.count() <= 130
    assert not Message.objects.filter(contact__in=held.values("contact")).exists()
    assert Message.objects.count() == 200 - held.count()
    assert set(JourneyInstance.objects.values_list("exit_kind", flat=True)) == {ExitKind.COMPLETED}


def test_a_missing_mapped_field_skips_the_person_with_the_reason(number: Any) -> None:
    template_on(number, "offer")
    journey_live(number, one_send(send={"mapping": {"body": {"1": {"field": "city"}}}}))
    instance = enter("+5511987650001")
    assert not Message.objects.exists()
    assert said(instance)[0] == (
        HistoryKind.SKIPPED,
        "the contact has no city, which the mapping needs: not sent",
    )


def test_inside_the_24_hour_window_the_free_form_message_goes_instead(number: Any) -> None:
    template_on(number, "offer")
    journey_live(
        number,
        one_send(
            send={
                "if_window_open": {
                    "text": "Still deciding? Tap to keep your cart.",
                    "buttons": [{"id": "keep", "title": "Keep it"}, {"id": "no", "title": "No"}],
                }
            }
        ),
    )
    ServiceWindow.objects.create(
        phone_number=number, user="+5511987650001", last_inbound_at=T0 - timedelta(hours=2)
    )
    open_window = enter("+5511987650001")
    closed = enter("+5511987650002")
    free = Message.objects.get(contact=open_window.contact)
    assert free.kind == MessageKind.TRANSACTIONAL and free.campaign_id is None
    assert free.text == "Still deciding? Tap to keep your cart."
    assert free.params == {REPLY_BUTTONS: [["keep", "Keep it"], ["no", "No"]]}
    assert said(open_window)[0] == (
        HistoryKind.SENT,
        "the 24-hour window is open: free-form buttons instead of the template",
    )
    template_send = Message.objects.get(contact=closed.contact)
    assert template_send.kind == MessageKind.CAMPAIGN and template_send.template_id


def test_a_user_id_only_contact_is_not_sent_a_template_meta_refuses_for_user_ids(
    number: Any,
) -> None:
    template_on(
        number,
        "offer",
        components=[
            {"type": "BODY", "text": "Your code"},
            {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SALE20"}]},
        ],
    )
    journey_live(number, one_send(send={"mapping": {"buttons": {"0": {"value": "SALE20"}}}}))
    Contact.objects.create(user_id="BR.1234567890123456", name="Ana")
    post([{"user_id": "BR.1234567890123456", "name": "go"}], now=T0)
    run(T0)
    [instance] = JourneyInstance.objects.all()
    assert not Message.objects.exists()
    assert said(instance)[0] == (
        HistoryKind.SKIPPED,
        "user id only: Meta does not send copy-code buttons to user ids",
    )
