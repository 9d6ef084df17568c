"""Must show: the simulator's users start opting out mid-campaign; the quality guard slows the
campaign, then pauses it, and the campaign page says why.

Everything goes over real HTTP: the sender to the simulator, the simulator's callbacks
(STOP replies, user_preferences stops) to the live webhook endpoint.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from campaigns.models import Campaign, CampaignStatus
from delivery.campaigns.guard import campaign_guard, guard_window
from delivery.campaigns.launch import campaign_start
from delivery.engine import dispatch, send_service
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from whatsblast.tick import maintenance_tick

pytestmark = pytest.mark.django_db(transaction=True)

APP_SECRET = "guard-test-secret"  # noqa: S105


@pytest.fixture(autouse=True)
def guard_every_tick(settings: Any) -> None:
    settings.GUARD_INTERVAL_SECONDS = 0


class _NoContinuation:
    """``dispatch`` for the in-place sender, minus its continuation: one burst is one
    second of sending, and the test's tick kicks the next."""

    def __getattr__(self, name: str) -> Any:
        return getattr(dispatch, name)

    @staticmethod
    def number_kick(**_: Any) -> int:
        return 0


@pytest.fixture
def one_second_bursts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(send_service, "dispatch", _NoContinuation())


def settle(sim: Any) -> dict[str, Any]:
    work_burst()
    assert sim.wait_webhooks_idle(timeout=30)
    return maintenance_tick()


def pending_phones(campaign: Campaign) -> list[str]:
    rows = Message.objects.filter(campaign=campaign, status="pending").order_by("id")
    return list(rows.values_list("to", flat=True))


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_APP_SECRET=APP_SECRET)
def test_an_opt_out_surge_slows_then_pauses_the_campaign_and_the_page_says_why(
    live_server: Any, client: Client, one_second_bursts: None
) -> None:
    with running_simulator(
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        read_fraction=0.0,
        webhook_batch_size=20,
        seed=11,
    ) as sim:
        number = number_on(sim, rate=40, reserve=0.0)
        campaign = campaign_on(
            sim,
            number,
            recipients=400,
            guard_window_sends=40,
            guard_min_sample=30,
            guard_slow_rate=0.05,
            guard_pause_rate=0.25,
            guard_slow_per_second=4.0,
        )
        campaign_start(campaign=campaign)

        # A clean start: the guard watches and does nothing.
        report = settle(sim)
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.RUNNING and campaign.guard_rate_cap is None
        assert report["guard"] == {"slowed": [], "eased": [], "paused": []}
        sent_clean = 400 - len(pending_phones(campaign))
        assert sent_clean >= 30

        # The jump: one recipient in ten of those still to come replies STOP.
        to_come = pending_phones(campaign)
        sim.configure(reply_recipients={p: "STOP" for p in to_come[::10]})
        report = settle(sim)
        campaign.refresh_from_db()
        assert report["guard"]["slowed"] == [campaign.pk], guard_window(campaign=campaign)
        assert campaign.status == CampaignStatus.RUNNING
        assert campaign.guard_rate_cap == 4.0
        assert campaign.guard_reason.startswith("Quality guard slowed to 4/s")

        # Slowed: a burst now sends at the cap, not at the number's 40/s.
        before = 400 - len(pending_phones(campaign))
        work_burst()
        sent_slowed = 400 - len(pending_phones(campaign)) - before
        assert 1 <= sent_slowed <= 4 * 2 + 1

        # Worse: half of the rest tap "stop marketing messages" as well.
        to_come = pending_phones(campaign)
        sim.configure(preference_recipients={p: "stop" for p in to_come[::2]})
        for _ in range(15):
            settle(sim)
            campaign.refresh_from_db()
            if campaign.status == CampaignStatus.PAUSED:
                break
        assert campaign.status == CampaignStatus.PAUSED
        assert campaign.status_reason.startswith("Quality guard: ")
        assert "opted out or were blocked" in campaign.status_reason
        assert "pauses at 25.0%" in campaign.status_reason
        window = guard_window(campaign=campaign)
        assert window.rate >= 0.25
        # Paused, nothing more goes out.
        paused_at = sim.stats()["requests"]
        work_burst()
        assert sim.stats()["requests"] == paused_at
        assert pending_phones(campaign)

    # The campaign page says why, and shows the thresholds.
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    page = client.get(f"/admin/campaigns/campaign/{campaign.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Quality guard: " in html and "opted out or were blocked" in html
    assert "slows at 5.0%" in html and "pauses at 25.0%" in html


def test_a_number_whose_quality_falls_to_red_pauses_the_campaign() -> None:
    with running_simulator() as sim:
        number = number_on(sim, rate=40, reserve=0.0)
        campaign = campaign_on(sim, number, recipients=5, status=CampaignStatus.RUNNING)
        number.quality_rating = "RED"
        number.save()
        campaign = Campaign.objects.select_related("phone_number").get(pk=campaign.pk)
        assert campaign_guard(campaign=campaign) == "paused"
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.PAUSED
        assert "quality is RED" in campaign.status_reason


def test_the_thresholds_are_shown_and_changed_on_the_campaign_page(client: Client) -> None:
    from tests.factories import make_campaign

    campaign = make_campaign(status=CampaignStatus.RUNNING, guard_rate_cap=2.0)
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    url = f"/admin/campaigns/campaign/{campaign.pk}/change/"
    html = client.get(url).content.decode()
    assert "slows at 2.0%" in html and "pauses at 5.0%" in html
    assert 'name="guard_pause_rate"' in html
    response = client.post(
        f"/admin/campaigns/campaign/{campaign.pk}/guard/",
        {
            "guard_enabled": "on",
            "guard_window_sends": "200",
            "guard_min_sample": "20",
            "guard_slow_rate": "0.03",
            "guard_pause_rate": "0.08",
            "guard_slow_per_second": "1.5",
            "guard_pause_quality": "YELLOW",
        },
    )
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.guard_slow_rate, campaign.guard_pause_rate) == (0.03, 0.08)
    assert campaign.guard_pause_quality == "YELLOW" and campaign.guard_window_sends == 200
    # New thresholds: the cap is lifted and the guard judges afresh.
    assert campaign.guard_rate_cap is None and campaign.guard_since is not None
    html = client.get(url).content.decode()
    assert "slows at 3.0% to 1.5/s, pauses at 8.0%" in html


