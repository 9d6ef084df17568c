"""The asyncio transport speaks to the Cloud API exactly like the requests client."""

from __future__ import annotations

import socket

import pytest

from delivery.cloud.client import Accepted, ApiError, CloudApiClient, SendRequest
from delivery.cloud.outcomes import Outcome, classify
from delivery.cloud.transport import AsyncTransport
from delivery.simulator.config import SimConfig
from delivery.simulator.server import SimulatorServer


@pytest.fixture
def sim():
    server = SimulatorServer(
        SimConfig(pair_limit_enabled=False),
        numbers=[{"phone_number_id": "pn-async", "access_token": "tok", "rate": 1000}],
        templates=[{"name": "promo", "language": "en_US", "body_params": 1}],
    ).start()
    yield server
    server.stop()


@pytest.fixture
def transport():
    t = AsyncTransport(api_version="v23.0", connect_timeout=1.0, read_timeout=0.5)
    yield t
    t.close()


def request(base_url: str, **changes) -> SendRequest:
    fields = {
        "base_url": base_url,
        "phone_number_id": "pn-async",
        "access_token": "tok",
        "to": "+5511999990001",
        "callback_data": "wb:1",
        "template_name": "promo",
        "language": "en_US",
        "params": {"body": ["Asha"]},
    }
    fields.update(changes)
    return SendRequest(**fields)


def test_accepted_send_and_identical_body_to_the_requests_client(sim, transport) -> None:
    result = transport.send(request(sim.url))
    assert isinstance(result, Accepted) and result.wamid.startswith("wamid.")
    CloudApiClient(api_version="v23.0", connect_timeout=1, read_timeout=1).send(
        request(sim.url, to="+5511999990002")
    )
    first, second = sim.records(bodies=True)[-2:]
    assert first["body"].replace("990001", "") == second["body"].replace("990002", "")


def test_meta_errors_are_parsed(sim, transport) -> None:
    result = transport.send(request(sim.url, access_token="wrong"))
    assert isinstance(result, ApiError) and result.code == 190
    assert classify(result) is Outcome.CAMPAIGN_BROKEN
    result = transport.send(request(sim.url, params={"body": []}))
    assert isinstance(result, ApiError) and result.code == 132000


def test_refused_connection_never_reached_meta(transport) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = transport.send(request(f"http://127.0.0.1:{port}"))
    assert isinstance(result, ApiError) and result.may_have_reached_meta is False
    assert classify(result) is Outcome.TRANSIENT


def test_read_timeout_may_have_reached_meta(sim, transport) -> None:
    sim.configure(timeout_fraction=1.0, timeout_hold_s=2.0)
    result = transport.send(request(sim.url))
    assert isinstance(result, ApiError) and result.may_have_reached_meta is True
    assert classify(result) is Outcome.AMBIGUOUS
    assert sim.stats()["accepted"] == 1  # the simulator did send it


def test_many_concurrent_sends(sim) -> None:
    # 300 requests in flight at once against a threaded simulator on a busy two-core CI
    # machine: the read timeout is set for the load, because what this test asserts is that
    # every concurrent send is answered and kept apart, not how fast the simulator answers.
    transport = AsyncTransport(api_version="v23.0", connect_timeout=5.0, read_timeout=20.0)
    try:
        futures = [transport.submit(request(sim.url, to=f"+55119{i:08d}")) for i in range(300)]
        results = [f.result(60) for f in futures]
    finally:
        transport.close()
    refused = [r for r in results if not isinstance(r, Accepted)]
    assert refused == []
    assert len({r.wamid for r in results if isinstance(r, Accepted)}) == 300
    assert sim.stats()["accepted"] == 300
