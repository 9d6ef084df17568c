"""Builds deploy/grafana/whatsblast.json, the Grafana dashboard (import it, pick Prometheus).

    python deploy/grafana/dashboard.py > deploy/grafana/whatsblast.json

The panels read top to bottom the way an operator asks during a peak: is each number
sending at its target, what is Meta answering, is work piling up, is anything stuck or
dead-lettered, are callbacks applied, are the numbers healthy. tests/observability checks
that the JSON is this script's output and that every metric it names is exported.
"""

from __future__ import annotations

import json
import sys
from typing import Any

NUMBER = 'phone_number_id=~"$number"'
_ids = iter(range(1, 1000))
_y = 0


def panel(
    title: str,
    targets: list[tuple[str, str]],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    kind: str = "timeseries",
    description: str = "",
    x: int = 0,
    thresholds: list[tuple[str, float | None]] | None = None,
    mappings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    built = []
    for index, (expr, legend) in enumerate(targets):
        built.append(
            {
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": expr,
                "legendFormat": legend,
                "refId": chr(ord("A") + index),
            }
        )
    steps = [
        {"color": color, "value": value}
        for color, value in (thresholds or [("green", None), ("red", 80)])
    ]
    return {
        "id": next(_ids),
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": height, "w": width, "x": x, "y": _y},
        "targets": built,
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "thresholds": {"mode": "absolute", "steps": steps},
                "mappings": mappings or [],
            },
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "table", "placement": "right"}}
        if kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"},
    }


def row(title: str) -> dict[str, Any]:
    global _y
    built = {
        "id": next(_ids),
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": _y},
        "panels": [],
    }
    _y += 1
    return built


def pair(left: dict[str, Any], right: dict[str, Any]) -> list[dict[str, Any]]:
    global _y
    right["gridPos"]["x"] = 12
    _y += max(left["gridPos"]["h"], right["gridPos"]["h"])
    return [left, right]


QUALITY_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "3": {"text": "GREEN", "color": "green"},
            "2": {"text": "YELLOW", "color": "yellow"},
            "1": {"text": "RED", "color": "red"},
            "0": {"text": "UNKNOWN", "color": "grey"},
        },
    }
]


