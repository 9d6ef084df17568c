"""A real Prometheus scrapes a running whatsblast through a fault and raises, then clears,
the alert for it.

Prometheus (Debian's package, which .ci/run installs) runs with a generated configuration:
the live server's /metrics scraped every second, rules evaluated every second, its TSDB in
the test's temporary directory. The rules are deploy/prometheus/alerts.yml with every
`for:` cut to a few seconds (the only change; the expressions and thresholds are the
shipped ones), so the test takes seconds rather than the minutes production waits. The
`for:` durations themselves are checked by promtool's unit tests
(tests/observability/test_alert_rules.py).

The faults:

- Redis stops under the running web process. /metrics then cannot read it,
  ``whatsblast_collector_up{source="redis"}`` is 0 and WhatsblastMetricsSourceDown fires;
  Redis comes back and the alert clears.
- Meta refuses every send of a campaign with a retryable error and its retries run out:
  over 50 dead letters and WhatsblastDeadLettersGrowing fires (it has no `for:`; it clears
  once its 15 min window has passed, which this test does not wait for).

Everything is read from Prometheus's HTTP API.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from django.test import override_settings

from campaigns.models import Campaign, Contact, ListMembership
from delivery.campaigns.launch import campaign_start
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact_list
from tests.faults.services import PrivateRedis, short_tmpdir
from whatsblast.core.counters import writes_resume
from whatsblast.core.processes import free_port, wait_for_http

ALERTS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
HOLD = "3s"  # every `for:` in the rules this Prometheus evaluates


@pytest.fixture
def private_redis(settings: Any) -> Iterator[PrivateRedis]:
    directory = short_tmpdir("wbp-")
    server = PrivateRedis(directory).start()
    settings.REDIS_URL = server.url
    yield server
    server.stop()
    writes_resume()
    shutil.rmtree(directory, ignore_errors=True)


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json()["data"]["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        response = requests.get(f"{self.url}/api/v1/alerts", timeout=5)
        response.raise_for_status()
        return [a for a in response.json()["data"]["alerts"] if a["labels"]["alertname"] == name]


def rules_with_short_holds() -> str:
    text = ALERTS.read_text()
    shortened = re.sub(r"^(\s+for:) \S+$", rf"\1 {HOLD}", text, flags=re.MULTILINE)
    rules = [rule for g in yaml.safe_load(shortened)["groups"] for rule in g["rules"]]
    assert {rule.get("for", HOLD) for rule in rules} == {HOLD}
    return shortened


@pytest.fixture
def prometheus(live_server: Any, tmp_path: Path) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: apt-get install prometheus (.ci/run does it)"
    (tmp_path / "alerts.yml").write_text(rules_with_short_holds())
    target = live_server.url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["alerts.yml"],
        "scrape_configs": [{"job_name": "whatsblast", "static_configs": [{"targets": [target]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    promtool = shutil.which("promtool")
    assert promtool
    check = subprocess.run(  # noqa: S603
        [promtool, "check", "config", "prometheus.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(  # noqa: S603
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/-/ready", timeout=30)
        yield Prometheus(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"not within {timeout} s: {what}")


def gauge(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.django_db(transaction=True)
def test_prometheus_fires_and_clears_the_alert_for_redis_down_under_metrics(
    private_redis: PrivateRedis, prometheus: Prometheus
) -> None:
    name = "WhatsblastMetricsSourceDown"
    redis_up = 'whatsblast_collector_up{job="whatsblast",source="redis"}'

    # Healthy: scraped, both sources read, the alert silent.
    wait_until(
        "a scrape of the live server", lambda: gauge(prometheus, 'up{job="whatsblast"}') == 1
    )
    wait_until("redis read by /metrics", lambda: gauge(prometheus, redis_up) == 1)
    assert gauge(prometheus, 'whatsblast_collector_up{source="postgres"}') == 1
    time.sleep(4)  # longer than the hold: a wrongly true expression would be firing now
    assert prometheus.alerts(name) == []

    # The fault: Redis stops.
    private_redis.stop()
    wait_until("redis reported down", lambda: gauge(prometheus, redis_up) == 0)

    def firing() -> list[dict[str, Any]]:
        return [a for a in prometheus.alerts(name) if a["state"] == "firing"]

    waited = wait_until(f"{name} firing", lambda: bool(firing()))
    assert waited >= 2.0, "fired before its (shortened) for: elapsed"
    (alert,) = firing()
    assert alert["labels"]["source"] == "redis"
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["summary"] == (
        "/metrics cannot read redis: engine metrics are missing"
    )
    fired = prometheus.query(f'ALERTS{{alertname="{name}",alertstate="firing"}}')
    assert [series["metric"]["source"] for series in fired] == ["redis"]
    # The database side still answers: only the source that is down alerts.
    assert gauge(prometheus, 'whatsblast_collector_up{source="postgres"}') == 1

    # Redis is back: the alert clears.
    private_redis.start()
    wait_until("redis read again", lambda: gauge(prometheus, redis_up) == 1)
    wait_until(f"{name} cleared", lambda: prometheus.alerts(name) == [])
    assert prometheus.query(f'ALERTS{{alertname="{name}"}}') == []


def wave(first: Campaign, *, recipients: int) -> Campaign:
    """Another campaign of ``first``'s number and template, to new recipients."""
    contact_list = make_contact_list()
    start = Contact.objects.count()
    contacts = Contact.objects.bulk_create(
        Contact(phone=f"+5511{9_1000_0000 + start + i:09d}", name=f"D{i}")
        for i in range(recipients)
    )
    ListMembership.objects.bulk_create(
        ListMembership(contact_list=contact_list, contact=contact) for contact in contacts
    )
    return make_campaign(
        phone_number=first.phone_number,
        template=first.template,
        lists=[contact_list],
        max_attempts=1,
    )


@pytest.mark.django_db(transaction=True)
@override_settings(CAMPAIGN_JOB_BUDGET_SECONDS=1.0)
def test_prometheus_fires_the_alert_for_dead_letters_growing(prometheus: Prometheus) -> None:
    name = "WhatsblastDeadLettersGrowing"
    created = "sum(whatsblast_dead_letters_created_total)"
    # 131000 is retryable: with one attempt allowed, each refusal is a dead letter.
    with running_simulator(latency_ms=5, permanent_fraction=1.0, permanent_code=131000) as sim:
        number = number_on(sim, rate=80, reserve=0.0)
        # A first few, so the counter is already scraped when the wave comes.
        first = campaign_on(sim, number, recipients=3, max_attempts=1)
        campaign_start(campaign=first)
        work_burst()
        wait_until("3 dead letters scraped", lambda: gauge(prometheus, created) == 3)
        time.sleep(2)
        assert prometheus.alerts(name) == []

        campaign_start(campaign=wave(first, recipients=60))
        work_burst()
    wait_until("63 dead letters scraped", lambda: gauge(prometheus, created) == 63)
    wait_until(f"{name} firing", lambda: bool(prometheus.alerts(name)))
    (alert,) = prometheus.alerts(name)
    assert alert["state"] == "firing"  # no for: firing at the first evaluation
    assert alert["labels"]["phone_number_id"] == number.phone_number_id
    assert float(alert["value"]) > 50
    assert alert["annotations"]["summary"].endswith(
        f"messages of number {number.phone_number_id} dead-lettered in 15 min"
    )
