"""The engine's Redis counters: what a flush writes, in how many round trips, and their export."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis
from django.test import override_settings

from delivery import metrics
from delivery.cloud.client import Accepted, ApiError
from delivery.messages import Settlement
from delivery.metrics import SendMeter
from tests.factories import make_phone_number
from tests.observability.support import scrape
from tests.webhooks.support import APP_SECRET, URL, fixture_bytes, sign
from webhooks.applier import events_drain
from whatsblast.core import counters
from whatsblast.core.redis import get_redis

pytestmark = pytest.mark.django_db


def accepted(latency: float) -> Accepted:
    return Accepted(wamid="wamid.x", wa_id="1", message_status=None, latency_s=latency)


def error(code: int | None, latency: float = 0.2, http_status: int | None = 400) -> ApiError:
    return ApiError(
        http_status=http_status,
        code=code,
        subcode=None,
        title="t",
        details="",
        retry_after_s=None,
        may_have_reached_meta=False,
        latency_s=latency,
    )


class CountingPipelines(redis.Redis):
    """The real client, counting the pipelines it executes."""

    executed = 0

    def pipeline(self, *args, **kwargs):
        pipe = super().pipeline(*args, **kwargs)
        original = pipe.execute

        def execute(*a, **kw):
            CountingPipelines.executed += 1
            return original(*a, **kw)

        pipe.execute = execute
        return pipe


@pytest.fixture(autouse=True)
def metrics_writes_on():
    counters.writes_resume()
    yield
    counters.writes_resume()


def test_a_flushed_batch_is_one_round_trip_and_every_series_adds_up(settings) -> None:
    conn = CountingPipelines.from_url(settings.REDIS_URL)
    CountingPipelines.executed = 0
    meter = SendMeter("pn-1", "campaign", conn=conn)
    results = [accepted(0.03) for _ in range(150)] + [
        error(131026),
        error(130429),
        error(130429),
        error(None, latency=10.0, http_status=None),
    ]
    dead = Settlement(message_id=1, status="dead", attempt=5, pair_limit_hits=0)
    meter.flush(results=results, settlements=[dead, None])

    assert CountingPipelines.executed == 1
    m = scrape()
    assert (
        m.value(
            "whatsblast_sends_total", phone_number_id="pn-1", traffic="campaign", outcome="sent"
        )
        == 150
    )
    assert (
        m.value(
            "whatsblast_sends_total",
            phone_number_id="pn-1",
            traffic="campaign",
            outcome="throttled",
        )
        == 2
    )
    assert (
        m.value(
            "whatsblast_sends_total",
            phone_number_id="pn-1",
            traffic="campaign",
            outcome="permanent",
        )
        == 1
    )
    assert m.value("whatsblast_send_errors_total", phone_number_id="pn-1", code="130429") == 2
    assert m.value("whatsblast_send_errors_total", phone_number_id="pn-1", code="transport") == 1
    assert m.value("whatsblast_dead_letters_created_total", phone_number_id="pn-1") == 1
    assert m.value("whatsblast_cloud_api_latency_seconds_count", phone_number_id="pn-1") == 154
    assert (
        m.value("whatsblast_cloud_api_latency_seconds_bucket", phone_number_id="pn-1", le="0.05")
        == 150
    )
    assert (
        m.value("whatsblast_cloud_api_latency_seconds_bucket", phone_number_id="pn-1", le="0.25")
        == 153
    )
    assert (
        m.value("whatsblast_cloud_api_latency_seconds_bucket", phone_number_id="pn-1", le="+Inf")
        == 154
    )
    total = m.value("whatsblast_cloud_api_latency_seconds_sum", phone_number_id="pn-1")
    assert total == pytest.approx(150 * 0.03 + 3 * 0.2 + 10.0)


def test_token_wait_runs_from_a_short_grant_to_a_full_one() -> None:
    meter = SendMeter("pn-2", "transactional")
    meter.tokens(asked=10, granted=10)  # not waiting
    meter.tokens(asked=10, granted=3)
    time.sleep(0.2)
    meter.tokens(asked=10, granted=0)
    time.sleep(0.1)
    meter.tokens(asked=10, granted=10)
    meter.flush(results=())
    waited = scrape().value(
        "whatsblast_token_wait_seconds_total", phone_number_id="pn-2", traffic="transactional"
    )
    assert 0.3 <= waited < 0.5


def test_a_long_wait_is_written_while_it_lasts(monkeypatch) -> None:
    monkeypatch.setattr(metrics, "TOKEN_WAIT_WRITE_INTERVAL_S", 0.1)
    meter = SendMeter("pn-3", "campaign")
    meter.tokens(asked=5, granted=0)
    time.sleep(0.15)
    meter.tokens(asked=5, granted=0)  # still paused: no flush, yet the wait is on record
    waited = scrape().value(
        "whatsblast_token_wait_seconds_total", phone_number_id="pn-3", traffic="campaign"
    )
    assert waited >= 0.15


class BrokenRedis:
    """A TCP listener that takes connections and closes them unanswered, counting them."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.listener.close()


