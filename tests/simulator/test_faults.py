"""Injected faults: latency, 5xx, held answers (read timeouts), per-recipient errors, modes."""

from __future__ import annotations

import time

import pytest
import requests

from tests.simulator.helpers import error_code, post, template_body


def test_latency_is_applied(simulator) -> None:
    simulator.configure(latency_ms=150)
    started = time.perf_counter()
    assert post(simulator.url, template_body()).ok
    assert 0.15 <= time.perf_counter() - started < 1.0


def test_jitter_spreads_latency(simulator) -> None:
    simulator.configure(latency_ms=40, jitter_ms=30, pair_limit_enabled=False)
    samples = []
    for _ in range(12):
        started = time.perf_counter()
        post(simulator.url, template_body())
        samples.append(time.perf_counter() - started)
    assert min(samples) >= 0.009
    assert max(samples) - min(samples) > 0.01
    assert max(samples) < 0.5


def test_latency_does_not_block_other_requests(simulator) -> None:
    from concurrent.futures import ThreadPoolExecutor

    simulator.configure(latency_ms=300, pair_limit_enabled=False)
    started = time.perf_counter()
    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(lambda _: post(simulator.url, template_body()), range(20)))
    assert all(r.ok for r in responses)
    assert time.perf_counter() - started < 1.0


def test_all_5xx_mode_answers_meta_server_errors(simulator) -> None:
    simulator.configure(mode="all_5xx")
    responses = [post(simulator.url, template_body(to=f"+4915{i:09d}")) for i in range(20)]
    seen = {(r.status_code, error_code(r)) for r in responses}
    assert seen == {(500, 131000), (503, 2)}
    assert simulator.stats()["accepted"] == 0


def test_5xx_fraction(simulator) -> None:
    simulator.configure(error_5xx_fraction=0.3, pair_limit_enabled=False)
    failures = sum(not post(simulator.url, template_body()).ok for _ in range(200))
    assert 30 <= failures <= 90


def test_held_answer_is_a_read_timeout_but_the_message_is_sent(simulator) -> None:
    simulator.configure(timeout_fraction=1.0, timeout_hold_s=1.0)
    with pytest.raises(requests.ReadTimeout):
        post(simulator.url, template_body(callback="wb:77"), timeout=0.3)

    [record] = simulator.records()
    assert record["outcome"] == "accepted_timeout"
    assert record["callback_data"] == "wb:77"
    assert simulator.stats()["accepted"] == 1
    assert simulator.stats()["in_flight"] == 1


def test_all_timeout_and_all_throttle_modes(simulator) -> None:
    simulator.configure(mode="all_throttle")
    assert error_code(post(simulator.url, template_body())) == 130429
    simulator.configure(mode="all_timeout", timeout_hold_s=0.5)
    with pytest.raises(requests.ReadTimeout):
        post(simulator.url, template_body(), timeout=0.2)
    simulator.configure(mode="normal")
    assert post(simulator.url, template_body(to="+4915100000009")).ok


def test_permanent_fraction(simulator) -> None:
    simulator.configure(permanent_fraction=1.0, permanent_code=131026)
    response = post(simulator.url, template_body())
    assert (response.status_code, error_code(response)) == (400, 131026)


def test_recipients_that_always_fail(simulator) -> None:
    simulator.configure(fail_recipients={"+4915100000001": 131050, "4915100000002": 131049})
    assert error_code(post(simulator.url, template_body(to="+49 151 00000001"))) == 131050
    assert error_code(post(simulator.url, template_body(to="+4915100000002"))) == 131049
    assert post(simulator.url, template_body(to="+4915100000003")).ok


def test_bad_config_is_refused(simulator) -> None:
    with pytest.raises(ValueError, match="mode"):
        simulator.configure(mode="chaos")
    with pytest.raises(ValueError, match="unknown"):
        simulator.configure(no_such_knob=1)
