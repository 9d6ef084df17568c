"""The out-of-process surface: the /_sim/ control API, the templates API and the command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import requests

from tests.simulator.helpers import post, template_body

ROOT = Path(__file__).resolve().parents[2]


def test_register_configure_and_read_over_http(simulator) -> None:
    base = f"{simulator.url}/_sim"
    assert requests.post(
        f"{base}/numbers",
        json={"numbers": [{"phone_number_id": "555", "access_token": "tk", "rate": 50}]},
        timeout=5,
    ).ok
    assert requests.post(
        f"{base}/templates",
        json={
            "templates": [
                {"name": "otp", "language": "pt_BR", "body_params": 1, "category": "AUTHENTICATION"}
            ]
        },
        timeout=5,
    ).ok
    config = requests.post(
        f"{base}/config", json={"latency_ms": 1, "app_secret": "s"}, timeout=5
    ).json()
    assert config["latency_ms"] == 1 and config["app_secret"] == "***"

    body = template_body(name="otp")
    body["template"]["language"]["code"] = "pt_BR"
    assert post(simulator.url, body, number="555", token="tk").ok

    stats = requests.get(f"{base}/stats", timeout=5).json()
    assert stats["per_number"]["555"] == {"accepted": 1}
    records = requests.get(f"{base}/records", params={"bodies": "1"}, timeout=5).json()
    assert records["records"][0]["body"] is not None
    histogram = requests.get(
        f"{base}/histogram", params={"phone_number_id": "555"}, timeout=5
    ).json()
    assert sum(histogram.values()) == 1
    assert requests.get(f"{base}/duplicates", timeout=5).json() == {}
    assert requests.get(f"{base}/webhooks/idle", timeout=5).json()["idle"] is True
    assert requests.post(f"{base}/reset", json={}, timeout=5).ok
    assert requests.get(f"{base}/stats", timeout=5).json()["requests"] == 0


def test_bad_config_is_a_400(simulator) -> None:
    response = requests.post(f"{simulator.url}/_sim/config", json={"mode": "x"}, timeout=5)
    assert response.status_code == 400 and "mode" in response.json()["error"]


def test_message_templates_are_paged_like_graph(simulator) -> None:
    for i in range(5):
        simulator.add_template(name=f"t{i}", language="en_US", body_params=i)
    url = f"{simulator.url}/v23.0/102290129340398/message_templates"
    headers = {"Authorization": "Bearer x"}

    names, listed = [], {}
    page = requests.get(url, params={"limit": 3}, headers=headers, timeout=5).json()
    while True:
        names += [t["name"] for t in page["data"]]
        listed.update({t["name"]: t for t in page["data"]})
        assert len(page["data"]) <= 3
        if "next" not in page["paging"]:
            break
        after = page["paging"]["cursors"]["after"]
        assert f"after={after}" in page["paging"]["next"]
        page = requests.get(page["paging"]["next"], headers=headers, timeout=5).json()
    assert names == ["promo", "order_update", "welcome_named", "t0", "t1", "t2", "t3", "t4"]
    t2 = listed["t2"]
    assert t2["status"] == "APPROVED" and t2["language"] == "en_US"
    assert t2["components"] == [{"type": "BODY", "text": "Message: {{1}} {{2}}"}]
    assert requests.get(url, timeout=5).status_code == 401
    assert (
        requests.get(url.replace("102290129340398", "9"), headers=headers, timeout=5).json()["data"]
        == []
    )


def test_management_command_serves_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "simulator",
            "--port=0",
            "--number=1:tk:10",
            "--template=promo:en_US:1",
            "--latency-ms=5",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        line = proc.stdout.readline().strip()
        url = line.rsplit(" ", 1)[1]
        assert line.startswith("simulator listening on http://127.0.0.1:")
        assert post(url, template_body(), number="1", token="tk").ok
        assert requests.get(f"{url}/_sim/stats", timeout=5).json()["accepted"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        proc.stdout.close()
