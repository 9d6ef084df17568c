"""Sender pools: one campaign from several numbers of one account, each recipient sticky."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from campaigns.models import CampaignStatus, Contact, ListMembership
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.pools import newcomer_quotas
from delivery.engine.dispatch import campaign_kick
from delivery.models import Message, PoolHome
from delivery.numbers import phone_number_pause, phone_number_resume
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_account, make_campaign, make_contact_list, make_phone_number

pytestmark = pytest.mark.django_db(transaction=True)


def pool_on(sim, rates: list[int]):
    first = number_on(sim, rate=rates[0], reserve=0.0)
    others = []
    for rate in rates[1:]:
        number = make_phone_number(
            account=first.account,
            rate_per_second=rate,
            transactional_reserve=0.0,
            api_base_url=sim.url,
            access_token="sim-token",
        )
        sim.add_number(
            phone_number_id=number.phone_number_id,
            access_token="sim-token",
            rate=rate,
            waba_id=first.account.waba_id,
        )
        others.append(number)
    return first, others


def test_the_launch_gives_each_recipient_one_number_in_proportion_to_the_rates() -> None:
    with running_simulator() as sim:
        first, others = pool_on(sim, [100, 100, 200])
        campaign = campaign_on(sim, first, recipients=4001)
        campaign.pool_numbers.set(others)

        campaign_start(campaign=campaign)

        assigned = Counter(campaign.messages.values_list("phone_number_id", flat=True))
        # Shares 100 : 100 : 200 of the pool's 400 msg/s, to the recipient (so the three
        # finish together), the odd one by the largest remainder.
        assert sorted(assigned.values()) == [1000, 1000, 2001]
        assert assigned[others[1].pk] == 2001
        homes = PoolHome.objects.filter(account=first.account)
        assert homes.count() == 4001
        assert dict(homes.values_list("contact_id", "phone_number_id")) == dict(
            campaign.messages.values_list("contact_id", "phone_number_id")
        )


def test_a_recipient_keeps_its_number_when_the_pool_grows_and_the_newcomers_even_it_out() -> None:
    with running_simulator() as sim:
        first, others = pool_on(sim, [80, 80, 80])
        one = campaign_on(sim, first, recipients=300)
        one.pool_numbers.set(others[:1])  # two numbers: 150 each
        campaign_start(campaign=one)
        homes = dict(one.messages.values_list("contact_id", "phone_number_id"))
        assert sorted(Counter(homes.values()).values()) == [150, 150]

        # A second campaign to those 300 and 150 new people, from three numbers: the 300
        # keep their homes, the newcomers all go to the third number (each then has 150).
        newcomers = make_contact_list()
        start = Contact.objects.count()
        for i in range(150):
            contact = Contact.objects.create(
                phone=f"+5511{9_2000_0000 + start + i:09d}", name=f"N{i}"
            )
            ListMembership.objects.create(contact_list=newcomers, contact=contact)
        two = make_campaign(
            phone_number=first, template=one.template, lists=[*one.lists.all(), newcomers]
        )
        two.pool_numbers.set(others)
        campaign_start(campaign=two)

        picked = dict(two.messages.values_list("contact_id", "phone_number_id"))
        assert {c: picked[c] for c in homes} == homes
        assert {picked[c] for c in set(picked) - set(homes)} == {others[1].pk}
        assert sorted(Counter(picked.values()).values()) == [150, 150, 150]


def test_a_number_that_left_the_pool_hands_its_recipients_to_the_others() -> None:
    with running_simulator() as sim:
        first, others = pool_on(sim, [80, 80, 80])
        one = campaign_on(sim, first, recipients=300)
        one.pool_numbers.set(others)
        campaign_start(campaign=one)
        left = others[1]
        theirs = set(one.messages.filter(phone_number=left).values_list("contact_id", flat=True))
        stayed = dict(
            one.messages.exclude(phone_number=left).values_list("contact_id", "phone_number_id")
        )
        assert len(theirs) == 100

        two = make_campaign(phone_number=first, template=one.template, lists=list(one.lists.all()))
        two.pool_numbers.set(others[:1])
        campaign_start(campaign=two)

        picked = dict(two.messages.values_list("contact_id", "phone_number_id"))
        assert {c: picked[c] for c in stayed} == stayed
        assert {picked[c] for c in theirs} <= {first.pk, others[0].pk}
        assert sorted(Counter(picked.values()).values()) == [150, 150]
        assert not PoolHome.objects.filter(phone_number=left).exists()


def test_opted_out_and_us_recipients_get_no_home_and_do_not_skew_the_split() -> None:
    with running_simulator() as sim:
        first, others = pool_on(sim, [80, 80])
        campaign = campaign_on(sim, first, recipients=200)
        campaign.pool_numbers.set(others)
        contacts = list(Contact.objects.filter(lists__in=campaign.lists.all()).order_by("pk"))
        Contact.objects.filter(pk__in=[c.pk for c in contacts[:40]]).update(
            opted_out_at=timezone.now()
        )

        campaign_start(campaign=campaign)

        pending = Counter(
            campaign.messages.filter(status="pending").values_list("phone_number_id", flat=True)
        )
        assert sorted(pending.values()) == [80, 80]
        assert campaign.messages.filter(status="skipped").count() == 40
        assert PoolHome.objects.count() == 160


@pytest.mark.parametrize(
    ("shares", "at_home", "newcomers", "expected"),
    [
        ([1, 1], [0, 0], 5, [3, 2]),
        ([1, 1, 2], [0, 0, 0], 4001, [1000, 1000, 2001]),
        ([1, 1, 1], [150, 150, 0], 150, [0, 0, 150]),
        ([1, 1], [300, 0], 100, [0, 100]),  # the over-full number takes none
        ([1, 1], [10, 10], 0, [0, 0]),
    ],
)
def test_newcomer_quotas_fill_what_each_number_lacks(shares, at_home, newcomers, expected):
    assert newcomer_quotas(shares, at_home, newcomers) == expected
    assert sum(newcomer_quotas(shares, at_home, newcomers)) == newcomers


def test_a_recipient_gets_the_same_number_in_every_campaign_of_the_pool() -> None:
    with running_simulator() as sim:
        first, others = pool_on(sim, [80, 80, 80, 80])
        one = campaign_on(sim, first, recipients=300)
        one.pool_numbers.set(others)
        two = make_campaign(phone_number=first, template=one.template, lists=list(one.lists.all()))
        two.pool_numbers.set(others)

        campaign_start(campaign=one)
        campaign_start(campaign=two)

        first_pick = dict(one.messages.values_list("to", "phone_number_id"))
        second_pick = dict(two.messages.values_list("to", "phone_number_id"))
        assert first_pick == second_pick
        assert len(set(first_pick.values())) == 4


def test_a_pool_number_of_another_account_is_refused_at_launch() -> None:
    with running_simulator() as sim:
        first = number_on(sim, rate=80)
        stranger = make_phone_number(account=make_account())
        campaign = campaign_on(sim, first, recipients=5)
        campaign.pool_numbers.set([stranger])

        with pytest.raises(ValidationError, match="another business account"):
            campaign_start(campaign=campaign)

        assert not Message.objects.filter(campaign=campaign).exists()


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=2.0)
def test_each_recipient_is_sent_once_from_its_own_number() -> None:
    with running_simulator(latency_ms=20) as sim:
        first, others = pool_on(sim, [60, 60, 60])
        campaign = campaign_on(sim, first, recipients=240)
        campaign.pool_numbers.set(others)
        campaign_start(campaign=campaign)

        work_burst()

        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.COMPLETED
        expected = {
            to: number
            for to, number in campaign.messages.values_list("to", "phone_number__phone_number_id")
        }
        sent_from: dict[str, list[str]] = defaultdict(list)
        for row in sim.records():
            if row["outcome"] == "accepted":
                sent_from[row["to"]].append(row["phone_number_id"])
        assert {to: numbers for to, numbers in sent_from.items()} == {
            to: [number] for to, number in expected.items()
        }


@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_a_paused_number_holds_only_its_own_recipients() -> None:
    with running_simulator(latency_ms=20) as sim:
        first, others = pool_on(sim, [50, 50])
        paused = others[0]
        campaign = campaign_on(sim, first, recipients=100)
        campaign.pool_numbers.set(others)
        phone_number_pause(
            phone_number=paused, until=timezone.now() + timedelta(minutes=5), reason="quality"
        )
        campaign_start(campaign=campaign)

        work_burst()

        by_number = Counter(
            campaign.messages.filter(status="sent").values_list("phone_number_id", flat=True)
        )
        waiting = campaign.messages.filter(phone_number=paused, status="pending").count()
        assert by_number[first.pk] == campaign.messages.filter(phone_number=first).count()
        assert by_number[paused.pk] == 0
        assert waiting > 0
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.RUNNING  # not done: its recipients wait

        phone_number_resume(phone_number=paused)
        campaign_kick(campaign_id=campaign.pk)  # what the next maintenance tick does
        work_burst()

        campaign.refresh_from_db()
        assert campaign.messages.filter(status="sent").count() == 100
        assert campaign.status == CampaignStatus.COMPLETED
