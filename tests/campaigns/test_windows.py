"""Send windows in the recipient's local time, on a controllable clock.

Every instant below is fixed; the expected openings are written out by hand from the
zones' offsets (2026: US clocks go forward on 8 March and back on 1 November, the EU's on
29 March, Sydney's back on 5 April; Brazil and Japan keep one offset all year).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import phonenumbers
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from phonenumbers import PhoneNumberType
from phonenumbers import timezone as pn_timezone

from campaigns.drafts import campaign_create
from campaigns.models import Campaign, CampaignStatus, TemplateCategory
from campaigns.windows.daily import SendWindow, wall_instant, window_eta
from campaigns.windows.zones import phone_zones, recipient_zone, zone_sql, zone_tables_load
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.schedule import campaign_share_rate, campaign_window_eta, recipients_by_zone
from delivery.engine.window_guard import WindowGuard
from delivery.messages import claim_campaign_batch
from delivery.models import Message
from tests.engine_support import number_on, running_simulator, work_burst
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


DAY = SendWindow(time(9), time(20))
NIGHT = SendWindow(time(22), time(6))  # wraps midnight
SAO_PAULO, TOKYO, LOS_ANGELES, BERLIN, NEW_YORK, SYDNEY = (
    ZoneInfo(name)
    for name in (
        "America/Sao_Paulo",
        "Asia/Tokyo",
        "America/Los_Angeles",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Sydney",
    )
)
# 2026-03-10 12:00 UTC: 09:00 in São Paulo, 21:00 in Tokyo, 05:00 in Los Angeles (PDT),
# 13:00 in Berlin (CET), 23:00 in Sydney (AEDT).
NOON = utc(2026, 3, 10, 12)


# --- the window itself -------------------------------------------------------------------------


def test_parse_and_contains() -> None:
    assert SendWindow.parse("09:00-20:00") == DAY
    assert SendWindow.parse(" 22:00 - 06:00 ") == NIGHT and NIGHT.wraps and not DAY.wraps
    assert (DAY.hours, NIGHT.hours) == (11.0, 8.0)
    assert DAY.contains(time(9)) and DAY.contains(time(19, 59)) and not DAY.contains(time(20))
    assert NIGHT.contains(time(23)) and NIGHT.contains(time(5, 59))
    assert not NIGHT.contains(time(6)) and not NIGHT.contains(time(21, 59))
    for bad in ("9-20", "25:00-06:00", "09:00-09:00", "09:60-10:00"):
        with pytest.raises(ValueError):
            SendWindow.parse(bad)


def test_next_opening_across_four_time_zones() -> None:
    assert DAY.next_opening(SAO_PAULO, NOON) == NOON  # 09:00 there: just opened
    assert DAY.next_opening(BERLIN, NOON) == NOON  # 13:00: open
    assert DAY.next_opening(TOKYO, NOON) == utc(2026, 3, 11, 0)  # 21:00: tomorrow 09:00 JST
    assert DAY.next_opening(LOS_ANGELES, NOON) == utc(2026, 3, 10, 16)  # 05:00: 09:00 PDT


def test_a_window_that_wraps_midnight() -> None:
    assert NIGHT.next_opening(SYDNEY, NOON) == NOON  # 23:00 there: inside
    assert NIGHT.next_opening(TOKYO, NOON) == utc(2026, 3, 10, 13)  # 21:00: opens 22:00 JST
    assert NIGHT.next_opening(BERLIN, NOON) == utc(2026, 3, 10, 21)  # 13:00: opens 22:00 CET
    # 05:59 local is still inside, 06:00 is not (and the next opening is that evening).
    assert NIGHT.is_open(BERLIN, utc(2026, 3, 11, 4, 59))
    assert NIGHT.next_opening(BERLIN, utc(2026, 3, 11, 5)) == utc(2026, 3, 11, 21)


def test_a_0900_opening_on_the_days_clocks_change() -> None:
    # Saturday 7 March, 21:00 EST (closed). Sunday the clocks go forward at 02:00, so
    # 09:00 is EDT (UTC-4): 13:00 UTC, not the 14:00 UTC of the day before.
    assert DAY.next_opening(NEW_YORK, utc(2026, 3, 8, 2)) == utc(2026, 3, 8, 13)
    assert DAY.next_opening(NEW_YORK, utc(2026, 3, 7, 1)) == utc(2026, 3, 7, 14)
    # Back on Sunday 1 November: 09:00 EST is 14:00 UTC again.
    assert DAY.next_opening(NEW_YORK, utc(2026, 11, 1, 1)) == utc(2026, 11, 1, 14)
    # Berlin's change on 29 March: 09:00 CEST is 07:00 UTC (08:00 UTC the day before).
    assert DAY.next_opening(BERLIN, utc(2026, 3, 28, 20)) == utc(2026, 3, 29, 7)
    assert DAY.next_opening(BERLIN, utc(2026, 3, 27, 20)) == utc(2026, 3, 28, 8)


def test_an_opening_the_clock_skips_or_shows_twice() -> None:
    # 02:30 does not exist in New York on 8 March: the window opens when the clock jumps
    # from 02:00 EST to 03:00 EDT, at 07:00 UTC.
    skipped = SendWindow(time(2, 30), time(4))
    assert wall_instant(datetime(2026, 3, 8).date(), time(2, 30), NEW_YORK) == utc(2026, 3, 8, 7)
    assert skipped.next_opening(NEW_YORK, utc(2026, 3, 8, 6)) == utc(2026, 3, 8, 7)
    # 01:30 happens twice on 1 November: first at 05:30 UTC (EDT)...
    twice = SendWindow(time(1, 30), time(1, 45))
    assert twice.next_opening(NEW_YORK, utc(2026, 11, 1, 4)) == utc(2026, 11, 1, 5, 30)
    # ...and once that has closed (01:50 EDT), again at 06:30 UTC (EST).
    assert twice.next_opening(NEW_YORK, utc(2026, 11, 1, 5, 50)) == utc(2026, 11, 1, 6, 30)


def test_open_intervals_follow_the_clock_change() -> None:
    # From Saturday 7 March 00:00 EST to Monday 00:00 EDT.
    spans = DAY.open_intervals(NEW_YORK, utc(2026, 3, 7, 5), utc(2026, 3, 9, 4))
    assert spans == [
        (utc(2026, 3, 7, 14), utc(2026, 3, 8, 1)),  # EST
        (utc(2026, 3, 8, 13), utc(2026, 3, 9, 0)),  # EDT
    ]


# --- ETA ---------------------------------------------------------------------------------------


def test_eta_without_a_window_is_recipients_over_rate() -> None:
    eta = window_eta(recipients_by_zone={"UTC": 3600}, window=None, rate=10, now=NOON)
    assert eta.finishes_at == NOON + timedelta(seconds=360)


def test_eta_counts_only_open_hours() -> None:
    # One hour a day at 1 msg/s: 7,200 recipients take two windows.
    window = SendWindow(time(9), time(10))
    eta = window_eta(
        recipients_by_zone={"UTC": 7200}, window=window, rate=1, now=utc(2026, 3, 10, 8)
    )
    assert eta.finishes_at == utc(2026, 3, 11, 10)
    assert eta.zones[0].open_hours_per_day == 1.0


def test_eta_across_three_zones_serves_the_earliest_opening_first() -> None:
    # At 10:00 UTC, Tokyo (09:00 opening at 00:00 UTC) is open, Berlin opens at 08:00 UTC
    # (open), São Paulo at 12:00 UTC. At 1 msg/s Tokyo's 3,600 go first (since 00:00),
    # Berlin's 3,600 next, then São Paulo's (its opening is latest).
    now = utc(2026, 3, 10, 10)
    eta = window_eta(
        recipients_by_zone={"Asia/Tokyo": 3600, "Europe/Berlin": 3600, "America/Sao_Paulo": 60},
        window=DAY,
        rate=1,
        now=now,
    )
    by_zone = {z.zone: z.finishes_at for z in eta.zones}
    assert by_zone["Asia/Tokyo"] == utc(2026, 3, 10, 11)  # Tokyo closes at 11:00 UTC
    assert by_zone["Europe/Berlin"] == utc(2026, 3, 10, 12)
    assert by_zone["America/Sao_Paulo"] == utc(2026, 3, 10, 12, 1)
    assert eta.finishes_at == utc(2026, 3, 10, 12, 1)


def test_eta_gives_up_past_the_horizon() -> None:
    eta = window_eta(
        recipients_by_zone={"UTC": 10**9}, window=DAY, rate=1, now=NOON, horizon_days=3
    )
    assert eta.finishes_at is None


# --- whose zone -------------------------------------------------------------------------------


@pytest.mark.parametrize("region", ["BR", "US", "DE", "JP", "IN", "MX", "FR", "GB", "ZA", "RU"])
def test_phone_zones_agree_with_phonenumbers_for_fixed_lines(region: str) -> None:
    number = phonenumbers.example_number_for_type(region, PhoneNumberType.FIXED_LINE)
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    assert phone_zones(e164) == tuple(pn_timezone.time_zones_for_number(number))


def test_recipient_zone_rules() -> None:
    # The attribute wins when it is a zone (any case), else the number, else the default.
    assert recipient_zone(phone="+5511987654321", attribute_value="asia/tokyo") == "Asia/Tokyo"
    assert (
        recipient_zone(phone="+5511987654321", attribute_value="Mars/Base") == "America/Sao_Paulo"
    )
    # A UK mobile: London, Guernsey or the Isle of Man. The default decides when it is
    # one of them, else the first (deterministic).
    assert phone_zones("+447700900123") == (
        "Europe/Guernsey",
        "Europe/Isle_of_Man",
        "Europe/London",
    )
    assert recipient_zone(phone="+447700900123", attribute_value=None) == "Europe/Guernsey"
    assert (
        recipient_zone(phone="+447700900123", attribute_value=None, default_zone="Europe/London")
        == "Europe/London"
    )
    assert (
        recipient_zone(phone="+447700900123", attribute_value=None, default_zone="Asia/Tokyo")
        == "Europe/Guernsey"
    )
    # A Jamaican mobile: the island's zone, not the first of the whole +1 plan.
    assert recipient_zone(phone="+18765551234", attribute_value=None) == "America/Jamaica"
    # No data for the prefix (+999 is unassigned): the default, else UTC.
    assert recipient_zone(phone="+9991234567", attribute_value=None) == "UTC"
    assert recipient_zone(phone="+9991234567", attribute_value="", default_zone="Asia/Dubai") == (
        "Asia/Dubai"
    )


@pytest.mark.django_db
def test_the_sql_zone_is_the_python_zone_for_every_region() -> None:
    phones = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE):
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                phones.append(
                    phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
                )
    phones = sorted(set(phones))
    attributes = {phones[0]: "europe/LISBON", phones[1]: "Not/AZone"}
    sql = zone_sql(
        phone="p.phone", attributes="p.attrs", attribute="tz", default_zone="Europe/Moscow"
    )
    with connection.cursor() as cursor:
        zone_tables_load(cursor, default_zone="Europe/Moscow", attribute="tz")
        cursor.execute(
            "WITH p(phone, attrs) AS (SELECT * FROM unnest(%(phones)s::text[], "
            f"%(attrs)s::jsonb[])) SELECT p.phone, {sql.expr} FROM p {sql.joins}",
            {
                **sql.params,
                "phones": phones,
                "attrs": [json.dumps({"tz": attributes.get(p)}) for p in phones],
            },
        )
        in_sql = dict(cursor.fetchall())
    in_python = {
        p: recipient_zone(phone=p, attribute_value=attributes.get(p), default_zone="Europe/Moscow")
        for p in phones
    }
    assert len(phones) > 300 and in_sql == in_python
    assert in_sql[phones[0]] == "Europe/Lisbon"


# --- launch: each recipient's first attempt ---------------------------------------------------

PEOPLE = {
    "+5511987654321": {},  # São Paulo: 09:00, open
    "+81312345678": {},  # Tokyo: 21:00, closed until 00:00 UTC
    "+12125550100": {},  # New York: 08:00 EDT, opens 13:00 UTC
    "+493012345678": {},  # Berlin: 13:00, open
    "+5521987654321": {"timezone": "Asia/Tokyo"},  # a Brazilian number living in Tokyo
    "+5531987654321": {"timezone": "nowhere"},  # not a zone: the number's (São Paulo)
}


def windowed_campaign(window: SendWindow | None = DAY, **fields: object) -> Campaign:
    contact_list = make_contact_list()
    for phone, attributes in PEOPLE.items():
        make_contact(phone=phone, name="N", attributes=attributes, contact_list=contact_list)
    number = make_phone_number()
    template = make_template(account=number.account, category=TemplateCategory.UTILITY)
    return make_campaign(
        phone_number=number,
        template=template,
        lists=[contact_list],
        window_start=window.start if window else None,
        window_end=window.end if window else None,
        **fields,
    )


def first_attempts(campaign: Campaign) -> dict[str, datetime]:
    return dict(Message.objects.filter(campaign=campaign).values_list("to", "next_attempt_at"))


@pytest.mark.django_db(transaction=True)
def test_launch_puts_each_recipient_at_its_own_windows_opening() -> None:
    campaign = windowed_campaign()
    summary = campaign_start(campaign=campaign, now=NOON)
    assert (summary.pending, summary.waiting_for_window) == (6, 3)
    assert first_attempts(campaign) == {
        "+5511987654321": NOON,
        "+81312345678": utc(2026, 3, 11, 0),
        "+12125550100": utc(2026, 3, 10, 13),
        "+493012345678": NOON,
        "+5521987654321": utc(2026, 3, 11, 0),
        "+5531987654321": NOON,
    }


@pytest.mark.django_db(transaction=True)
def test_launch_with_a_window_that_wraps_midnight() -> None:
    campaign = windowed_campaign(NIGHT)
    campaign_start(campaign=campaign, now=NOON)
    assert first_attempts(campaign) == {
        "+5511987654321": utc(2026, 3, 11, 1),  # 22:00 BRT
        "+81312345678": utc(2026, 3, 10, 13),  # 22:00 JST
        "+12125550100": utc(2026, 3, 11, 2),  # 22:00 EDT
        "+493012345678": utc(2026, 3, 10, 21),  # 22:00 CET
        "+5521987654321": utc(2026, 3, 10, 13),
        "+5531987654321": utc(2026, 3, 11, 1),
    }


@pytest.mark.django_db(transaction=True)
def test_launch_the_night_before_the_clocks_change() -> None:
    # Saturday 7 March 2026, 21:00 EST (02:00 UTC on the 8th): New York's window opens
    # Sunday 09:00 EDT.
    campaign = windowed_campaign()
    campaign_start(campaign=campaign, now=utc(2026, 3, 8, 2))
    attempts = first_attempts(campaign)
    assert attempts["+12125550100"] == utc(2026, 3, 8, 13)
    assert attempts["+5511987654321"] == utc(2026, 3, 8, 12)  # 09:00 BRT, no DST
    assert attempts["+493012345678"] == utc(2026, 3, 8, 8)  # Berlin changes on the 29th


@pytest.mark.django_db(transaction=True)
def test_no_window_means_everyone_is_due_at_once() -> None:
    campaign = windowed_campaign(None)
    assert campaign_start(campaign=campaign).waiting_for_window == 0
    assert not Message.objects.filter(
        campaign=campaign, next_attempt_at__gt=timezone.now()
    ).exists()


# --- claim: nobody is sent to outside their window ---------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_rows_due_outside_their_window_go_back_to_its_opening() -> None:
    campaign = windowed_campaign()
    campaign_start(campaign=campaign, now=NOON)
    # Everyone due now (as after retries, a resend, or a campaign running past closing).
    Message.objects.filter(campaign=campaign).update(next_attempt_at=timezone.now())
    rows = claim_campaign_batch(campaign_id=campaign.pk, limit=100)
    guard = WindowGuard.for_campaign(campaign)
    assert guard is not None
    later = utc(2026, 3, 10, 19, 30)  # 16:30 BRT, 20:30 CET (closed), 04:30 JST, 15:30 EDT
    admitted = guard.admit(rows, now=later)
    assert sorted(r.to for r in admitted) == ["+12125550100", "+5511987654321", "+5531987654321"]
    held = dict(
        Message.objects.filter(campaign=campaign, status="pending").values_list(
            "to", "next_attempt_at"
        )
    )
    assert held == {
        "+81312345678": utc(2026, 3, 11, 0),
        "+5521987654321": utc(2026, 3, 11, 0),
        "+493012345678": utc(2026, 3, 11, 8),
    }
    assert guard.held == 3


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_the_engine_sends_only_inside_each_recipients_window() -> None:
    # The real clock here: a two-hour window around São Paulo's current time, which is
    # closed in Berlin (4-5 h ahead) and Tokyo (12 h ahead).
    now = timezone.now()
    local = now.astimezone(SAO_PAULO)
    window = SendWindow(
        (local - timedelta(hours=1)).time().replace(second=0, microsecond=0),
        (local + timedelta(hours=1)).time().replace(second=0, microsecond=0),
    )
    with running_simulator() as sim:
        number = number_on(sim, rate=50)
        contact_list = make_contact_list()
        phones = ["+5511987650001", "+5511987650002", "+493012340001", "+81312340001"]
        for phone in phones:
            make_contact(phone=phone, name="N", contact_list=contact_list)
        template = make_template(
            account=number.account, name="hello", category=TemplateCategory.UTILITY
        )
        sim.add_template(name="hello", language="en_US", body_params=1)
        campaign = make_campaign(
            phone_number=number,
            template=template,
            lists=[contact_list],
            window_start=window.start,
            window_end=window.end,
        )
        summary = campaign_start(campaign=campaign)
        assert summary.waiting_for_window == 2
        work_burst()
        sent = {r["to"] for r in sim.records() if r["outcome"] == "accepted"}
        assert sent == {"+5511987650001", "+5511987650002"}
        # A retry that falls due at night in Tokyo is held again, not sent.
        Message.objects.filter(to="+81312340001").update(next_attempt_at=timezone.now())
        from delivery.engine.dispatch import campaign_kick

        campaign_kick(campaign_id=campaign.pk)
        work_burst()
        assert {r["to"] for r in sim.records()} == sent
        tokyo = Message.objects.get(to="+81312340001")
        assert tokyo.status == "pending"
        assert tokyo.next_attempt_at == window.next_opening(TOKYO, timezone.now())
        assert tokyo.attempt == 0  # holding is not an attempt


# --- ETA of a campaign, command line ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_campaign_eta_counts_recipients_per_zone_before_and_after_launch() -> None:
    campaign = windowed_campaign()
    before = recipients_by_zone(campaign=campaign)
    assert before == {
        "America/Sao_Paulo": 2,
        "Asia/Tokyo": 2,
        "America/New_York": 1,
        "Europe/Berlin": 1,
    }
    campaign_start(campaign=campaign, now=NOON)
    campaign.refresh_from_db()
    assert recipients_by_zone(campaign=campaign) == before
    eta = campaign_window_eta(campaign=campaign, now=NOON)
    assert eta.rate_per_second == campaign_share_rate(campaign=campaign) == 80 * 0.8
    # Six recipients at 64/s: done the moment each zone opens, Tokyo last (00:00 UTC).
    assert eta.finishes_at is not None
    assert utc(2026, 3, 11, 0) < eta.finishes_at < utc(2026, 3, 11, 0, 0, 1)


@pytest.mark.django_db
def test_campaign_create_takes_a_window_and_a_default_zone() -> None:
    number = make_phone_number(phone_number_id="PN-W")
    make_template(account=number.account, name="promo")
    make_contact_list(name="all")
    out = io.StringIO()
    call_command(
        "campaign",
        "create",
        "--name",
        "Night owls",
        "--number",
        "PN-W",
        "--template",
        "promo",
        "--list",
        "all",
        "--param",
        "1=name",
        "--window",
        "22:00-06:00",
        "--time-zone",
        "europe/moscow",
        stdout=out,
    )
    campaign = Campaign.objects.get(pk=int(out.getvalue()))
    assert (campaign.window_start, campaign.window_end) == (time(22), time(6))
    assert (campaign.time_zone, campaign.time_zone_attribute) == ("Europe/Moscow", "timezone")
    assert campaign.status == CampaignStatus.DRAFT
    with pytest.raises(ValidationError, match="unknown time zone 'Mars/Base'"):
        campaign_create(
            name="x",
            phone_number_id="PN-W",
            template_name="promo",
            list_names=["all"],
            param_mapping={"body": {"1": {"field": "name"}}},
            time_zone="Mars/Base",
        )
