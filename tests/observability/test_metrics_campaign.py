"""/metrics scraped during and after a campaign sent by real forking worker processes.

Two `manage.py rqworker` processes (RQ forks a work horse per job) and the ticker send a
campaign to the simulator, which is slower than the number is configured for (so some
sends come back 130429) and refuses two recipients; its status callbacks come back signed
to a live server and the maintenance queue applies them. Every count the scrape shows is
then compared with what the simulator saw.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django.utils import timezone

from campaigns.models import CampaignStatus
from delivery.campaigns.launch import campaign_start
from delivery.engine import dispatch
from delivery.models import Message, MessageKind
from tests.engine_support import campaign_on, number_on, running_simulator
from tests.observability.support import Scrape, scrape
from whatsblast.core.processes import ProcessGroup, service_environment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APP_SECRET = "metrics-test-secret"  # noqa: S105
QUEUES = ("transactional", "campaigns", "maintenance")
RECIPIENTS = 240
LATENCY_MS = 40


@pytest.fixture
def processes(tmp_path, settings) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "CAMPAIGN_JOB_BUDGET_SECONDS": "2",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def wait_for(predicate, group: ProcessGroup, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        group.check()
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def sends(metrics: Scrape, pnid: str, **labels: str) -> float:
    return metrics.total("whatsblast_sends_total", phone_number_id=pnid, **labels)


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_metrics_follow_a_campaign_sent_by_worker_processes(
    processes: ProcessGroup, live_server
) -> None:
    with running_simulator(
        latency_ms=LATENCY_MS,
        callback_url=f"{live_server.url}/webhooks/whatsapp",
        app_secret=APP_SECRET,
        read_fraction=0.0,
        webhook_batch_size=20,
    ) as sim:
        number = number_on(sim, rate=60, reserve=0.2)
        pnid = number.phone_number_id
        # Meta grants less than configured: the simulator takes 40/s from this number.
        sim.add_number(phone_number_id=pnid, access_token="sim-token", rate=40, burst=5)
        campaign = campaign_on(sim, number, recipients=RECIPIENTS, max_attempts=1)
        refused, broken = "+5511900000007", "+5511900000011"
        sim.configure(fail_recipients={refused: 131026, broken: 131000})
        for name in ("worker-a", "worker-b"):
            processes.manage(name, "rqworker", *QUEUES)
        processes.manage("ticker", "ticker", "--every", "1")
        campaign_start(campaign=campaign)

        # --- while it runs -----------------------------------------------------------------
        mid = wait_for(
            lambda: (m := scrape()) and sends(m, pnid, outcome="sent") >= 40 and m,
            processes,
            timeout=90,
            what="the first sends",
        )
        pending = mid.value(
            "whatsblast_campaign_pending_messages",
            campaign_id=str(campaign.pk),
            phone_number_id=pnid,
        )
        assert 0 < pending < RECIPIENTS
        assert mid.value("whatsblast_messages_pending", traffic="campaign") == pending
        assert mid.value("whatsblast_number_campaign_rate_target", phone_number_id=pnid) == 48
        assert mid.value("whatsblast_number_configured_rate", phone_number_id=pnid) == 60
        for queue in QUEUES:
            assert mid.value("whatsblast_rq_workers", queue=queue) == 2

        # A transactional message on the same number, through the transactional queue.
        otp = Message.objects.create(
            kind=MessageKind.TRANSACTIONAL,
            phone_number=number,
            template=campaign.template,
            to="+5511988887777",
            params={"body": ["1234"]},
            next_attempt_at=timezone.now(),
        )
        dispatch.transactional_enqueue(message_id=otp.pk, attempt=0)

        wait_for(
            lambda: campaign.refresh_from_db() or campaign.status == CampaignStatus.COMPLETED,
            processes,
            timeout=120,
            what="the campaign to complete",
        )
        wait_for(
            lambda: Message.objects.filter(pk=otp.pk, status__in=("sent", "delivered")).exists(),
            processes,
            timeout=30,
            what="the transactional send",
        )
        assert sim.wait_webhooks_idle(30)
        stats = sim.stats()["per_number"][pnid]
        # The counters are written after each flush's rows are committed, so they may trail
        # the table by a moment: wait for them (a count that never arrives fails below).
        end = wait_for(
            lambda: (
                (m := scrape())
                and m.value("whatsblast_webhook_events_pending") == 0
                and sends(m, pnid, outcome="sent") >= stats["accepted"]
                and m
            ),
            processes,
            timeout=30,
            what="the applier and the send counters to catch up",
        )

    # --- sends: equal to what the simulator saw -----------------------------------------------
    requests = sum(stats.values())
    assert sends(end, pnid, outcome="sent") == stats["accepted"] == RECIPIENTS - 2 + 1
    assert sends(end, pnid, traffic="transactional", outcome="sent") == 1
    assert sends(end, pnid) == requests
    throttled = sends(end, pnid, outcome="throttled")
    assert throttled > 0, stats
    assert end.value("whatsblast_send_errors_total", phone_number_id=pnid, code="130429") == (
        throttled
    )
    assert end.value("whatsblast_send_errors_total", phone_number_id=pnid, code="131026") == 1
    assert end.value("whatsblast_send_errors_total", phone_number_id=pnid, code="131000") == 1
    assert sends(end, pnid, outcome="permanent") == 1
    assert sends(end, pnid, outcome="transient") == 1

    # --- dead letters: the transient failure with max_attempts=1 ------------------------------
    assert end.value("whatsblast_dead_letters_created_total", phone_number_id=pnid) == 1
    assert end.value("whatsblast_dead_letters_open", phone_number_id=pnid) == 1

    # --- latency histogram: every call, at the simulator's latency ----------------------------
    count = end.value("whatsblast_cloud_api_latency_seconds_count", phone_number_id=pnid)
    assert count == requests
    mean = end.value("whatsblast_cloud_api_latency_seconds_sum", phone_number_id=pnid) / count
    assert LATENCY_MS / 1000 <= mean < 1.0
    assert (
        end.value("whatsblast_cloud_api_latency_seconds_bucket", phone_number_id=pnid, le="+Inf")
        == count
    )

    # --- pacing: the bucket held the senders back, and the rate followed Meta down ------------
    waited = end.total("whatsblast_token_wait_seconds_total", phone_number_id=pnid)
    assert waited > 1.0
    number.refresh_from_db()
    effective = end.value("whatsblast_number_effective_rate", phone_number_id=pnid)
    assert effective == (number.effective_rate or 60) and effective < 60

    # --- webhooks: every stored callback applied, messages moved ------------------------------
    stored = end.value("whatsblast_webhook_events_received_total", result="stored")
    assert stored > 0
    assert end.value("whatsblast_webhook_events_applied_total", result="processed") == stored
    assert end.value("whatsblast_webhook_statuses_total") >= RECIPIENTS - 2
    assert end.value("whatsblast_webhook_message_updates_total") > 0
    assert end.value("whatsblast_webhook_apply_lag_seconds") == 0

    # --- nothing left behind ------------------------------------------------------------------
    assert end.value("whatsblast_messages_pending", traffic="campaign") == 0
    assert end.value("whatsblast_messages_in_doubt", status="sending") == 0
    assert not end.matching("whatsblast_campaign_pending_messages", campaign_id=str(campaign.pk))