def panels() -> list[dict[str, Any]]:
    built: list[dict[str, Any]] = [row("Throughput: is each number sending at its target?")]
    built += pair(
        panel(
            "Sends/s vs target, per number",
            [
                (
                    f'sum by (phone_number_id) (rate(whatsblast_sends_total{{outcome="sent",'
                    f"{NUMBER}}}[1m]))",
                    "{{phone_number_id}} sent/s",
                ),
                (
                    f"whatsblast_number_campaign_rate_target{{{NUMBER}}}",
                    "{{phone_number_id}} campaign target",
                ),
                (
                    f"whatsblast_number_effective_rate{{{NUMBER}}}",
                    "{{phone_number_id}} bucket rate now",
                ),
                (
                    f"whatsblast_number_configured_rate{{{NUMBER}}}",
                    "{{phone_number_id}} configured",
                ),
            ],
            unit="reqps",
            description="Sent per second against the campaign share (rate x (1 - reserve)); "
            "the bucket rate drops below the configured one after 130429 and climbs back.",
        ),
        panel(
            "Send outcomes/s",
            [
                (
                    f"sum by (traffic, outcome) (rate(whatsblast_sends_total{{{NUMBER}}}[1m]))",
                    "{{traffic}} {{outcome}}",
                )
            ],
            unit="reqps",
        ),
    )
    built += pair(
        panel(
            "Errors/s by Meta code",
            [
                (
                    f"sum by (code) (rate(whatsblast_send_errors_total{{{NUMBER}}}[5m]))",
                    "{{code}}",
                )
            ],
            unit="reqps",
        ),
        panel(
            "Throughput errors (130429) share of sends",
            [
                (
                    "sum by (phone_number_id) (rate(whatsblast_send_errors_total"
                    f'{{code="130429",{NUMBER}}}[5m])) / sum by (phone_number_id) '
                    f"(rate(whatsblast_sends_total{{{NUMBER}}}[5m]))",
                    "{{phone_number_id}}",
                ),
                (
                    f"whatsblast_number_pause_remaining_seconds{{{NUMBER}}} > 0",
                    "{{phone_number_id}} paused (s left)",
                ),
            ],
            unit="percentunit",
            description="A steady stream means the configured rate is above what Meta grants.",
        ),
    )
    built += pair(
        panel(
            "Cloud API latency (p50 / p95 / p99)",
            [
                (
                    f"histogram_quantile({q}, sum by (le, phone_number_id) "
                    f"(rate(whatsblast_cloud_api_latency_seconds_bucket{{{NUMBER}}}[5m])))",
                    f"{{{{phone_number_id}}}} p{int(q * 100)}",
                )
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
        ),
        panel(
            "Time held by the token bucket (senders waiting, s/s)",
            [
                (
                    "sum by (phone_number_id, traffic) "
                    f"(rate(whatsblast_token_wait_seconds_total{{{NUMBER}}}[1m]))",
                    "{{phone_number_id}} {{traffic}}",
                )
            ],
            unit="short",
            description="About 1 per sender when the bucket paces sending; near 0 when the "
            "API latency or the worker count is the limit instead.",
        ),
    )
    built.append(row("Backlog: is work piling up?"))
    built += pair(
        panel(
            "Pending messages per running campaign",
            [("whatsblast_campaign_pending_messages", "campaign {{campaign_id}}")],
        ),
        panel(
            "Oldest due message waiting, by class",
            [("whatsblast_oldest_pending_age_seconds", "{{traffic}}")],
            unit="s",
            thresholds=[("green", None), ("orange", 10), ("red", 30)],
            description="Transactional messages should leave within seconds.",
        ),
    )
    built += pair(
        panel(
            "RQ jobs by queue and state",
            [("whatsblast_rq_jobs", "{{queue}} {{state}}")],
        ),
        panel(
            "Live workers per queue",
            [("whatsblast_rq_workers", "{{queue}}")],
            kind="stat",
            thresholds=[("red", None), ("green", 1)],
        ),
    )
    built.append(row("Reliability: anything stuck or dead-lettered?"))
    built += pair(
        panel(
            "Dead letters: open, and created per hour",
            [
                ("sum(whatsblast_dead_letters_open)", "open"),
                ("sum(increase(whatsblast_dead_letters_created_total[1h]))", "created in 1h"),
            ],
        ),
        panel(
            "Messages in doubt (sending / unknown) and stuck",
            [
                ("whatsblast_messages_in_doubt", "{{status}}"),
                ("whatsblast_messages_stuck", "{{status}} stuck"),
                ("whatsblast_messages_in_doubt_oldest_age_seconds", "{{status}} oldest (s)"),
            ],
            description="Stuck: past the lease (sending) or the evidence window (unknown); "
            "the reconciler should have moved them.",
        ),
    )
    built.append(row("Webhooks: are Meta's callbacks applied?"))
    built += pair(
        panel(
            "Callbacks received and applied /s",
            [
                (
                    "sum by (result) (rate(whatsblast_webhook_events_received_total[1m]))",
                    "received {{result}}",
                ),
                (
                    "sum by (result) (rate(whatsblast_webhook_events_applied_total[1m]))",
                    "applied {{result}}",
                ),
                ("rate(whatsblast_webhook_statuses_total[1m])", "statuses"),
                ("rate(whatsblast_webhook_message_updates_total[1m])", "message updates"),
                ("rate(whatsblast_webhook_unmatched_statuses_total[1m])", "unmatched"),
            ],
            unit="reqps",
        ),
        panel(
            "Applier backlog and lag",
            [
                ("whatsblast_webhook_events_pending", "events pending"),
                ("whatsblast_webhook_apply_lag_seconds", "lag (s)"),
                ("whatsblast_webhook_unmatched_waiting", "unmatched statuses waiting"),
            ],
        ),
    )
    built.append(row("Numbers and accounts"))
    built += pair(
        panel(
            "Quality rating",
            [(f"whatsblast_number_quality_score{{{NUMBER}}}", "{{phone_number_id}}")],
            kind="stat",
            thresholds=[("grey", None), ("red", 1), ("yellow", 2), ("green", 3)],
            mappings=QUALITY_MAPPINGS,
        ),
        panel(
            "Messaging limit (unique users / 24 h)",
            [("max by (waba_id, tier) (whatsblast_account_messaging_limit)", "{{waba_id}}")],
            kind="stat",
            thresholds=[("blue", None)],
        ),
    )
    built += pair(
        panel(
            "Numbers",
            [("whatsblast_number_info", "{{display_phone_number}} {{quality}} {{tier}}")],
            kind="stat",
            thresholds=[("blue", None)],
        ),
        panel(
            "Metrics sources",
            [
                ("whatsblast_collector_up", "{{source}} up"),
                ("whatsblast_collector_duration_seconds", "scrape (s)"),
            ],
            kind="stat",
            thresholds=[("red", None), ("green", 1)],
        ),
    )
    return built


def dashboard() -> dict[str, Any]:
    return {
        "title": "whatsblast",
        "uid": "whatsblast-overview",
        "tags": ["whatsblast"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "15s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                },
                {
                    "name": "number",
                    "label": "Phone number id",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": "label_values(whatsblast_number_info, phone_number_id)",
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                },
            ]
        },
        "annotations": {"list": []},
        "panels": panels(),
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(dashboard(), indent=2) + "\n")
