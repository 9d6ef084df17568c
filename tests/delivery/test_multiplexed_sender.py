"""One worker process sends for many numbers and campaigns at once; slots move when it dies.

Workers are real `manage.py rqworker` processes (their send loops run beside the RQ main
loop, delivery.engine.send_service); the simulator runs in this process and records when
each send arrived, which is what every assertion here reads.
"""

from __future__ import annotations

import signal
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from campaigns.models import Campaign, CampaignStatus, Contact, ContactList, ListMembership
from campaigns.state import campaign_pause
from delivery.campaigns.launch import campaign_start
from delivery.campaigns.lifecycle import campaign_cancel
from delivery.engine.slots import LEASE_S, lease_holder
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator
from tests.factories import make_campaign, make_contact_list
from whatsblast.core.processes import ProcessGroup, service_environment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def processes(tmp_path) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "SEND_LEASE_SECONDS": "5",
        "UNKNOWN_SETTLE_SECONDS": "5",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def audience(size: int) -> ContactList:
    contact_list = make_contact_list()
    first = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        Contact(phone=f"+5521{9_0000_0000 + first + i:09d}", name=f"W{i}") for i in range(size)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=c) for c in contacts
    )
    return contact_list


def worker(group: ProcessGroup, name: str) -> None:
    group.manage(name, "rqworker", "transactional", "campaigns", "maintenance")


def arrivals(sim) -> dict[int, list[float]]:
    """Per campaign, when each of its accepted sends reached the simulator."""
    campaign_of = dict(Message.objects.values_list("pk", "campaign_id"))
    times: dict[int, list[float]] = defaultdict(list)
    for row in sim.records():
        callback = row.get("callback_data") or ""
        if row["outcome"] == "accepted" and callback.startswith("wb:"):
            times[campaign_of[int(callback[3:])]].append(row["wall"])
    return {k: sorted(v) for k, v in times.items()}


def wait_complete(campaigns: list[Campaign], group: ProcessGroup, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    ids = [c.pk for c in campaigns]
    while time.monotonic() < deadline:
        group.check()
        if Campaign.objects.filter(pk__in=ids, status=CampaignStatus.COMPLETED).count() == len(ids):
            return
        time.sleep(0.3)
    states = list(Campaign.objects.filter(pk__in=ids).values_list("pk", "status"))
    raise AssertionError(f"not complete after {timeout}s: {states}")


def wait_sending(campaigns: list[Campaign], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = {c.pk: Message.objects.filter(campaign=c, status="sent").exists() for c in campaigns}
        if all(sent.values()):
            return
        time.sleep(0.1)
    raise AssertionError("the campaigns never all started sending")


def test_one_worker_sends_for_several_numbers_at_once(processes: ProcessGroup) -> None:
    with running_simulator(latency_ms=250, jitter_ms=50) as sim:
        numbers = [number_on(sim, rate=40, reserve=0.0) for _ in range(3)]
        campaigns = [campaign_on(sim, n, recipients=200) for n in numbers]
        worker(processes, "only")
        processes.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)

        for campaign in campaigns:
            campaign_start(campaign=campaign)
        wait_complete(campaigns, processes, timeout=60)

        times = arrivals(sim)
        spans = [(times[c.pk][0], times[c.pk][-1]) for c in campaigns]
        # All three sent side by side: their send spans overlap for most of their length
        # (a worker taking turns would have sent them one after another, 15 s apart).
        overlap = min(end for _, end in spans) - max(start for start, _ in spans)
        assert overlap >= 3.5, spans
        for campaign, (start, end) in zip(campaigns, spans, strict=True):
            assert len(times[campaign.pk]) == 200
            # 200 at 40/s: about 5 s from first to last, not 15.
            assert end - start < 7.0, (campaign.pk, end - start)
        assert sim.duplicates() == {}


def test_a_killed_worker_hands_every_number_it_held_to_the_other(
    processes: ProcessGroup,
) -> None:
    with running_simulator(latency_ms=250, jitter_ms=50) as sim:
        numbers = [number_on(sim, rate=40, reserve=0.0) for _ in range(4)]
        campaigns = [campaign_on(sim, n, recipients=600) for n in numbers]
        worker(processes, "w0")
        worker(processes, "w1")
        processes.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)
        for campaign in campaigns:
            campaign_start(campaign=campaign)
        wait_sending(campaigns)
        time.sleep(1.0)

        conn = redis.Redis.from_url(settings.REDIS_URL)
        held: dict[str, list[str]] = defaultdict(list)
        pids = {str(c.process.pid): c for c in processes.children}
        for number in numbers:
            holder = lease_holder(conn.get(f"wb:slot:{{{number.phone_number_id}}}:0"))
            if holder is not None:
                held[holder.rsplit(":", 1)[1]].append(number.phone_number_id)
        victim_pid, victim_numbers = max(held.items(), key=lambda item: len(item[1]))
        assert len(victim_numbers) >= 2  # it held several numbers at once
        killed_at = time.time()
        processes.kill(pids[victim_pid], signal.SIGKILL)

        wait_complete(campaigns, processes, timeout=120)

        times = arrivals(sim)
        for campaign in campaigns:
            if campaign.phone_number.phone_number_id not in victim_numbers:
                continue
            after = [t for t in times[campaign.pk] if t > killed_at + 0.5]
            # Resumed by the survivor within the lease (plus a tick to offer the slot).
            assert after and after[0] - killed_at <= LEASE_S + 3, (campaign.pk, after[:1])
        for campaign in campaigns:
            states = set(campaign.messages.values_list("status", flat=True))
            assert states <= {"sent"}, (campaign.pk, states)
        resent = Message.objects.filter(
            error_history__contains=[{"outcome": "ambiguous settled: pending"}]
        ).count()
        duplicates = sum(len(v) for v in sim.duplicates().values())
        assert duplicates <= resent


