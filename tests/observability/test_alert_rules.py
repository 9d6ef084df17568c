"""The alert rules checked and unit-tested by Prometheus's own promtool.

deploy/prometheus/alerts.test.yml holds promtool unit tests; every alert in alerts.yml must
have a case there in which it fires, so an alert added without a test fails here. .ci/run
installs Debian's prometheus package (which brings promtool) when it is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
ALERTS = PROMETHEUS / "alerts.yml"
ALERT_TESTS = PROMETHEUS / "alerts.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (make test does it)"
    return subprocess.run(  # noqa: S603
        [path, *args], capture_output=True, text=True, cwd=PROMETHEUS, timeout=60, check=False
    )


def alert_names() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def alert_cases() -> list[dict[str, Any]]:
    return [
        case
        for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]


def test_promtool_accepts_the_rules() -> None:
    result = promtool("check", "rules", ALERTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in result.stdout


def test_the_promtool_unit_tests_pass() -> None:
    result = promtool("test", "rules", ALERT_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_fails_a_unit_test_the_rules_do_not_meet(tmp_path: Path) -> None:
    """The unit tests bite: a rule whose `for:` is shorter fires where a test expects silence."""
    rules = ALERTS.read_text()
    assert "for: 10m" in rules
    (tmp_path / ALERTS.name).write_text(rules.replace("for: 10m", "for: 5m"))
    (tmp_path / ALERT_TESTS.name).write_text(ALERT_TESTS.read_text())
    path = shutil.which("promtool")
    assert path
    result = subprocess.run(  # noqa: S603
        [path, "test", "rules", ALERT_TESTS.name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "WhatsblastThroughputErrors" in result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    names = alert_names()
    assert len(names) == 20
    assert len(set(names)) == len(names), "alert names repeat"
    cases = alert_cases()
    firing = {case["alertname"] for case in cases if case.get("exp_alerts")}
    silent = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert not sorted(set(names) - firing), "alerts without a firing unit test"
    assert not sorted(set(names) - silent), "alerts without a silent unit test"
    assert not sorted((firing | silent) - set(names)), "unit tests of alerts that do not exist"


def test_alerts_with_for_are_silent_until_it_elapses() -> None:
    """For each alert with `for:`, a silent case comes before its first firing case."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    held = [rule["alert"] for group in groups for rule in group["rules"] if "for" in rule]
    assert len(held) == 16
    for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]:
        seen_silent: set[str] = set()
        for case in test.get("alert_rule_test", []):
            name = case["alertname"]
            if not case.get("exp_alerts"):
                seen_silent.add(name)
            elif name in held:
                assert name in seen_silent, (
                    f"{test['name']}: {name} fires with no silent case first"
                )
