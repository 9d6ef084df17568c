"""What the simulator recorded: rows, counts, per-second histograms, repeats, caps."""

from __future__ import annotations

import json
import time

from delivery.simulator.records import Recorder
from tests.simulator.helpers import post, template_body
from tests.simulator_fixtures import SIM_PHONE_NUMBER_ID


def test_every_request_is_recorded_with_time_number_recipient_and_body(simulator) -> None:
    before = time.time()
    ok = post(simulator.url, template_body(to="+4915100000001", callback="wb:5"))
    bad = post(simulator.url, template_body(name="missing"))

    first, second = simulator.records(bodies=True)
    assert first["phone_number_id"] == SIM_PHONE_NUMBER_ID
    assert (first["to"], first["template"], first["callback_data"]) == (
        "+4915100000001",
        "promo",
        "wb:5",
    )
    assert first["outcome"] == "accepted"
    assert first["wamid"] == ok.json()["messages"][0]["id"]
    assert before <= first["wall"] <= time.time()
    assert first["mono"] <= second["mono"] and first["seq"] < second["seq"]
    assert json.loads(first["body"]) == template_body(to="+4915100000001", callback="wb:5")
    assert (second["outcome"], second["wamid"]) == ("132001", None)
    assert bad.status_code == 404
    assert [r["seq"] for r in simulator.records(after=first["seq"])] == [second["seq"]]


def test_counts_and_histogram_of_accepted_sends(simulator) -> None:
    simulator.configure(fail_recipients={"+4915100000009": 131026})
    for i in range(5):
        post(simulator.url, template_body(to=f"+491510000000{i}"))
    post(simulator.url, template_body(to="+4915100000009"))

    stats = simulator.stats()
    assert (stats["requests"], stats["accepted"]) == (6, 5)
    assert stats["by_outcome"] == {"accepted": 5, "131026": 1}
    assert stats["per_number"][SIM_PHONE_NUMBER_ID] == {"accepted": 5, "131026": 1}
    histogram = simulator.histogram(SIM_PHONE_NUMBER_ID)
    assert sum(histogram.values()) == 5
    assert all(abs(int(second) - time.time()) < 10 for second in histogram)
    assert simulator.histogram("other") == {}


def test_sent_twice_report(simulator) -> None:
    for to in ("+4915100000001", "+4915100000001", "+4915100000002", "+4915100000001"):
        post(simulator.url, template_body(to=to))
    assert simulator.duplicates() == {SIM_PHONE_NUMBER_ID: {"+4915100000001": 3}}


def test_reset_forgets_records_but_keeps_registrations(simulator) -> None:
    first = post(simulator.url, template_body()).json()["messages"][0]["id"]
    simulator.reset()
    assert simulator.stats()["requests"] == 0 and simulator.records() == []
    again = post(simulator.url, template_body())
    # Same sequence number and recipient after the reset, yet a wamid never seen before.
    assert again.ok and again.json()["messages"][0]["id"] != first
    simulator.reset(numbers=True)
    assert not post(simulator.url, template_body()).ok


def test_record_cap_keeps_counting() -> None:
    recorder = Recorder(record_cap=2, body_cap=1)
    for seq in range(1, 5):
        recorder.add(
            seq=seq,
            mono=seq,
            wall=1000.0 + seq,
            phone_number_id="p",
            to=f"+{seq}",
            template="t",
            outcome="accepted",
            callback_data=None,
            body=b"{}",
        )
    assert len(recorder.rows) == 2 and recorder.dropped == 2
    assert recorder.stats()["accepted"] == 4
    assert recorder.histogram("p") == {"1001": 1, "1002": 1, "1003": 1, "1004": 1}
    assert [r["body"] for r in recorder.rows_json(bodies=True)] == [None, "{}"]
