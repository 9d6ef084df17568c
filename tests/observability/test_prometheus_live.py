"""A real Prometheus scrapes a running whatsblast through a fault and raises, then clears,
the alert for it.

Prometheus (Debian's package, which make test installs) runs with a generated configuration:
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
- The applier is away while callbacks wait (their age set to five minutes): over 120 s of
  lag and WhatsblastWebhookLag fires; the applier runs and it clears.
- Meta throttles every send (130429), until the rate has been cut twice, while a real
  worker process and the ticker send a campaign: the number pauses and its rate is cut,
  WhatsblastThroughputErrors (a number being throttled) and WhatsblastRateBelowConfigured
  (throughput below target) fire; the worker goes on sending cleanly, the rate creeps
  back, the errors are diluted, and both clear.

Everything is read from Prometheus's HTTP API.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from django.test import override_settings
from django.utils import timezone

from campaigns.models import Campaign, CampaignStatus, Contact, ListMembership, PhoneNumber
from delivery.campaigns.launch import campaign_start
from tests.engine_support import campaign_on, number_on, running_simulator, work_burst
from tests.factories import make_campaign, make_contact_list
from tests.faults.services import PrivateRedis, short_tmpdir
from tests.webhooks.support import fixture_json, meta_bytes
from webhooks.applier import events_drain
from webhooks.models import WebhookEvent
from webhooks.services import event_store
from whatsblast.core.counters import writes_resume
from whatsblast.core.processes import (
    ProcessGroup,
    free_port,
    service_environment,
    wait_for_http,
)

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


def prometheus_ready(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/-/ready", timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def prometheus(live_server: Any, tmp_path: Path) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: apt-get install prometheus (make test does it)"
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
        # /-/ready answers 503 while the TSDB opens and the rules load; queries made then
        # are refused with 503 too, so wait for its 200, not for any answer.
        wait_for_http(f"http://127.0.0.1:{port}/-/ready", timeout=30)
        wait_until("prometheus ready", lambda: prometheus_ready(port), timeout=60)
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


def wave(first: Campaign, *, recipients: int, max_attempts: int = 1) -> Campaign:
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
        max_attempts=max_attempts,
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


def firing(prom: Prometheus, name: str) -> list[dict[str, Any]]:
    return [a for a in prom.alerts(name) if a["state"] == "firing"]


@pytest.mark.django_db(transaction=True)
def test_prometheus_fires_and_clears_the_alert_for_webhook_lag(prometheus: Prometheus) -> None:
    """The applier is down while callbacks wait: the oldest has waited past the threshold
    (120 s), WhatsblastWebhookLag fires; the applier runs, the lag is 0, the alert clears."""
    name = "WhatsblastWebhookLag"
    lag = "whatsblast_webhook_apply_lag_seconds"
    event_store(body=meta_bytes(fixture_json("status_delivered")))
    wait_until("a fresh event's lag scraped", lambda: (gauge(prometheus, lag) or 0) > 0)
    time.sleep(4)  # past the hold: a lag of seconds must not alert
    assert prometheus.alerts(name) == []

    # The same backlog, as it stands after the applier has been away for five minutes.
    WebhookEvent.objects.update(received_at=timezone.now() - timedelta(seconds=300))
    wait_until("the old lag scraped", lambda: (gauge(prometheus, lag) or 0) > 290)
    waited = wait_until(f"{name} firing", lambda: bool(firing(prometheus, name)))
    assert waited >= 2.0, "fired before its (shortened) for: elapsed"
    (alert,) = firing(prometheus, name)
    assert float(alert["value"]) > 290
    assert alert["annotations"]["summary"].startswith("Stored callbacks wait 5m")

    events_drain(budget_seconds=30)
    wait_until("the lag back to 0", lambda: gauge(prometheus, lag) == 0)
    wait_until(f"{name} cleared", lambda: prometheus.alerts(name) == [])


@pytest.mark.django_db(transaction=True)
def test_prometheus_fires_and_clears_the_alerts_for_a_throttled_number(
    prometheus: Prometheus, tmp_path: Path
) -> None:
    """Meta answers 130429 to every send for a moment while a worker process and the ticker
    send: the number pauses and its rate is cut, WhatsblastThroughputErrors and
    WhatsblastRateBelowConfigured fire. Meta lets it send again: the worker goes on, the
    rate creeps back, and with enough clean sends both clear."""
    errors, below = "WhatsblastThroughputErrors", "WhatsblastRateBelowConfigured"
    env = {**service_environment(), "DEBUG": "1", "LOG_LEVEL": "WARNING"}
    workers = ProcessGroup(tmp_path / "logs", env)
    try:
        with running_simulator(latency_ms=5) as sim:
            number = number_on(sim, rate=200, reserve=0.0)
            pnid = number.phone_number_id
            effective = f'whatsblast_number_effective_rate{{phone_number_id="{pnid}"}}'
            workers.manage("worker", "rqworker", "transactional", "campaigns", "maintenance")
            workers.manage("ticker", "ticker", "--every", "1")
            first = campaign_on(sim, number, recipients=200, max_attempts=20)
            campaign_start(campaign=first)
            wait_until("the first campaign sent", lambda: done(first, workers), timeout=60)
            wait_until("the number's rate scraped", lambda: gauge(prometheus, effective) == 200)
            time.sleep(4)  # past the hold: clean sending must not alert
            assert prometheus.alerts(errors) == [] and prometheus.alerts(below) == []

            # The fault: 130429 on every send until the rate has been cut twice (below
            # 0.8 x 200: two pauses in a streak), then sends go through again.
            throttled_wave = wave(first, recipients=400, max_attempts=20)
            sim.configure(mode="all_throttle")
            campaign_start(campaign=throttled_wave)
            wait_until("the rate cut twice", lambda: effective_rate(number) < 160, timeout=60)
            sim.configure(mode="normal")
            wait_until(f"{errors} firing", lambda: bool(firing(prometheus, errors)), timeout=60)
            (alert,) = firing(prometheus, errors)
            assert alert["labels"]["phone_number_id"] == pnid
            assert float(alert["value"]) > 0.02
            wait_until(f"{below} firing", lambda: bool(firing(prometheus, below)), timeout=60)
            wait_until("the throttled wave sent", lambda: done(throttled_wave, workers), 90)

            # Clean sending: the rate creeps back up and the errors are a vanishing share.
            clean_wave = wave(first, recipients=8000, max_attempts=20)
            campaign_start(campaign=clean_wave)
            wait_until(f"{below} cleared", lambda: prometheus.alerts(below) == [], timeout=120)
            wait_until(f"{errors} cleared", lambda: prometheus.alerts(errors) == [], timeout=120)
            assert effective_rate(number) >= 160
            # Nothing lost to the throttling: every recipient of the wave was sent, once.
            assert set(throttled_wave.messages.values_list("status", flat=True)) == {"sent"}
            assert sim.duplicates() == {}
    finally:
        workers.stop()


def effective_rate(number: PhoneNumber) -> float:
    """The number's rate as the adaptive limiter has it (the configured one when not cut)."""
    number.refresh_from_db()
    return number.effective_rate or number.rate_per_second


def done(campaign: Campaign, workers: ProcessGroup) -> bool:
    workers.check()  # a worker that died fails the test with its log
    campaign.refresh_from_db()
    return campaign.status == CampaignStatus.COMPLETED
