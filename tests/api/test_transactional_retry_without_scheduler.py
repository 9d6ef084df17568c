"""A transactional send Meta throttled (130429) keeps its attempt and is retried through
RQ's scheduler. When no scheduler moves that retry (no worker runs one, or Redis lost the
scheduled job), the tick's sweep queues it a few seconds after it is due: before, the
attempt's five-minute queued mark held the OTP back for those five minutes."""

from __future__ import annotations

import time

import pytest

from delivery.engine import dispatch
from delivery.engine.dispatch import transactional_due_requeue
from delivery.models import Message
from tests.api.support import otp_sender, template_body
from tests.engine_support import running_simulator, work_burst

pytestmark = pytest.mark.django_db(transaction=True)

GRACE_S = 1.0


def test_a_throttled_otp_is_swept_up_when_no_scheduler_moves_its_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dispatch, "ENQUEUE_AGAIN_GRACE_S", GRACE_S)
    with running_simulator(latency_ms=5) as sim:
        number, api = otp_sender(sim)
        body = template_body(number, params={"body": ["424242"]})
        sim.configure(fail_recipients={body["to"]: 130429})
        _, created = api.send(body)

        work_burst("transactional")  # throttled: the retry goes to the scheduled registry

        otp = Message.objects.get(pk=created["id"])
        assert otp.status == "pending" and otp.attempt == 0
        assert otp.last_error_code == 130429
        assert [r["outcome"] for r in sim.records()] == ["130429"]
        sim.configure(fail_recipients={})
        # While the scheduler has its time, the sweep does not queue the retry a second time.
        assert transactional_due_requeue() == 0
        # These workers run no scheduler: the retry job never reaches the queue, and the
        # sweep takes the retry over once the grace after its due time has run out.
        due = otp.next_attempt_at.timestamp() + GRACE_S
        while time.time() < due:
            work_burst("transactional")
            assert Message.objects.get(pk=otp.pk).status == "pending"
            time.sleep(0.1)
        deadline = time.monotonic() + 2.0
        while not transactional_due_requeue():
            assert time.monotonic() < deadline, "the sweep never queued the throttled retry"
            time.sleep(0.05)
        work_burst("transactional")
        otp.refresh_from_db()
        assert otp.status == "sent"
        assert [r["outcome"] for r in sim.records()] == ["130429", "accepted"]
