"""A transactional send that finds its number paused longer than it may wait for a token
goes back without sending, and the tick's sweep queues it again at once: it goes out as
soon as the pause is over, not when the attempt's five-minute queued mark runs out."""

from __future__ import annotations

import time

import pytest

from delivery.engine import transactional
from delivery.engine.dispatch import transactional_due_requeue
from delivery.engine.pacing import number_bucket
from delivery.models import Message
from tests.api.support import otp_sender, template_body
from tests.engine_support import running_simulator, work_burst

pytestmark = pytest.mark.django_db(transaction=True)

PAUSE_S = 2.0


def test_an_otp_behind_a_pause_longer_than_its_wait_goes_out_when_the_pause_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transactional, "TOKEN_WAIT_LIMIT_S", 0.3)
    with running_simulator(latency_ms=5) as sim:
        number, api = otp_sender(sim)
        _, created = api.send(template_body(number, params={"body": ["424242"]}))
        paused_until = time.monotonic() + PAUSE_S
        number_bucket(number).pause(PAUSE_S)  # Meta throttled the number's campaign

        work_burst("transactional")  # the job waits 0.3 s for a token, then gives up

        otp = Message.objects.get(pk=created["id"])
        assert otp.status == "pending" and sim.records() == []
        # The sweep may queue the same attempt again (before, its mark refused it).
        assert transactional_due_requeue() == 1
        assert transactional_due_requeue() == 0  # once per pass: the new job holds the mark
        while time.monotonic() < paused_until:
            work_burst("transactional")
            transactional_due_requeue()
        work_burst("transactional")
        otp.refresh_from_db()
        assert otp.status == "sent"
        assert len(sim.records()) == 1
