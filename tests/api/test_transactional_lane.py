"""A worker with its send service hands transactional messages to the service's lane: the
job returns at once, and several OTPs wait for Meta's answer together instead of one after
another in the worker's only job slot."""

from __future__ import annotations

import time

import django_rq
import pytest

from delivery.engine.send_service import service_start, service_stop
from delivery.models import Message
from tests.api.support import otp_sender, template_body
from tests.engine_support import running_simulator, work_burst

pytestmark = pytest.mark.django_db(transaction=True)

LATENCY_MS = 400
OTPS = 6
HANDED = "handed to the send service"


def test_a_worker_with_its_send_service_keeps_several_otps_in_flight_at_once() -> None:
    with running_simulator(latency_ms=LATENCY_MS) as sim:
        number, api = otp_sender(sim)
        ids = [
            api.send(
                template_body(number, params={"body": [f"{n:06d}"]}, to=f"+55119876500{n:02d}")
            )[1]["id"]
            for n in range(OTPS)
        ]
        jobs = django_rq.get_queue("transactional").get_jobs()
        assert len(jobs) == OTPS
        service_start()
        try:
            work_burst("transactional")
            # Every job handed its message to the lane and returned, none sent in place.
            assert [job.return_value() for job in jobs] == [HANDED] * OTPS
            deadline = time.monotonic() + 30
            while Message.objects.filter(pk__in=ids, status="sent").count() < OTPS:
                assert time.monotonic() < deadline, "the lane did not send them"
                time.sleep(0.05)
        finally:
            service_stop()
        records = sim.records()
    assert len(records) == OTPS  # each once
    # In flight together: one after another in the job slot, each would reach Meta only
    # once the previous answer (LATENCY_MS) was back. Here several arrive within one
    # answer's time of each other (how many at once depends on the threads a loaded machine
    # starts), and all of them well before a serial run could have sent them.
    walls = sorted(float(r["wall"]) for r in records)
    together = max(
        sum(1 for w in walls if start <= w < start + LATENCY_MS / 1000) for start in walls
    )
    assert together >= 3, walls
    assert walls[-1] - walls[0] < (OTPS - 1) * LATENCY_MS / 1000 / 2, walls


def test_a_stopping_service_lets_the_job_send_in_place() -> None:
    with running_simulator(latency_ms=5) as sim:
        number, api = otp_sender(sim)
        _, created = api.send(template_body(number, params={"body": ["111111"]}))
        service = service_start()
        service_stop()
        assert service.transactional_submit(created["id"]) is False
        work_burst("transactional")
    assert Message.objects.get(pk=created["id"]).status == "sent"
