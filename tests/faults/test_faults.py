"""The fault suite: a campaign at full speed with two workers, broken on purpose.

Each test runs one scenario of ``tests.faults.runner`` in its own Python process against
its own PostgreSQL and Redis (the runner starts, kills and restarts them; the machine's
shared servers are never touched), prints the scenario's JSON report, and asserts:

* the campaign completes and every recipient ends in exactly one final state (no row left
  pending, sending or unknown);
* the simulator accepted no recipient twice, except recipients whose ambiguous send the
  campaign's resend policy put back ("ambiguous settled: pending");
* every recipient the simulator accepted is recorded as sent/delivered/read, and every row
  recorded so was accepted;
* no second of the simulator's histogram holds more than the number's rate.

The network scenarios run the two workers as hosts in network namespaces
(``tests.faults.network``), reaching PostgreSQL, Redis and the simulator over TCP; one host
is partitioned from Redis, from PostgreSQL, or has its Cloud API path slowed (delay 2 s,
5 % loss) for 20 s. Where namespaces cannot be made (not root, no ``ip``/``iptables``, a
kernel that refuses), those three say why and are skipped; the others run as before.

CI sizes: 3,000 recipients at 200 msg/s (network scenarios: 3,000 at 100 msg/s).
WHATSBLAST_FAULTS_LONG=1 runs the issue's sizes (50,000 recipients, 5xx for 30 s, timeouts
for 10 s, a 60 s webhook backlog).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.network import unavailable_reason
from tests.faults.runner import rate_bound, run_fault
from tests.faults.services import short_tmpdir

LONG = os.environ.get("WHATSBLAST_FAULTS_LONG") == "1"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600 if LONG else 420)]


def _run(fault: str, workdir: Path) -> dict[str, Any]:
    report = run_fault(fault, long=LONG, base_dir=workdir)
    shown = {k: v for k, v in report.items() if k != "timeline"}
    print(f"\nfault {fault}: {json.dumps(shown)}")
    return report


def _assert_nothing_lost_nothing_doubled(report: dict[str, Any], *, finals: set[str]) -> None:
    states = report["final_states"]
    assert report["open_rows"] == 0, states
    assert set(states) <= finals, states
    assert sum(states.values()) == report["recipients"]
    # A recipient accepted twice is allowed only where the resend policy resolved an
    # ambiguous send without evidence, and then only that recipient.
    assert report["duplicates_not_resent"] == 0, report
    assert report["duplicates"] <= report["resent"]
    assert report["accepted_not_final"] == 0, report
    assert report["final_not_accepted"] == 0, report
    # Held to the rate + max(3, 25 %) allowance, never to the rate itself: on CI's loaded
    # 2-core run the simulator (the instrument) stamps a send when its event loop reads it,
    # and a late read moves sends into the next second (docs/faults.md). The seconds over
    # the rate itself are reported; on a quiet machine every scenario has 0.
    for number in report["numbers"]:
        assert number["max_second"] <= rate_bound(number["rate"]), number
        assert number["seconds_over_bound"] == 0, number
    # Counted when the send log let each send go (the workers' send trace), every second
    # holds the rate at most, with no allowance, whatever the fault.
    for number in report["numbers"]:
        assert number["grant_seconds_over_rate"] == 0, number


@pytest.fixture
def workdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A short private directory (Unix socket paths stay under 108 bytes); kept on failure."""
    directory = short_tmpdir()
    failed_before = request.session.testsfailed
    yield directory
    if request.session.testsfailed == failed_before:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"fault run kept for inspection: {directory}")


def test_sigkill_of_a_worker_mid_batch_twice(workdir: Path) -> None:
    report = _run("sigkill", workdir)
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})
    kills = report["fault_details"]["kills"]
    assert len(kills) == 2
    # Killed while holding sends in flight: the rows they held were recovered.
    assert all(kill["rows_sending_at_kill"] > 0 for kill in kills), kills


def test_redis_restart_rebuilds_work_and_keeps_limits(workdir: Path) -> None:
    report = _run("redis_restart", workdir)
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})
    # The 24 h unique-user budget survived the loss of its Redis set.
    limit = report["messaging_limit"]
    assert limit["unique_users_reached"] <= limit["limit"], limit


