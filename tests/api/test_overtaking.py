"""A transactional send overtakes a campaign that saturates the same number.

Real processes: one `manage.py rqworker transactional campaigns maintenance` (a single
worker, so the campaign job must step aside for the transactional one) against this test
run's database and Redis, the API on a live server, the simulator in this process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from delivery.api.keys import api_key_create
from delivery.campaigns.launch import campaign_start
from delivery.models import Message, MessageStatus
from tests.engine_support import campaign_on, number_on, running_simulator
from tests.factories import make_template
from whatsblast.core.processes import ProcessGroup, service_environment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECIPIENTS = 3000  # 75 s at the campaign's 40 msg/s share: far longer than the test


@pytest.fixture
def processes(tmp_path, settings) -> Iterator[ProcessGroup]:
    env = {
        **service_environment(),
        "DEBUG": "1",
        "LOG_LEVEL": "WARNING",
    }
    group = ProcessGroup(tmp_path / "logs", env)
    yield group
    group.stop()


def wait_for(predicate, timeout: float, group: ProcessGroup, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        group.check()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_transactional_send_overtakes_a_saturating_campaign(processes, live_server) -> None:
    with running_simulator(latency_ms=50, jitter_ms=10) as sim:
        number = number_on(sim, rate=50, reserve=0.2)
        campaign = campaign_on(sim, number, recipients=RECIPIENTS)
        make_template(account=number.account, name="otp", body_param_count=1)
        sim.add_template(name="otp", language="en_US", body_params=1)
        _, key = api_key_create(name="shop", phone_number_ids=[number.phone_number_id])
        processes.manage("worker", "rqworker", "transactional", "campaigns", "maintenance")
        campaign_start(campaign=campaign)
        # Let the campaign saturate its share first: its job is mid-run when the OTPs come.
        wait_for(lambda: len(sim.records()) >= 100, 60, processes, "the campaign to send")

        latencies = []
        for n in range(3):
            to = f"+55219876500{n:02d}"
            started = time.time()
            response = requests.post(
                f"{live_server.url}/api/v1/messages",
                json={
                    "phone_number_id": number.phone_number_id,
                    "to": to,
                    "template": {"name": "otp", "language": "en_US", "params": {"body": ["1"]}},
                },
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
            )
            assert response.status_code == 202, response.text
            wait_for(
                lambda to=to: any(r["to"] == to for r in sim.records()), 10, processes, "the OTP"
            )
            [record] = [r for r in sim.records() if r["to"] == to]
            latencies.append(record["wall"] - started)
            time.sleep(1.0)
        pending = Message.objects.filter(campaign=campaign, status=MessageStatus.PENDING).count()

    # The OTPs left within a second (the worst allowed some slack for a loaded machine),
    # while most of the campaign was still waiting.
    assert sorted(latencies)[1] < 1.0 and max(latencies) < 2.0, latencies
    assert pending > RECIPIENTS / 2, pending
    sent = Message.objects.filter(kind="transactional", status=MessageStatus.SENT).count()
    assert sent == 3