@pytest.mark.parametrize("stop", ["pause", "cancel"])
def test_a_stopped_campaign_stops_within_a_second_and_the_others_keep_their_rate(
    processes: ProcessGroup, stop: str
) -> None:
    with running_simulator(latency_ms=100, jitter_ms=20) as sim:
        number_a = number_on(sim, rate=50, reserve=0.0)
        number_b = number_on(sim, rate=50, reserve=0.0)
        stopped = campaign_on(sim, number_a, recipients=600)
        other = campaign_on(sim, number_b, recipients=600)
        worker(processes, "only")
        processes.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)
        campaign_start(campaign=stopped)
        campaign_start(campaign=other)
        wait_sending([stopped, other])
        time.sleep(2.0)

        stopped_at = time.time()
        if stop == "pause":
            campaign_pause(campaign=stopped)
        else:
            campaign_cancel(campaign=stopped)
        time.sleep(4.0)

        times = arrivals(sim)
        late = [t for t in times[stopped.pk] if t > stopped_at + 1.0]
        assert late == [], f"{len(late)} sends more than 1 s after the {stop}"
        during = [t for t in times[other.pk] if stopped_at <= t < stopped_at + 3.0]
        # The other campaign, on the same process, went on at its pace (50/s, paced at
        # 98.5 %): at least 90 % of it over those three seconds.
        assert len(during) >= 0.9 * 50 * 3, len(during)
        states = set(stopped.messages.values_list("status", flat=True))
        assert "sending" not in states  # rows claimed but not sent went back
        if stop == "cancel":
            assert "pending" not in states


def test_campaigns_on_one_number_share_it_by_weight(processes: ProcessGroup) -> None:
    with running_simulator(latency_ms=100, jitter_ms=20) as sim:
        number = number_on(sim, rate=80, reserve=0.0)
        light = campaign_on(sim, number, recipients=600, share_weight=1)
        heavy = make_campaign(
            phone_number=number, template=light.template, lists=[audience(600)], share_weight=3
        )
        worker(processes, "only")
        processes.manage("ticker", "ticker", "--every", "1")
        time.sleep(2)
        campaign_start(campaign=light)
        campaign_start(campaign=heavy)
        wait_sending([light, heavy])
        time.sleep(5.0)

        times = arrivals(sim)
        lo = max(times[light.pk][0], times[heavy.pk][0]) + 1.0
        hi = lo + 4.0
        got_light = sum(1 for t in times[light.pk] if lo <= t < hi)
        got_heavy = sum(1 for t in times[heavy.pk] if lo <= t < hi)
        share = got_heavy / (got_light + got_heavy)
        assert abs(share - 0.75) <= 0.05, (got_light, got_heavy)
