"""The marketing frequency cap: its policy as typed, the claim-time check, skip or defer, and
two campaigns on overlapping audiences sent by two worker processes at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, Contact, ListMembership
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.preflight import campaign_preflight
from delivery.engine.frequency_cap import FrequencyCapGuard, campaign_frequency_cap
from delivery.messages import claim_campaign_batch
from delivery.models import Message, MessageStatus
from delivery.simulator.records import ACCEPTED_OUTCOMES
from tests.engine_support import number_on, running_simulator
from tests.factories import (
    make_campaign,
    make_contact,
    make_contact_list,
    make_phone_number,
    make_template,
)
from whatsblast.core.frequency import FrequencyCap, frequency_cap_parse
from whatsblast.core.processes import ProcessGroup, service_environment

CAP_REASON = "frequency cap: 1 marketing message per 7 days"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2/7d", FrequencyCap(2, timedelta(days=7))),
        (" 1 / 3D ", FrequencyCap(1, timedelta(days=3))),
        ("1/12h", FrequencyCap(1, timedelta(hours=12))),
        ("", None),
        ("off", None),
        ("OFF", None),
    ],
)
def test_a_policy_reads_as_people_type_it(text: str, expected: FrequencyCap | None) -> None:
    assert frequency_cap_parse(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2 per week", "write it as N/Dd or N/Hh"),
        ("2/7", "write it as N/Dd or N/Hh"),
        ("0/7d", "at least 1"),
        ("1/0d", "at least 1"),
        ("1/400d", "at most 366 days"),
        ("-1/7d", "write it as N/Dd or N/Hh"),
    ],
)
def test_a_malformed_policy_is_refused_saying_what_is_expected(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        frequency_cap_parse(text)


def test_a_malformed_site_policy_stops_the_process_at_start_with_the_reason() -> None:
    env = {**os.environ, "MARKETING_FREQUENCY_CAP": "twice a week"}
    result = subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "MARKETING_FREQUENCY_CAP: frequency cap 'twice a week'" in result.stderr


# --- the claim-time check ----------------------------------------------------------------------


@pytest.fixture
def earlier(db) -> Campaign:
    """A marketing campaign that already sent."""
    return make_campaign(status=CampaignStatus.COMPLETED)


def sent_before(campaign: Campaign, contact: Contact, *, ago: timedelta, **fields) -> Message:
    when = timezone.now() - ago
    return Message.objects.create(
        campaign=campaign,
        contact=contact,
        phone_number=campaign.phone_number,
        template=campaign.template,
        to=contact.phone,
        next_attempt_at=when,
        sent_at=when,
        status=fields.pop("status", MessageStatus.SENT),
        **fields,
    )


def launched(contacts: list[Contact], **fields) -> Campaign:
    contact_list = make_contact_list()
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    campaign = make_campaign(lists=[contact_list], **fields)
    campaign_start(campaign=campaign)
    return campaign


@pytest.mark.django_db
def test_a_capped_row_is_skipped_with_the_reason_and_the_others_go(earlier) -> None:
    ana, bia, caio = (make_contact(name=n) for n in ("Ana", "Bia", "Caio"))
    sent_before(earlier, ana, ago=timedelta(days=2))
    sent_before(earlier, bia, ago=timedelta(days=8))  # left the window
    campaign = launched([ana, bia, caio], frequency_cap="1/7d")
    guard = FrequencyCapGuard.for_campaign(campaign)
    assert guard is not None
    rows = claim_campaign_batch(campaign_id=campaign.pk, limit=10)
    admitted = guard.admit(rows, phone_number_pk=campaign.phone_number_id)
    assert sorted(m.contact_id for m in admitted) == [bia.pk, caio.pk]
    skipped = Message.objects.get(campaign=campaign, contact=ana)
    assert (skipped.status, skipped.skip_reason, skipped.claimed_at) == (
        MessageStatus.SKIPPED,
        CAP_REASON,
        None,
    )
    assert guard.capped == 1


@pytest.mark.django_db
def test_rows_another_worker_is_sending_count_and_failed_sends_do_not(earlier) -> None:
    ana, bia = make_contact(name="Ana"), make_contact(name="Bia")
    in_flight = sent_before(earlier, ana, ago=timedelta(0), status=MessageStatus.SENDING)
    Message.objects.filter(pk=in_flight.pk).update(sent_at=None, claimed_at=timezone.now())
    sent_before(earlier, bia, ago=timedelta(hours=1), status=MessageStatus.FAILED)
    campaign = launched([ana, bia], frequency_cap="1/7d")
    guard = FrequencyCapGuard.for_campaign(campaign)
    admitted = guard.admit(
        claim_campaign_batch(campaign_id=campaign.pk, limit=10),
        phone_number_pk=campaign.phone_number_id,
    )
    assert [m.contact_id for m in admitted] == [bia.pk]


@pytest.mark.django_db
def test_a_deferring_campaign_puts_the_row_back_for_when_the_cap_allows(earlier) -> None:
    ana = make_contact(name="Ana")
    first = sent_before(earlier, ana, ago=timedelta(days=5))
    another = make_campaign(phone_number=earlier.phone_number, template=earlier.template)
    second = sent_before(another, ana, ago=timedelta(days=1))
    campaign = launched([ana], frequency_cap="2/7d", frequency_cap_defer=True)
    guard = FrequencyCapGuard.for_campaign(campaign)
    assert (
        guard.admit(
            claim_campaign_batch(campaign_id=campaign.pk, limit=10),
            phone_number_pk=campaign.phone_number_id,
        )
        == []
    )
    row = Message.objects.get(campaign=campaign)
    # Two in the window, two allowed: one more once the older one is 7 days old.
    assert row.status == MessageStatus.PENDING and row.claimed_at is None
    assert row.next_attempt_at == first.sent_at + timedelta(days=7)
    assert row.next_attempt_at < second.sent_at + timedelta(days=7)
    assert row.attempt == 0


@pytest.mark.django_db
def test_which_cap_a_campaign_obeys(settings) -> None:
    settings.MARKETING_FREQUENCY_CAP = "2/7d"
    number = make_phone_number()
    marketing = make_campaign(phone_number=number)
    assert campaign_frequency_cap(marketing) == FrequencyCap(2, timedelta(days=7))
    marketing.frequency_cap = "1/3d"
    assert campaign_frequency_cap(marketing) == FrequencyCap(1, timedelta(days=3))
    marketing.frequency_cap = "off"
    assert campaign_frequency_cap(marketing) is None
    utility = make_campaign(
        phone_number=number,
        template=make_template(account=number.account, name="receipt", category="UTILITY"),
    )
    assert campaign_frequency_cap(utility) is None
    settings.MARKETING_FREQUENCY_CAP = ""
    marketing.frequency_cap = ""
    assert campaign_frequency_cap(marketing) is None


@pytest.mark.django_db
def test_the_preflight_counts_who_would_be_capped_now(earlier, settings) -> None:
    settings.MARKETING_FREQUENCY_CAP = "1/7d"
    contacts = [make_contact(name=f"P{i}") for i in range(4)]
    for contact in contacts[:3]:
        sent_before(earlier, contact, ago=timedelta(days=1))
    contact_list = make_contact_list()
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    report = campaign_preflight(campaign=make_campaign(lists=[contact_list]))
    assert (report.capped_now, report.frequency_cap) == (3, "1 marketing message per 7 days")
    assert any(
        f.text.startswith("3 recipient(s) already had 1 marketing message per 7 days")
        for f in report.warnings
    )


@pytest.mark.django_db
def test_it_counts_what_meta_counts_marketing_outside_an_open_window(earlier) -> None:
    """A person who wrote to the number within 24 hours is in their customer-service
    window: Meta does not count a marketing template then, and neither does the cap, now
    or later."""
    from delivery.models import ServiceWindow

    ana, bia = make_contact(name="Ana"), make_contact(name="Bia")
    for person in (ana, bia):
        sent_before(earlier, person, ago=timedelta(days=2))
    campaign = launched([ana, bia], frequency_cap="1/7d")
    ServiceWindow.objects.create(
        phone_number=campaign.phone_number,
        user=ana.phone,
        last_inbound_at=timezone.now() - timedelta(hours=3),
    )
    guard = FrequencyCapGuard.for_campaign(campaign)
    assert guard is not None
    admitted = guard.admit(
        claim_campaign_batch(campaign_id=campaign.pk, limit=10),
        phone_number_pk=campaign.phone_number_id,
    )
    assert [m.contact_id for m in admitted] == [ana.pk]  # Bia is over the cap
    inside = Message.objects.get(campaign=campaign, contact=ana)
    assert inside.in_service_window
    Message.objects.filter(pk=inside.pk).update(status=MessageStatus.SENT, sent_at=timezone.now())
    # The earlier send of two days ago still counts for Ana; the one in her window does not.
    Message.objects.filter(campaign=earlier).delete()
    follow = launched([ana], frequency_cap="1/7d")
    again = FrequencyCapGuard.for_campaign(follow)
    assert again is not None
    assert [m.contact_id for m in again.admit(
        claim_campaign_batch(campaign_id=follow.pk, limit=10), phone_number_pk=0
    )] == [ana.pk]  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_two_checks_at_the_same_moment_let_each_contact_through_once() -> None:
    """Two workers hold claimed rows of two campaigns for the same 50 contacts and check the
    cap at the same instant, each on its own connection. Unserialised, each would see the
    other's rows being sent and skip its own: nobody would get a message. The per-contact
    lock lets exactly one row per contact through."""
    people = [make_contact(name=f"P{i}") for i in range(50)]
    campaigns = [launched(people, frequency_cap="1/7d") for _ in range(2)]
    claims = [claim_campaign_batch(campaign_id=c.pk, limit=100) for c in campaigns]
    guards = [FrequencyCapGuard.for_campaign(c) for c in campaigns]
    together = threading.Barrier(2)

    def check(index: int) -> list[int]:
        try:
            together.wait(timeout=10)
            number = campaigns[index].phone_number_id
            return [
                m.contact_id for m in guards[index].admit(claims[index], phone_number_pk=number)
            ]
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        admitted = [c for ids in pool.map(check, range(2)) for c in ids]
    assert sorted(admitted) == sorted(p.pk for p in people)
    assert (
        Message.objects.filter(status=MessageStatus.SKIPPED, skip_reason=CAP_REASON).count() == 50
    )


# --- two campaigns, two worker processes ----------------------------------------------------------


@pytest.fixture
def processes(tmp_path) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "MARKETING_FREQUENCY_CAP": "1/7d",
        "CAMPAIGN_JOB_BUDGET_SECONDS": "2",
        "CAMPAIGN_SLOT_RATE": "40",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def wait_until_complete(campaigns: list[Campaign], group: ProcessGroup, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        group.check()
        if all(Campaign.objects.get(pk=c.pk).status == CampaignStatus.COMPLETED for c in campaigns):
            return
        time.sleep(0.5)
    raise AssertionError(f"campaigns not complete after {timeout}s")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_campaigns_at_once_on_two_workers_send_each_contact_one_message(
    processes: ProcessGroup,
) -> None:
    """Overlapping audiences (100 contacts in both), launched together, sent from two numbers
    by two worker processes: the cap of 1 per 7 days holds for every contact, as the
    simulator (Meta) counts what it accepted. The shared contacts have the lowest ids, so
    both campaigns claim them first, at the same moments."""
    with running_simulator(latency_ms=50) as sim:
        numbers = [number_on(sim, rate=60, reserve=0.0) for _ in range(2)]
        people = Contact.objects.bulk_create(
            Contact(phone=f"+55119{70000000 + i:08d}", name=f"P{i}") for i in range(300)
        )
        campaigns = []
        audiences = (people[:200], people[:100] + people[200:])
        for number, members in zip(numbers, audiences, strict=True):
            contact_list = make_contact_list()
            ListMembership.objects.bulk_create(
                ListMembership(contact_list=contact_list, contact=c) for c in members
            )
            template = make_template(account=number.account, name=f"promo_{number.pk}")
            sim.add_template(
                name=template.name,
                language=template.language,
                body_params=1,
                waba_id=number.account.waba_id,
                category=template.category,
            )
            campaigns.append(
                make_campaign(phone_number=number, template=template, lists=[contact_list])
            )
        for name in ("w1", "w2"):
            processes.manage(name, "rqworker", "campaigns", "maintenance")
        processes.manage("ticker", "ticker", "--every", "1")
        for campaign in campaigns:
            campaign_start(campaign=campaign)
        wait_until_complete(campaigns, processes, timeout=120)

        accepted = Counter(
            row["to"] for row in sim.records() if row["outcome"] in ACCEPTED_OUTCOMES
        )
        # Every one of the 300 got exactly one message: none two, none left without.
        assert len(accepted) == 300
        assert set(accepted.values()) == {1}
        rows = Message.objects.filter(campaign__in=campaigns)
        assert rows.count() == 400
        assert rows.filter(status=MessageStatus.SENT).count() == 300
        capped = rows.filter(status=MessageStatus.SKIPPED)
        assert capped.count() == 100
        assert set(capped.values_list("skip_reason", flat=True)) == {CAP_REASON}
        # The capped are exactly the overlap, each capped in one campaign and sent in the other.
        overlap = {c.pk for c in people[:100]}
        assert set(capped.values_list("contact_id", flat=True)) == overlap
