"""The Grafana dashboard and the alert rules only use metrics that /metrics exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from django.test import override_settings

from delivery.campaigns.launch import campaign_start
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.observability.support import scrape
from tests.webhooks.support import APP_SECRET, URL, fixture_bytes, sign

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "whatsblast.json"
ALERTS = DEPLOY / "prometheus" / "alerts.yml"


def dashboard_expressions() -> list[str]:
    def walk(panels: list[dict[str, Any]]) -> list[str]:
        found = []
        for panel in panels:
            found += [target["expr"] for target in panel.get("targets", [])]
            found += walk(panel.get("panels", []))
        return found

    return walk(json.loads(DASHBOARD.read_text())["panels"])


def alert_expressions() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def metric_names(node: Any) -> set[str]:
    """Every metric a PromQL expression selects, from its syntax tree."""
    if isinstance(node, promql_parser.VectorSelector):
        return {node.name}
    names: set[str] = set()
    for attribute in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(node, attribute, None)
        if child is not None and not isinstance(child, str | int | float):
            names |= metric_names(child)
    for child in getattr(node, "args", None) or ():
        names |= metric_names(child)
    return names


def referenced_metrics() -> set[str]:
    names: set[str] = set()
    for expr in dashboard_expressions() + alert_expressions():
        names |= metric_names(promql_parser.parse(expr))  # raises on a syntax error
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    for variable in variables:
        if variable["type"] == "query":
            inner = variable["query"].removeprefix("label_values(").split(",")[0]
            names.add(inner.strip())
    return names


def test_the_dashboard_file_is_what_its_builder_writes() -> None:
    built = subprocess.run(  # noqa: S603
        [sys.executable, str(DEPLOY / "grafana" / "dashboard.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(built) == json.loads(DASHBOARD.read_text())


def test_the_alerts_cover_the_signals_an_operator_needs() -> None:
    rules = {
        rule["alert"]: rule
        for group in yaml.safe_load(ALERTS.read_text())["groups"]
        for rule in group["rules"]
    }
    for name in (
        "WhatsblastThroughputErrors",
        "WhatsblastDeadLettersGrowing",
        "WhatsblastTransactionalMessagesLate",
        "WhatsblastMessagesStuck",
        "WhatsblastWebhookLag",
        "WhatsblastQualityDropped",
    ):
        assert name in rules
        assert rules[name]["labels"]["severity"] in ("info", "warning", "critical")
        assert rules[name]["annotations"]["summary"]
    assert "130429" in rules["WhatsblastThroughputErrors"]["expr"]


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0, WHATSAPP_APP_SECRET=APP_SECRET)
def test_every_metric_in_the_dashboard_and_alerts_is_exported(client) -> None:
    referenced = referenced_metrics()
    assert len(referenced) >= 25
    assert all(name.startswith("whatsblast_") for name in referenced), referenced

    # Activity for every series: sends paced by the bucket, Meta's refusals, a dead letter,
    # callbacks, and a campaign still waiting when the scrape comes.
    with running_simulator(latency_ms=5) as sim:
        number = number_on(sim, rate=40, reserve=0.0)
        done = campaign_on(sim, number, recipients=40, max_attempts=1)
        sim.configure(fail_recipients={"+5511900000003": 131026, "+5511900000005": 131000})
        campaign_start(campaign=done)
        work_burst()
        waiting = campaign_on(sim, number_on(sim, rate=10), recipients=5)
        campaign_start(campaign=waiting)
    body = fixture_bytes("status_sent")
    client.post(URL, body, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=sign(body))

    exported = scrape(client).names

    missing = sorted(referenced - exported)
    assert not missing, f"referenced but not exported: {missing}"
