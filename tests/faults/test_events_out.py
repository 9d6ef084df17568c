"""Events out under faults: the issue's must-show scenario (``tests.faults.events_scenario``).

A campaign with a subscription for every event type; its receiver refuses connections for
30 s and answers 500 for 30 s in the middle of the run; a send worker is SIGKILLed during
the outage and an events worker while the receiver holds a batch it already read. Then:
every event is delivered, none lost or invented, duplicates only as repeated event ids
with identical content, every POST's signature valid, order kept (overall and per
message: sent, delivered, read), an event for every message Meta accepted, and the
campaign's started and completed events. The send path's invariants hold as in the other
fault scenarios.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.events_scenario import run_events_out
from tests.faults.runner import rate_bound
from tests.faults.services import short_tmpdir

LONG = os.environ.get("WHATSBLAST_FAULTS_LONG") == "1"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if LONG else 420)]

# The workers back off at most 2 s (EVENTS_BACKOFF_MAX_S): the receiver's first 2xx after it
# is healthy comes within that, with room for a loaded machine.
RECOVERY_BOUND_S = 10.0


@pytest.fixture
def workdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A short private directory (Unix socket paths stay under 108 bytes); kept on failure."""
    directory = short_tmpdir()
    failed_before = request.session.testsfailed
    yield directory
    if request.session.testsfailed == failed_before:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"events fault run kept for inspection: {directory}")


def _assert_sends_intact(sends: dict[str, Any], numbers: list[dict[str, Any]]) -> None:
    states = sends["final_states"]
    assert sends["open_rows"] == 0, states
    assert set(states) <= {"delivered", "read"}, states
    assert sum(states.values()) == sends["recipients"]
    assert sends["duplicates_not_resent"] == 0, sends
    assert sends["duplicates"] <= sends["resent"], sends
    assert sends["accepted_not_final"] == 0, sends
    assert sends["final_not_accepted"] == 0, sends
    for number in numbers:
        assert number["max_second"] <= rate_bound(number["rate"]), number
        assert number["grant_seconds_over_rate"] == 0, number


def test_receiver_down_60s_and_workers_killed_every_event_arrives(workdir: Path) -> None:
    report = run_events_out(base_dir=workdir, long=LONG)
    shown = {k: v for k, v in report.items() if k not in ("timeline", "numbers")}
    print(f"\nevents_out: {json.dumps(shown)}")
    events = report["events"]

    # The faults happened as planned.
    assert report["receiver_down_s"] >= 59, report
    assert report["send_worker_kill"]["rows_sending_at_kill"] > 0, report
    assert events["posts_held"] == 1 and report["events_worker_kill"]["events_in_held_post"] > 0
    # With PostgreSQL never away here, the events workers' loops never failed.
    failures = report["failures_logged"]
    assert failures.get("worker_loop_errors", 0) == 0, failures
    # Retried through the outage, promptly (backoff at most 2 s): refused connections, 500s.
    assert failures.get("connection_error", 0) >= 3, failures
    assert events["posts_answered_500"] >= 3, events

    # None lost, none invented: the set of ids received is delivery_event's, gapless.
    assert events["events_total"] > 2 * report["recipients"], events
    assert events["seq_gaps"] == 0, events
    assert events["missing"] == 0, events
    assert events["invented"] == 0, events
    assert events["unique_events_received"] == events["events_total"], events
    assert events["mismatched_with_stored"] == 0, events
    assert events["dead_letters"] == 0, events
    subscription = events["subscription"]
    assert subscription["active"] and subscription["cursor"] == events["max_seq"], subscription

    # Duplicates only as repeated ids with the same content; the batch the killed worker
    # had sent (read by the receiver, never acknowledged) came again.
    assert events["duplicates_differing"] == 0, events
    assert events["duplicated_ids"] >= report["events_worker_kill"]["events_in_held_post"], events

    # Every POST signed with the subscription's secret, and for it only.
    assert events["signatures_invalid"] == 0, events
    assert events["foreign_posts"] == 0, events

    # Order: overall by sequence, and per message sent -> delivered -> read.
    assert events["out_of_order"] == 0, events
    assert events["message_seq_disorder"] == 0, events
    assert events["message_status_disorder"] == 0, events

    # An event for every message Meta accepted: its message.sent, and last its final status.
    assert events["message_sent_events"] == events["messages_sent_or_beyond"], events
    assert events["messages_sent_or_beyond"] == report["recipients"], events
    assert events["accepted_messages_without_sent_event"] == 0, events
    assert events["messages_sent_twice"] == 0, events
    assert events["last_event_not_final_status"] == 0, events
    assert events["campaign_events"].get("campaign.started") == 1, events
    assert events["campaign_events"].get("campaign.completed") == 1, events

    # Recovery: the first batch taken within the backoff's reach of the receiver's return.
    assert report["first_accepted_after_recovery_s"] is not None, report
    assert report["first_accepted_after_recovery_s"] <= RECOVERY_BOUND_S, report
    assert report["backlog_drained_s"] is not None, report

    _assert_sends_intact(report["sends"], report["numbers"])
