"""Follow-ups in one step, from the service, the command line and the report page, and the
campaign's audience options on the command line and the campaign form.

The first campaign reached five people: Ana's was delivered and not read, Bia read it,
Caio read it and replied, Duda's failed, and Edu's was delivered, but Edu has since joined
the staff list the campaign leaves out.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, Contact, ContactList, ListMembership
from delivery.campaigns.follow_ups import FollowUpError, campaign_follow_up, follow_up_counts
from delivery.campaigns.launch import campaign_start
from delivery.models import Message, MessageStatus
from delivery.segments.services import segment_save
from tests.factories import make_campaign, make_contact, make_contact_list, make_message
from tests.ui.support import role_user
from webhooks.models import InboundMessage
from whatsblast.auth.roles import MARKETING, SUPPORT

pytestmark = pytest.mark.django_db

OUTCOMES = {
    "ana": MessageStatus.DELIVERED,
    "bia": MessageStatus.READ,
    "caio": MessageStatus.READ,
    "duda": MessageStatus.FAILED,
    "edu": MessageStatus.DELIVERED,
}


@pytest.fixture
def sent() -> Campaign:
    customers = make_contact_list(name="customers")
    staff = make_contact_list(name="staff")
    campaign = make_campaign(
        name="Black Friday",
        lists=[customers],
        status=CampaignStatus.COMPLETED,
        started_at=timezone.now() - timedelta(days=1),
        frequency_cap="1/3d",
        window_start="09:00",
        window_end="20:00",
    )
    campaign.exclude_lists.set([staff])
    for index, (name, status) in enumerate(OUTCOMES.items()):
        contact = make_contact(phone=f"+55119000000{index:02d}", name=name, contact_list=customers)
        make_message(
            campaign=campaign,
            contact=contact,
            to=contact.phone,
            status=status,
            sent_at=timezone.now() - timedelta(hours=20),
        )
    ListMembership.objects.create(contact_list=staff, contact=Contact.objects.get(name="edu"))
    InboundMessage.objects.create(
        wamid="wamid.in.caio",
        from_phone=Contact.objects.get(name="caio").phone,
        type="text",
        text="I want one",
        sent_at=timezone.now(),
        campaign=campaign,
        payload={},
    )
    return campaign


def launched_names(draft: Campaign) -> dict[str, tuple[str, str]]:
    campaign_start(campaign=draft)
    return {
        m.contact.name: (m.status, m.skip_reason)
        for m in Message.objects.filter(campaign=draft).select_related("contact")
    }


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "delivered_not_read",
            {"ana": ("pending", ""), "edu": ("skipped", "left out: list staff")},
        ),
        ("read_no_reply", {"bia": ("pending", "")}),
        ("replied", {"caio": ("pending", "")}),
        ("failed", {"duda": ("pending", "")}),
    ],
)
def test_a_follow_up_reaches_exactly_those_and_keeps_the_exclusions(sent, key, expected) -> None:
    draft = campaign_follow_up(campaign=sent, key=key)
    assert draft.status == CampaignStatus.DRAFT
    assert draft.follow_up_of == sent
    assert list(draft.lists.all()) == []
    assert list(draft.exclude_lists.values_list("name", flat=True)) == ["staff"]
    # It starts from the campaign's settings.
    assert (draft.template, draft.phone_number, draft.frequency_cap) == (
        sent.template,
        sent.phone_number,
        "1/3d",
    )
    assert (draft.window_start, draft.window_end) == (sent.window_start, sent.window_end)
    assert launched_names(draft) == expected


def test_the_report_counts_who_each_follow_up_would_reach(sent) -> None:
    assert follow_up_counts(campaign=sent) == {
        "delivered_not_read": 2,
        "delivered_not_clicked": 4,
        "read_no_reply": 1,
        "replied": 1,
        "failed": 1,
    }


def test_a_follow_up_segment_is_saved_under_a_name_that_says_what_it_is(sent) -> None:
    draft = campaign_follow_up(campaign=sent, key="delivered_not_read")
    segment = draft.segments.get()
    assert segment.name == f"#{sent.pk} Black Friday: delivered but not read"
    assert segment.rules == {"campaign": sent.pk, "outcome": "delivered_not_read"}
    # Asked twice, the segment is the same one; the drafts are two.
    again = campaign_follow_up(campaign=sent, key="delivered_not_read")
    assert again.segments.get() == segment and again != draft


def test_a_follow_up_is_refused_for_an_unknown_outcome_or_a_draft(sent) -> None:
    with pytest.raises(FollowUpError, match="no follow-up 'clicked'"):
        campaign_follow_up(campaign=sent, key="clicked")
    with pytest.raises(FollowUpError, match="has not been sent"):
        campaign_follow_up(campaign=make_campaign(), key="failed")


# --- the command line --------------------------------------------------------------------------


def test_the_command_line_follows_up_and_says_what_is_wrong(sent) -> None:
    out = StringIO()
    call_command("campaign", "follow-up", str(sent.pk), "--with", "failed", stdout=out)
    draft = Campaign.objects.get(pk=int(out.getvalue()))
    assert draft.follow_up_of == sent
    with pytest.raises(CommandError, match="has not been sent"):
        call_command("campaign", "follow-up", str(draft.pk), "--with", "failed")
    with pytest.raises(CommandError, match="no campaign with id 999999"):
        call_command("campaign", "follow-up", "999999", "--with", "failed")


def test_campaign_create_takes_segments_exclusions_and_a_cap(sent) -> None:
    segment_save(name="São Paulo", rules={"field": "city", "op": "eq", "value": "São Paulo"})
    segment_save(name="recent", rules={"marketing_within_days": 7})
    out = StringIO()
    call_command(
        "campaign",
        "create",
        "--name",
        "Winter",
        "--number",
        sent.phone_number.phone_number_id,
        "--template",
        sent.template.name,
        "--param",
        "1=name",
        "--segment",
        "São Paulo",
        "--exclude-list",
        "staff",
        "--exclude-segment",
        "recent",
        "--frequency-cap",
        "1/3D",
        "--defer-capped",
        stdout=out,
    )
    campaign = Campaign.objects.get(pk=int(out.getvalue()))
    assert list(campaign.lists.all()) == []
    assert list(campaign.segments.values_list("name", flat=True)) == ["São Paulo"]
    assert list(campaign.exclude_lists.values_list("name", flat=True)) == ["staff"]
    assert list(campaign.exclude_segments.values_list("name", flat=True)) == ["recent"]
    assert (campaign.frequency_cap, campaign.frequency_cap_defer) == ("1/3d", True)


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ([], "at least one contact list or segment"),
        (["--segment", "nope"], "no segment named 'nope'"),
        (["--list", "customers", "--exclude-list", "ghost"], "no contact list named 'ghost'"),
        (["--list", "customers", "--frequency-cap", "weekly"], "write it as N/Dd"),
    ],
)
def test_campaign_create_refuses_a_bad_audience_saying_why(sent, extra, problem) -> None:
    base = ["campaign", "create", "--name", "X", "--number", sent.phone_number.phone_number_id]
    with pytest.raises(CommandError, match=problem):
        call_command(*base, "--template", sent.template.name, "--param", "1=name", *extra)
    assert not Campaign.objects.filter(name="X").exists()


# --- the pages ---------------------------------------------------------------------------------


def test_marketing_follows_up_from_the_report(sent) -> None:
    mia = Client()
    mia.force_login(role_user(MARKETING))
    report = mia.get(reverse("admin:campaigns_campaign_report", args=[sent.pk]))
    page = report.content.decode()
    assert 'id="wb-follow-ups"' in page
    assert "Delivered but not read" in page
    response = mia.post(
        reverse("admin:campaigns_campaign_follow_up", args=[sent.pk]),
        {"outcome": "read_no_reply"},
    )
    draft = Campaign.objects.get(follow_up_of=sent)
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:campaigns_campaign_change", args=[draft.pk])
    form = mia.get(response["Location"]).content.decode()
    assert "read but did not reply" in form
    bad = mia.post(reverse("admin:campaigns_campaign_follow_up", args=[sent.pk]), {"outcome": "x"})
    assert bad.status_code == 302
    assert "No follow-up: no follow-up" in mia.get(bad["Location"]).content.decode()


def test_support_may_read_the_report_but_not_follow_up(sent) -> None:
    sam = Client()
    sam.force_login(role_user(SUPPORT))
    page = sam.get(reverse("admin:campaigns_campaign_report", args=[sent.pk]))
    assert page.status_code == 200
    assert 'id="wb-follow-ups"' not in page.content.decode()
    refused = sam.post(
        reverse("admin:campaigns_campaign_follow_up", args=[sent.pk]), {"outcome": "failed"}
    )
    assert refused.status_code == 403
    assert not Campaign.objects.filter(follow_up_of=sent).exists()


def test_the_campaign_form_saves_segments_exclusions_and_the_cap(sent) -> None:
    mia = Client()
    mia.force_login(role_user(MARKETING))
    segment = segment_save(name="VIP", rules={"field": "vip", "op": "eq", "value": "yes"})
    staff = ContactList.objects.get(name="staff")
    data = {
        "name": "Spring",
        "phone_number": sent.phone_number.pk,
        "template": sent.template.pk,
        "segments": [segment.pk],
        "exclude_lists": [staff.pk],
        "param_mapping": '{"body": {"1": {"field": "name"}}}',
        "time_zone_attribute": "timezone",
        "share_weight": 1,
        "max_attempts": 5,
        "ambiguous_policy": sent.ambiguous_policy,
        "canary_size": 0,
        "canary_max_failure_percent": 5,
        "frequency_cap": "2 a week",
    }
    url = reverse("admin:campaigns_campaign_add")
    refused = mia.post(url, data)
    assert refused.status_code == 200
    assert "write it as N/Dd or N/Hh" in refused.content.decode()
    nobody = mia.post(url, {**data, "segments": [], "frequency_cap": ""})
    assert "Choose at least one contact list or segment." in nobody.content.decode()
    saved = mia.post(url, {**data, "frequency_cap": "1/7d", "frequency_cap_defer": "on"})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    campaign = Campaign.objects.get(name="Spring")
    assert list(campaign.segments.all()) == [segment]
    assert list(campaign.exclude_lists.all()) == [staff]
    assert (campaign.frequency_cap, campaign.frequency_cap_defer) == ("1/7d", True)


def test_a_follow_up_keeps_the_campaign_s_languages(sent) -> None:
    Campaign.objects.filter(pk=sent.pk).update(
        languages=True, language_field="locale", language_fallback="en_US"
    )
    sent.refresh_from_db()
    draft = campaign_follow_up(campaign=sent, key="failed")
    assert (draft.languages, draft.language_field, draft.language_fallback) == (
        True,
        "locale",
        "en_US",
    )
