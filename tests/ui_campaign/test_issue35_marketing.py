"""Marketing's side of the campaign pages: a campaign's replies, the canary's wait and its
held rows in words, the pre-flight's reach over the last 24 h, quick-reply opt-outs, and
the launch-together confirmation (real PostgreSQL and Redis)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, CanaryState
from delivery.campaigns.canary import HOLD_AT, canary_tally
from delivery.campaigns.preflight import campaign_preflight
from tests.factories import (
    make_account,
    make_campaign,
    make_contact,
    make_contact_list,
    make_message,
    make_phone_number,
    make_template,
)
from tests.ui.support import role_user
from webhooks.inbound import quick_reply_opt_outs
from webhooks.models import InboundMessage
from whatsblast.admin.campaign_replies import REPLIES_PER_PAGE, replies_summary
from whatsblast.auth.roles import MARKETING

pytestmark = pytest.mark.django_db


@pytest.fixture
def mia() -> Client:
    client = Client()
    client.force_login(role_user(MARKETING))
    return client


def reply(campaign: Campaign, to: str, text: str, *, minutes_ago: int, **fields: Any) -> Any:
    return InboundMessage.objects.create(
        wamid=f"wamid.in.{to}.{minutes_ago}.{text}",
        from_phone=to,
        type=fields.pop("type", "text"),
        text=text,
        sent_at=timezone.now() - timedelta(minutes=minutes_ago),
        campaign=campaign,
        payload={},
        **fields,
    )


# --- 1. replies ------------------------------------------------------------------------------


def test_marketing_reads_a_campaigns_replies_newest_first_with_who_and_what_they_answered(
    mia: Client,
) -> None:
    campaign = make_campaign(status=CampaignStatus.COMPLETED, name="spring")
    ana = make_contact(phone="+5511900000001", name="Ana Souza")
    sent = make_message(campaign=campaign, to=ana.phone, contact=ana, status="read")
    reply(campaign, "+5511900000001", "Is it still on?", minutes_ago=30, contact=ana)
    reply(
        campaign,
        "+5511900000001",
        "Stop promotions",
        minutes_ago=5,
        contact=ana,
        type="button",
        button_payload="STOP_PROMO",
        is_opt_out=True,
    )
    other = make_campaign(status=CampaignStatus.COMPLETED)
    reply(other, "+5511900000009", "not this campaign's", minutes_ago=1)

    page = mia.get(f"/admin/campaigns/campaign/{campaign.pk}/replies/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "1 recipient replied (2 replies) · 1 opted out" in html
    assert html.index("Stop promotions") < html.index("Is it still on?")  # newest first
    assert "Ana Souza" in html and "+5511900000001" in html
    assert "<code>STOP_PROMO</code>" in html
    assert f"/admin/delivery/message/{sent.pk}/change/" in html
    assert "not this campaign" not in html
    # Inbound itself stays Support's.
    assert mia.get("/admin/webhooks/inboundmessage/").status_code == 403


def test_the_replies_page_is_paginated(mia: Client) -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    for n in range(REPLIES_PER_PAGE + 3):
        reply(campaign, f"+55119{n:08d}", f"reply number {n}", minutes_ago=n + 1)
    first = mia.get(f"/admin/campaigns/campaign/{campaign.pk}/replies/").content.decode()
    second = mia.get(f"/admin/campaigns/campaign/{campaign.pk}/replies/?page=2").content.decode()
    assert "reply number 0<" in first and f"reply number {REPLIES_PER_PAGE}<" not in first
    assert f"1–{REPLIES_PER_PAGE} of {REPLIES_PER_PAGE + 3} replies" in first
    assert "reply number 52<" in second and "reply number 0<" not in second
    assert "page 2 of 2" in second


def test_the_message_page_shows_what_its_recipient_replied(mia: Client) -> None:
    campaign = make_campaign(status=CampaignStatus.COMPLETED)
    message = make_message(campaign=campaign, to="+5511900000002", status="delivered")
    reply(campaign, message.to, "Yes please", minutes_ago=2)
    reply(make_campaign(), message.to, "to another campaign", minutes_ago=1)
    html = mia.get(f"/admin/delivery/message/{message.pk}/change/").content.decode()
    assert "Yes please" in html
    assert "to another campaign" not in html


def test_the_live_page_links_its_replies() -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    client = Client()
    client.force_login(role_user(MARKETING))
    html = client.get(f"/admin/campaigns/campaign/{campaign.pk}/change/").content.decode()
    assert f'data-replies-url="/admin/campaigns/campaign/{campaign.pk}/replies/"' in html
    assert 'id="wb-replies-link"' in html


@pytest.mark.parametrize(
    ("recipients", "replies", "opt_outs", "text"),
    [
        (1, 1, 0, "1 recipient replied"),
        (2, 3, 0, "2 recipients replied (3 replies)"),
        (1, 2, 1, "1 recipient replied (2 replies) · 1 opted out"),
        (1_200, 1_200, 0, "1,200 recipients replied"),
    ],
)
def test_reply_wording_is_plural_only_when_it_should_be(
    recipients: int, replies: int, opt_outs: int, text: str
) -> None:
    assert replies_summary(recipients=recipients, replies=replies, opt_outs=opt_outs) == text


# --- 3. the canary's wait, held rows in words ------------------------------------------------


def test_the_canary_tally_names_the_row_waiting_on_a_retry_and_when() -> None:
    campaign = make_campaign(
        status=CampaignStatus.RUNNING, canary_size=3, canary_state=CanaryState.TESTING
    )
    now = timezone.now()
    for _ in range(2):
        make_message(campaign=campaign, status="sent", sent_at=now)
    retry_at = now + timedelta(seconds=25)
    make_message(campaign=campaign, status="pending", attempt=1, next_attempt_at=retry_at)
    for _ in range(4):
        make_message(campaign=campaign, status="pending", next_attempt_at=HOLD_AT)

    tally = canary_tally(campaign_id=campaign.pk)

    assert (tally.sent, tally.size, tally.retrying, tally.held) == (2, 3, 1, 4)
    assert tally.next_retry_at == retry_at
    assert tally.as_dict()["next_retry_at"] == retry_at.isoformat()


def test_held_rows_read_held_until_the_canary_passes_never_the_sentinel(mia: Client) -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING, canary_size=1)
    held = make_message(campaign=campaign, status="pending", next_attempt_at=HOLD_AT)
    listing = mia.get(f"/admin/delivery/message/?campaign__id__exact={campaign.pk}")
    detail = mia.get(f"/admin/delivery/message/{held.pk}/change/")
    for html in (listing.content.decode(), detail.content.decode()):
        assert "held until the canary passes" in html
        assert "9999-01-01" not in html and "Jan. 1, 9999" not in html


def test_a_row_held_for_an_ab_winner_says_so(mia: Client) -> None:
    campaign = make_campaign(status=CampaignStatus.RUNNING, ab_test_percent=20)
    held = make_message(campaign=campaign, status="pending", next_attempt_at=HOLD_AT)
    listing = mia.get(f"/admin/delivery/message/?campaign__id__exact={campaign.pk}")
    detail = mia.get(f"/admin/delivery/message/{held.pk}/change/")
    for html in (listing.content.decode(), detail.content.decode()):
        assert "held until the A/B test&#x27;s winner" in html
        assert "held until the canary passes" not in html


# --- 4. the pre-flight's reach ---------------------------------------------------------------


def test_the_preflight_counts_this_audience_messaged_in_the_last_24_h_by_any_campaign() -> None:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account)
    audience = make_contact_list(name="audience")
    contacts = [make_contact(contact_list=audience, name=f"P{n}") for n in range(5)]
    earlier = make_campaign(phone_number=number, status=CampaignStatus.COMPLETED)
    elsewhere = make_campaign(status=CampaignStatus.COMPLETED)  # another portfolio
    now = timezone.now()
    for contact in contacts[:3]:
        make_message(
            campaign=earlier, to=contact.phone, contact=contact, status="read", sent_at=now
        )
    make_message(
        campaign=elsewhere, to=contacts[3].phone, contact=contacts[3], status="sent", sent_at=now
    )
    old = now - timedelta(hours=30)
    make_message(
        campaign=elsewhere, to=contacts[4].phone, contact=contacts[4], status="sent", sent_at=old
    )
    stranger = make_contact(name="not in the audience")
    make_message(campaign=earlier, to=stranger.phone, contact=stranger, status="sent", sent_at=now)
    draft = make_campaign(
        phone_number=number, template=earlier.template, lists=[audience], name="next"
    )

    report = campaign_preflight(campaign=draft)

    assert report.audience_reached == 4  # three by this portfolio, one by another
    assert report.audience_reached_here == 3
    # An unlimited portfolio keeps no Redis set: its reach comes from the table.
    assert report.reach_used == 4


def test_audience_members_already_reached_cost_no_headroom() -> None:
    account = make_account(messaging_limit_tier="TIER_250")
    number = make_phone_number(account=account)
    audience = make_contact_list(name="audience")
    contacts = [make_contact(contact_list=audience, name=f"P{n}") for n in range(3)]
    earlier = make_campaign(phone_number=number, status=CampaignStatus.COMPLETED)
    for contact in contacts:
        make_message(
            campaign=earlier,
            to=contact.phone,
            contact=contact,
            status="sent",
            sent_at=timezone.now(),
        )
    for n in range(247):  # the portfolio reached 250 users: its whole tier
        make_message(campaign=earlier, to=f"+4917{n:09d}", status="sent", sent_at=timezone.now())
    draft = make_campaign(phone_number=number, template=earlier.template, lists=[audience])

    report = campaign_preflight(campaign=draft)

    assert (report.reach_used, report.headroom, report.audience_reached_here) == (250, 0, 3)
    assert report.over_headroom == 0  # everyone was reached already: no room needed
    assert not [f for f in report.findings if "Messaging limit" in f.text]


# --- 5. quick-reply buttons and opt-outs -----------------------------------------------------

BUTTONS = [
    {"index": 0, "type": "QUICK_REPLY", "text": "Stop promotions"},
    {"index": 1, "type": "QUICK_REPLY", "text": "No more offers"},
    {"index": 2, "type": "QUICK_REPLY", "text": "Unsubscribe me"},
    {"index": 3, "type": "QUICK_REPLY", "text": "Later"},
    {"index": 4, "type": "URL", "text": "Shop"},
]


def test_each_quick_reply_button_says_whether_a_tap_opts_out() -> None:
    mapped = {"1": {"value": "PROMO_OFF"}, "2": {"value": "STOP"}, "3": {"field": "code"}}
    taps = {t.index: t for t in quick_reply_opt_outs(buttons=BUTTONS, mapped=mapped)}
    assert set(taps) == {"0", "1", "2", "3"}  # the URL button sends no reply
    assert taps["0"].opts_out is True and "text 'Stop promotions' is a stop keyword" in (
        taps["0"].reason
    )
    assert taps["1"].opts_out is False
    assert taps["1"].reason == (
        "payload 'PROMO_OFF' is not a stop keyword, nor is its text 'No more offers'"
    )
    assert taps["2"].opts_out is True and taps["2"].reason == "payload 'STOP' is a stop keyword"
    assert taps["3"].opts_out is None and "'code'" in taps["3"].reason


def test_a_stop_keyword_list_without_the_buttons_text_means_no_opt_out(settings: Any) -> None:
    settings.OPT_OUT_KEYWORDS = ["STOP"]
    (tap,) = quick_reply_opt_outs(buttons=BUTTONS[:1], mapped={"0": {"value": "X"}})
    assert tap.verdict == "does not opt out"
    assert tap.reason == "payload 'X' is not a stop keyword, nor is its text 'Stop promotions'"


def test_the_preflight_and_the_form_preview_show_the_buttons_verdicts(mia: Client) -> None:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account)
    template = make_template(account=account, name="offer", buttons=BUTTONS[:2])
    audience = make_contact_list()
    make_contact(contact_list=audience, name="Ana")
    campaign = make_campaign(
        phone_number=number,
        template=template,
        lists=[audience],
        param_mapping={"body": {"1": {"field": "name"}}, "buttons": {"1": {"value": "PROMO_OFF"}}},
    )
    html = mia.get(f"/admin/campaigns/campaign/{campaign.pk}/preflight/").content.decode()
    assert 'id="wb-quick-replies"' in html
    assert "No more offers" in html and "does not opt out" in html
    preview = mia.get(
        "/admin/campaigns/campaign/preview/",
        {"template": str(template.pk), "mapping": '{"buttons": {"1": {"value": "STOP"}}}'},
    ).json()
    verdicts = {t["text"]: t["verdict"] for t in preview["quick_replies"]}
    assert verdicts == {"Stop promotions": "opts out", "No more offers": "opts out"}


# --- 2. launch together: a confirmation first ------------------------------------------------


def ready_draft(name: str, us_phone: str) -> Campaign:
    account = make_account(messaging_limit_tier="TIER_UNLIMITED")
    number = make_phone_number(account=account)
    audience = make_contact_list()
    make_contact(contact_list=audience, name="Ana")
    make_contact(contact_list=audience, name="Bo", phone=us_phone)  # US: skipped
    return make_campaign(phone_number=number, lists=[audience], name=name)


def test_launch_together_first_shows_each_drafts_preflight_and_launches_nothing(
    mia: Client,
) -> None:
    north, south = ready_draft("north", "+12025550123"), ready_draft("south", "+12025550124")
    page = mia.post(
        "/admin/campaigns/campaign/",
        {"action": "launch_together", "_selected_action": [north.pk, south.pk], "index": 0},
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="wb-together-confirm"' in html
    assert html.count("wb-will-send") == 2
    assert "Skipped: " in html and "Estimated cost" in html
    assert set(Campaign.objects.values_list("status_reason", flat=True)) == {""}  # not queued


def test_confirming_launches_them_together(mia: Client) -> None:
    north, south = ready_draft("north", "+12025550123"), ready_draft("south", "+12025550124")
    mia.post(
        "/admin/campaigns/campaign/",
        {"action": "launch_together", "_selected_action": [north.pk, south.pk], "confirm": "yes"},
    )
    reasons = list(Campaign.objects.values_list("status_reason", flat=True))
    assert all("with 1 more" in reason for reason in reasons), reasons


def test_a_blocked_draft_is_named_and_offers_no_launch(mia: Client) -> None:
    north = ready_draft("north", "+12025550123")
    empty = make_campaign(name="no-list")  # no contact list: the pre-flight refuses it
    page = mia.post(
        "/admin/campaigns/campaign/",
        {"action": "launch_together", "_selected_action": [north.pk, empty.pk], "index": 0},
    ).content.decode()
    assert 'id="wb-together-confirm"' not in page
    assert "Blocks the launch:" in page and "no contact list" in page
    # A hand-made confirm is refused as well.
    mia.post(
        "/admin/campaigns/campaign/",
        {"action": "launch_together", "_selected_action": [north.pk, empty.pk], "confirm": "yes"},
    )
    assert set(Campaign.objects.values_list("status_reason", flat=True)) == {""}
