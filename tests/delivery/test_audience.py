"""A campaign's audience: lists ∪ segments − excluded lists and segments − suppression lists,
each subtraction a skipped row naming it, counted alike by the pre-flight and the launch.

Seven contacts: three on "customers" (Ana, Bruno, Carla), two more in São Paulo only by
attribute (Dora, Eli), Fabio on "staff" and in São Paulo, Gil on "legal" (a suppression
list) and in São Paulo.
"""

from __future__ import annotations

import pytest

from campaigns.models import Campaign, Contact, ContactList, Segment
from delivery.campaigns.audience import campaign_audience
from delivery.campaigns.launch import LaunchError, campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.models import Message, MessageStatus
from delivery.segments.services import segment_save
from tests.factories import make_campaign, make_contact, make_contact_list

pytestmark = pytest.mark.django_db

SAO_PAULO = {"field": "city", "op": "eq", "value": "São Paulo"}


@pytest.fixture
def people() -> dict[str, Contact]:
    customers = make_contact_list(name="customers")
    staff = make_contact_list(name="staff")
    legal = ContactList.objects.create(name="legal requests", suppression=True)
    sp = {"city": "São Paulo"}
    return {
        "ana": make_contact(phone="+5511900000001", name="Ana", contact_list=customers),
        "bruno": make_contact(
            phone="+5511900000002", name="Bruno", contact_list=customers, attributes=sp
        ),
        "carla": make_contact(
            phone="+5511900000003",
            name="Carla",
            contact_list=customers,
            attributes={"city": "Rio", "vip": "yes"},
        ),
        "dora": make_contact(phone="+5511900000004", name="Dora", attributes=sp),
        "eli": make_contact(phone="+5511900000005", name="Eli", attributes={**sp, "vip": "yes"}),
        "fabio": make_contact(
            phone="+5511900000006", name="Fabio", contact_list=staff, attributes=sp
        ),
        "gil": make_contact(phone="+5511900000007", name="Gil", contact_list=legal, attributes=sp),
    }


def rows_by_name(campaign: Campaign) -> dict[str, tuple[str, str]]:
    return {
        m.contact.name.lower(): (m.status, m.skip_reason)
        for m in Message.objects.filter(campaign=campaign).select_related("contact")
    }


def test_lists_and_segments_less_exclusions_reach_exactly_the_expected_contacts(people) -> None:
    sao_paulo = segment_save(name="São Paulo", rules=SAO_PAULO)
    vips = segment_save(name="VIPs", rules={"field": "vip", "op": "eq", "value": "yes"})
    campaign = make_campaign(lists=[ContactList.objects.get(name="customers")])
    campaign.segments.set([sao_paulo])
    campaign.exclude_lists.set([ContactList.objects.get(name="staff")])
    campaign.exclude_segments.set([vips])

    report = campaign_preflight(campaign=campaign)
    summary = campaign_start(campaign=campaign)

    assert rows_by_name(campaign) == {
        "ana": ("pending", ""),
        "bruno": ("pending", ""),  # on the list and in the segment: one row
        "carla": ("skipped", "left out: segment VIPs"),
        "dora": ("pending", ""),
        "eli": ("skipped", "left out: segment VIPs"),
        "fabio": ("skipped", "left out: list staff"),
        "gil": ("skipped", "suppression list legal requests"),
    }
    assert (summary.recipients, summary.pending, summary.skipped) == (7, 3, 4)
    # The pre-flight counted each subtraction as the launch then made it.
    assert report.ok, report.findings
    assert (report.lists, report.segments, report.contacts, report.audience) == (1, 1, 7, 3)
    assert report.left_out == {
        "left out: segment VIPs": 2,
        "left out: list staff": 1,
        "suppression list legal requests": 1,
    }
    texts = [f.text for f in report.findings]
    assert "2 left out: segment VIPs." in texts
    assert "1 left out: list staff." in texts