def test_a_slow_rate_above_the_pause_rate_is_refused(client: Client) -> None:
    from tests.factories import make_campaign

    campaign = make_campaign(status=CampaignStatus.RUNNING)
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    client.post(
        f"/admin/campaigns/campaign/{campaign.pk}/guard/",
        {
            "guard_enabled": "on",
            "guard_window_sends": "200",
            "guard_min_sample": "20",
            "guard_slow_rate": "0.3",
            "guard_pause_rate": "0.1",
            "guard_slow_per_second": "1",
            "guard_pause_quality": "RED",
        },
    )
    campaign.refresh_from_db()
    assert campaign.guard_slow_rate == 0.02


def test_after_a_resume_the_guard_judges_only_what_is_sent_from_then() -> None:
    from django.utils import timezone

    from delivery.campaigns.guard import guards_run
    from delivery.campaigns.lifecycle import campaign_resume
    from tests.factories import make_campaign, make_contact

    campaign = make_campaign(
        status=CampaignStatus.RUNNING, guard_min_sample=10, started_at=timezone.now()
    )
    for i in range(20):
        contact = make_contact()
        Message.objects.create(
            campaign=campaign,
            contact=contact,
            phone_number=campaign.phone_number,
            to=contact.phone,
            status="delivered",
            sent_at=timezone.now(),
            next_attempt_at=timezone.now(),
        )
        if i % 4 == 0:  # 25 % stop after the send
            contact.opted_out_at = timezone.now()
            contact.save()
    assert guards_run()["paused"] == [campaign.pk]
    campaign.refresh_from_db()
    assert "25.0% of the latest 20 sends" in campaign.status_reason
    campaign_resume(campaign=campaign)
    assert guards_run() == {"slowed": [], "eased": [], "paused": []}
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.RUNNING


def test_the_draft_form_offers_the_thresholds(client: Client) -> None:
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client.login(username="boss", password="pw")
    html = client.get("/admin/campaigns/campaign/add/").content.decode()
    assert 'id="wb-guard-settings"' in html
    for name in ("guard_slow_rate", "guard_pause_rate", "guard_window_sends"):
        assert f'name="{name}"' in html


def test_the_guard_judges_at_most_once_per_interval(settings: Any) -> None:
    from delivery.campaigns.guard import guards_run
    from tests.factories import make_campaign

    settings.GUARD_INTERVAL_SECONDS = 60
    campaign = make_campaign(status=CampaignStatus.RUNNING)
    campaign.phone_number.quality_rating = "RED"
    campaign.phone_number.save()
    Campaign.objects.filter(pk=campaign.pk).update(guard_pause_quality="")
    assert guards_run()["paused"] == []  # judged: nothing to do
    Campaign.objects.filter(pk=campaign.pk).update(guard_pause_quality="RED")
    assert guards_run()["paused"] == []  # within the interval: not judged
    settings.GUARD_INTERVAL_SECONDS = 0
    assert guards_run()["paused"] == [campaign.pk]


def test_the_guard_names_held_sends_in_its_reason_and_acts_on_opt_outs_only() -> None:
    from django.utils import timezone

    from delivery.campaigns.guard import guard_summary
    from tests.factories import make_campaign, make_contact

    campaign = make_campaign(
        status=CampaignStatus.RUNNING,
        guard_min_sample=10,
        guard_slow_rate=0.02,
        guard_pause_rate=0.5,
        started_at=timezone.now(),
    )
    contacts = [make_contact() for _ in range(20)]
    for i, contact in enumerate(contacts):
        Message.objects.create(
            campaign=campaign,
            contact=contact,
            phone_number=campaign.phone_number,
            to=contact.phone or "",
            status="sent",
            sent_at=timezone.now(),
            next_attempt_at=timezone.now(),
            held_for_quality_assessment=i % 4 == 0,  # Meta holds 5 of the 20
        )
    window = guard_window(campaign=campaign)
    assert (window.sends, window.held, window.rate) == (20, 5, 0.0)
    # Held sends alone: the guard warns and does nothing.
    assert campaign_guard(campaign=campaign) == ""
    assert "Meta held 5 of the latest 20 sends (25.0%)" in str(
        guard_summary(campaign=campaign)["held_warning"]
    )

    # One opt-out (5 %) slows it; the reason names the held sends as well.
    contacts[1].opted_out_at = timezone.now()
    contacts[1].save()
    assert campaign_guard(campaign=campaign) == "slowed"
    campaign.refresh_from_db()
    assert "5.0% of the latest 20 sends opted out or were blocked" in campaign.guard_reason
    assert "5 of them (25.0%) held by Meta for quality assessment" in campaign.guard_reason
