"""The soak, on demand: ``WHATSBLAST_SOAK=1 .venv/bin/pytest tests/faults/test_soak.py -s``.

An hour by default (WHATSBLAST_SOAK_MINUTES, WHATSBLAST_SOAK_WINDOW_MINUTES,
WHATSBLAST_SOAK_RESTART_MINUTES change it); ``tests.faults.soak`` says what runs. Asserts
what the fault suite asserts of the table against the simulator's records, the same of
the transactional sends, and that no series grows unexplained.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.runner import ROOT
from tests.faults.services import short_tmpdir

MINUTES = float(os.environ.get("WHATSBLAST_SOAK_MINUTES") or 60)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(MINUTES * 60 + 900))]


def test_soak_keeps_every_series_flat_or_explained() -> None:
    directory: Path = short_tmpdir("wbs-")
    out = subprocess.run(  # noqa: S603 - our own module
        [sys.executable, "-m", "tests.faults.soak", "--dir", str(directory)],
        cwd=ROOT,
        check=False,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert out.returncode == 0, f"soak exited {out.returncode}; kept in {directory}"
    report = json.loads(out.stdout)
    print(f"\nsoak: {json.dumps(report, indent=2)}")
    checks = report["checks"]
    assert checks["open_rows"] == 0, checks
    assert set(checks["final_states"]) <= {"delivered", "read", "cancelled"}, checks
    assert checks["duplicates_not_resent"] == 0, checks
    assert checks["duplicates"] <= checks["resent"], checks
    assert checks["accepted_not_final"] == 0, checks
    assert checks["final_not_accepted"] == 0, checks
    # What the engine let go: never more than the rate in any second, with no allowance.
    grants = report["grants"]
    # Every send's grant is recorded (a worker's last quarter second lost in a crash aside).
    assert grants["matched"] >= 0.999 * grants["accepted"], grants
    for number in grants["numbers"].values():
        assert number["seconds_over_rate"] == 0, grants
    # What the simulator stamped, on the same loaded cores: within the fault suite's bound.
    for number in checks["numbers"]:
        assert number["max_second"] <= number["rate_bound"], number
    txn = report["transactional"]
    assert txn["answered_202"] > 0 and txn["lost"] == 0 and txn["duplicates"] == 0, txn
    assert len(report["worker_restarts"]) >= 1
    assert report["summary"]["growing"] == [], report["verdicts"]