def test_a_suppression_list_leaves_its_contacts_out_of_every_campaign(people) -> None:
    everyone = segment_save(
        name="everyone", rules={"field": "phone", "op": "exists", "value": True}
    )
    first = make_campaign()
    first.segments.set([everyone])
    second = make_campaign(lists=[ContactList.objects.get(name="legal requests")])
    for campaign in (first, second):
        campaign_start(campaign=campaign)
    for campaign in (first, second):
        gil = Message.objects.get(campaign=campaign, contact=people["gil"])
        assert (gil.status, gil.skip_reason) == ("skipped", "suppression list legal requests")
    assert Message.objects.filter(campaign=first, status="pending").count() == 6


def test_a_segment_is_read_when_the_campaign_launches_not_when_it_was_chosen(people) -> None:
    segment = segment_save(name="São Paulo", rules=SAO_PAULO)
    campaign = make_campaign()
    campaign.segments.set([segment])
    late = make_contact(phone="+5511900000099", name="Late", attributes={"city": "São Paulo"})
    campaign_start(campaign=campaign)
    assert Message.objects.filter(campaign=campaign, contact=late, status="pending").exists()


def test_hostile_names_and_values_are_data(people) -> None:
    hostile = "x'); DROP TABLE campaigns_contact; --"
    weird_list = ContactList.objects.create(name=hostile)
    make_contact(phone="+5511900000050", name="Odd", contact_list=weird_list)
    segment = segment_save(
        name=f"{hostile} %(s0)s {{}}", rules={"field": hostile, "op": "eq", "value": hostile}
    )
    campaign = make_campaign(lists=[weird_list, ContactList.objects.get(name="customers")])
    campaign.exclude_lists.set([weird_list])
    campaign.exclude_segments.set([segment])
    campaign_start(campaign=campaign)
    odd = Message.objects.get(campaign=campaign, contact__name="Odd")
    assert odd.skip_reason == f"left out: list {hostile}"
    assert Contact.objects.count() == 8


def test_a_segment_naming_a_deleted_list_is_refused_with_its_name(people) -> None:
    segment = segment_save(name="not staff", rules={"not": {"list": "staff"}})
    campaign = make_campaign()
    campaign.segments.set([segment])
    ContactList.objects.filter(name="staff").delete()
    with pytest.raises(LaunchError, match="segment 'not staff': rules.not.list: no contact list"):
        campaign_start(campaign=campaign)
    report = campaign_preflight(campaign=campaign)
    assert not report.ok
    assert "segment 'not staff'" in report.errors[0].text
    assert not Message.objects.filter(campaign=campaign).exists()
    campaign.refresh_from_db()
    assert campaign.status == "draft"


def test_no_list_and_no_segment_is_refused() -> None:
    campaign = make_campaign()
    with pytest.raises(LaunchError, match="no contact list and no segment"):
        campaign_start(campaign=campaign)


def test_the_audience_condition_binds_every_segment_apart(people) -> None:
    first = segment_save(name="a", rules=SAO_PAULO)
    second = segment_save(name="b", rules={"field": "vip", "op": "eq", "value": "yes"})
    campaign = make_campaign()
    campaign.segments.set([first, second])
    audience = campaign_audience(campaign)
    # Each segment's parameters carry their own prefix: two segments, no clash.
    segment_params = {k: v for k, v in audience.params.items() if k.startswith("aud")}
    assert segment_params == {
        "aud0_0": "city",
        "aud0_1": "São Paulo",
        "aud1_0": "vip",
        "aud1_1": "yes",
    }


def test_a_left_out_contact_stays_out_of_a_pending_send_when_listed_later(people) -> None:
    """The exclusion is decided at launch: a row skipped for it is never sent afterwards."""
    staff = ContactList.objects.get(name="staff")
    campaign = make_campaign(lists=[staff])
    campaign.exclude_segments.set([segment_save(name="SP", rules=SAO_PAULO)])
    campaign_start(campaign=campaign)
    fabio = Message.objects.get(campaign=campaign)
    assert (fabio.status, fabio.skip_reason) == (MessageStatus.SKIPPED, "left out: segment SP")
    assert Segment.objects.get(name="SP").excluded_from.get() == campaign