def test_postgres_restart_leaves_no_message_in_a_wrong_state(workdir: Path) -> None:
    report = _run("postgres_restart", workdir)
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})


def test_simulator_5xx_then_timeouts_then_throttling(workdir: Path) -> None:
    report = _run("simulator_faults", workdir)
    # Retries are bounded by the campaign's max_attempts: a row may end dead, never sent.
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered", "dead"})
    assert report["dead_but_accepted"] == 0
    assert report["dead_without_letter"] == 0
    phases = {p["mode"]: p["requests_by_outcome"] for p in report["fault_details"]["phases"]}
    # Each phase really was seen by the engine: errors, held answers, throttling.
    assert sum(phases["all_5xx"].values()) > 0
    assert phases["all_timeout"].get("accepted_timeout", 0) > 0
    assert phases["all_throttle"].get("130429", 0) > 0
    assert report["ambiguous_rows"] > 0


def test_webhook_applier_down_then_back(workdir: Path) -> None:
    report = _run("webhook_backlog", workdir)
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})
    details = report["fault_details"]
    assert details["pending_events_at_restart"] > 0
    assert details["rows_sent_not_delivered_at_restart"] > 0


def test_four_workers_on_two_hosts_hold_ten_numbers_limits(workdir: Path) -> None:
    """Scale: 4 worker processes in two process groups send for 10 numbers at once."""
    report = _run("scale", workdir)
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})
    numbers = report["numbers"]
    assert len(numbers) == 10
    assert report["workers"] == 4
    assert report["duplicates"] == 0
    # Every number was sent by several chains on several workers, and each number's own
    # histogram stayed under its own rate (checked above per number).
    assert all(n["seconds"] >= 3 for n in numbers), numbers


# --- worker hosts on a real network ---------------------------------------------------------

_NO_NETWORK = unavailable_reason()


@pytest.fixture
def network_allowed() -> None:
    # scripts/test.sh installs iproute2 and iptables; without root or namespaces these
    # scenarios fail, saying why (every other scenario still runs).
    assert _NO_NETWORK is None, f"network fault scenarios cannot run: {_NO_NETWORK}"


def _assert_network_fault(report: dict[str, Any]) -> dict[str, Any]:
    # Two worker processes on two hosts share one number's bucket through Redis; on the
    # loaded 2-core machine the simulator has seen a whole second at 104 (of 100) outside
    # any fault, so these hold the documented bound (rate + max(3, 25 %)), not the rate.
    _assert_nothing_lost_nothing_doubled(report, finals={"delivered"})
    details = report["fault_details"]
    # The campaign went on while one host was cut off or slowed: the other host sent.
    assert details["accepted_during"] >= 300, details
    # Namespaces, veths and the bridge are gone with the run.
    assert report["network_leftovers"] == [], report["network_leftovers"]
    return details


@pytest.mark.usefixtures("network_allowed")
def test_worker_host_partitioned_from_redis(workdir: Path) -> None:
    report = _run("partition_redis", workdir)
    _assert_network_fault(report)
    # The host stopped sending before its slot could pass on; the rows it had claimed went
    # through the reconciler (lease expiry) and only those were resent by policy.
    assert report["lease_expired_rows"] > 0, report
    assert report["resent"] <= report["lease_expired_rows"] + report["ambiguous_rows"]


@pytest.mark.usefixtures("network_allowed")
def test_worker_host_partitioned_from_postgres(workdir: Path) -> None:
    report = _run("partition_postgres", workdir)
    _assert_network_fault(report)


@pytest.mark.usefixtures("network_allowed")
def test_cloud_api_path_slowed_on_one_host(workdir: Path) -> None:
    report = _run("slow_cloud_api", workdir)
    details = _assert_network_fault(report)
    # netem's delay really held the host's packets; its sends timed out (ambiguous) and
    # were settled by their late webhooks or resent by policy, never sent twice unseen.
    assert details["packets_delayed"] > 0, details
    assert report["ambiguous_rows"] > 0, report