def test_redis_down_costs_one_failed_write_then_writes_pause(settings, caplog) -> None:
    broken = BrokenRedis()
    try:
        dead = redis.Redis.from_url(f"redis://127.0.0.1:{broken.port}/0", socket_timeout=0.5)
        meter = SendMeter("pn-4", "campaign", conn=dead)
        meter.flush(results=[accepted(0.1)])
        assert "metrics not written" in caplog.text
        tried = broken.connections
        assert tried >= 1
        for _ in range(50):
            meter.flush(results=[accepted(0.1)])
        time.sleep(0.2)  # a connection attempt made would have been accepted by now
        assert broken.connections == tried  # paused: no further connection attempts
    finally:
        broken.close()
    assert not get_redis().exists(metrics.SENDS_KEY)


@override_settings(WHATSAPP_APP_SECRET=APP_SECRET)
def test_webhook_posts_and_applier_batches_are_counted(client) -> None:
    body = fixture_bytes("status_delivered")
    post = {"content_type": "application/json", "HTTP_X_HUB_SIGNATURE_256": sign(body)}
    assert client.post(URL, body, **post).status_code == 200
    assert client.post(URL, body, **post).status_code == 200  # Meta redelivers
    forged = {"content_type": "application/json", "HTTP_X_HUB_SIGNATURE_256": sign(b"x")}
    assert client.post(URL, body, **forged).status_code == 403
    malformed = b'{"object": "whatsapp_business_account"}'
    client.post(
        URL, malformed, content_type="application/json", HTTP_X_HUB_SIGNATURE_256=sign(malformed)
    )

    before = scrape()
    assert before.value("whatsblast_webhook_events_received_total", result="stored") == 1
    assert before.value("whatsblast_webhook_events_received_total", result="duplicate") == 1
    assert before.value("whatsblast_webhook_events_received_total", result="forbidden") == 1
    assert before.value("whatsblast_webhook_events_received_total", result="rejected") == 1
    assert before.value("whatsblast_webhook_events_pending") == 1

    events_drain(budget_seconds=5)

    after = scrape()
    assert after.value("whatsblast_webhook_events_applied_total", result="processed") == 1
    assert after.value("whatsblast_webhook_statuses_total") == 1
    # The status names a message this database does not have: kept for a retry.
    assert after.value("whatsblast_webhook_unmatched_statuses_total") == 1
    assert after.value("whatsblast_webhook_unmatched_waiting") == 1
    assert after.value("whatsblast_webhook_events_pending") == 0


def test_every_known_number_exports_its_throttling_errors_from_zero() -> None:
    """So the first burst of 130429 is an increase Prometheus's rate() sees (a series that
    first appears at its burst's size has none), and WhatsblastThroughputErrors fires."""
    quiet = make_phone_number(phone_number_id="pn-quiet")
    get_redis().hset(metrics.ERRORS_KEY, "pn-loud|130429", 3)

    m = scrape()

    assert (
        m.value(
            "whatsblast_send_errors_total", phone_number_id=quiet.phone_number_id, code="130429"
        )
        == 0
    )
    assert m.value("whatsblast_send_errors_total", phone_number_id="pn-loud", code="130429") == 3
    # Only the alerted code is filled in; others appear when they happen.
    assert m.matching("whatsblast_send_errors_total", phone_number_id="pn-quiet").keys() == {
        frozenset({("phone_number_id", "pn-quiet"), ("code", "130429")})
    }
