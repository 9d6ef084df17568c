"""The send trace: the moment each campaign send was granted, beside the receiver's stamp."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from delivery.campaigns.launch import campaign_start
from delivery.engine.send_trace import Grant, grant_seconds, grant_to_stamp, grants_read
from delivery.models import Message
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_campaign_send_is_recorded_at_its_grant_within_the_rate(
    settings: Any, tmp_path: Path
) -> None:
    settings.SEND_TRACE_DIR = str(tmp_path / "grants")
    with running_simulator(latency_ms=20) as sim:
        number = number_on(sim, rate=50, reserve=0)
        campaign = campaign_on(sim, number, recipients=120)
        campaign_start(campaign=campaign)
        work_burst()
        records = sim.records()

    grants = grants_read(tmp_path / "grants")
    sent = set(
        Message.objects.filter(campaign=campaign, status="sent").values_list("pk", flat=True)
    )
    assert len(sent) == 120
    assert sorted(g.message_id for g in grants) == sorted(sent)  # each once
    assert {g.phone_number_id for g in grants} == {number.phone_number_id}
    # The grants never put more than the rate into a calendar second.
    seconds = grant_seconds(grants, {number.phone_number_id: 50})[number.phone_number_id]
    assert seconds["seconds_over_rate"] == 0
    assert 0 < seconds["max_second"] <= 50
    assert max(Counter(int(g.at) for g in grants).values()) == seconds["max_second"]
    # Each simulator stamp follows its grant, by the way to the simulator.
    stamps = [(r["callback_data"], r["wall"]) for r in records if r["outcome"] == "accepted"]
    delays = grant_to_stamp(grants, stamps)
    assert len(delays) == 120
    assert 0 <= delays[0] <= delays[-1] < 5


def test_a_message_sent_twice_is_measured_from_its_latest_grant_before_each_stamp() -> None:
    grants = [
        Grant(7, "pn", 100.0),
        Grant(8, "pn", 100.2),
        Grant(7, "pn", 105.0),  # the resend of message 7
    ]
    stamps = [("wb:7", 100.05), ("wb:8", 100.3), ("wb:7", 105.02), ("wb:9", 101.0), ("x", 1.0)]

    delays = grant_to_stamp(grants, stamps)

    assert [round(d, 3) for d in delays] == [0.02, 0.05, 0.1]
    seconds = grant_seconds(grants, {"pn": 1, "other": 5})
    assert seconds == {
        "pn": {"rate": 1, "max_second": 2, "seconds_over_rate": 1},
        "other": {"rate": 5, "max_second": 0, "seconds_over_rate": 0},
    }
