"""The soak's report and verdicts (tests.faults.soak_report) on the structures the soak
builds: samples as (moment, gauges), events as (moment, value), sends per number. The soak
itself runs only with WHATSBLAST_SOAK=1 (shown last)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.faults import soak_report as sr
from tests.faults.runner import ROOT

START = 1_700_000_000.0
WINDOW = 60.0


def _sample(t: float, rss_web: float, live: int, total_mb: float, dead: int) -> tuple:
    values = {
        "rss_mb.web": rss_web,
        "redis_used_mb": 3.0,
        "tables.delivery_message.live": live,
        "tables.delivery_message.dead": dead,
        "tables.delivery_message.total_mb": total_mb,
        "tables.delivery_message.indexes_mb": total_mb / 2,
    }
    return (START + t, sr.table_ratios(values))


def test_a_window_holds_the_largest_sample_taken_in_it() -> None:
    samples = [
        _sample(5, 100.0, 1000, 1.0, 0),
        _sample(30, 140.0, 2000, 2.0, 500),  # a peak mid-window
        _sample(55, 110.0, 3000, 3.0, 10),
        _sample(65, 120.0, 4000, 4.0, 0),
        _sample(250, 999.0, 1, 1.0, 0),  # past the last window: left out
        _sample(-1, 999.0, 1, 1.0, 0),  # before the start: left out
    ]
    windows = sr.gauge_windows(samples, start=START, window_s=WINDOW, windows=3)
    assert windows[0]["rss_mb.web"] == 140.0
    assert windows[0]["tables.delivery_message.total_mb"] == 3.0
    # dead fraction of the sample that had it (500 of 2,500), not of two samples' maxima
    assert windows[0]["tables.delivery_message.dead_fraction"] == 0.2
    assert windows[0]["tables.delivery_message.bytes_per_row"] == 1000.0
    assert windows[1]["rss_mb.web"] == 120.0
    assert windows[2] == {}


def test_events_fall_in_their_window_and_give_nearest_rank_percentiles() -> None:
    calls = [(START + 0.5 + i * 0.1, i / 100) for i in range(100)]  # 0.00 .. 0.99 s
    calls.append((START + 61, 2.5))
    per_window = sr.event_windows(calls, start=START, window_s=WINDOW, windows=2)
    assert len(per_window[0]) == 100 and per_window[1] == [2.5]
    figures = sr.percentiles(per_window[0])
    assert figures == {"p50": 0.49, "p95": 0.94, "p99": 0.98, "max": 0.99, "n": 100}
    assert sr.percentiles([]) is None


def test_send_rate_against_the_numbers_campaign_share() -> None:
    sends = [(START + i / 50, "pn-a", "campaign") for i in range(50 * 60)]  # 50/s
    sends += [(START + i / 10, "pn-a", "transactional") for i in range(600)]
    sends += [(START + 60 + i / 30, "pn-b", "campaign") for i in range(30 * 60)]
    windows = sr.send_windows(
        sends, {"pn-a": 64.0, "pn-b": 40.0}, start=START, window_s=WINDOW, windows=2
    )
    assert windows[0]["pn-a"] == {
        "campaign_per_s": 50.0,
        "transactional_per_s": 10.0,
        "target_per_s": 64.0,
        "ratio": 0.781,
    }
    assert windows[0]["pn-b"]["campaign_per_s"] == 0.0
    assert windows[1]["pn-b"]["ratio"] == 0.75


def test_verdicts_leave_the_warm_up_out_and_name_the_reason_for_growth() -> None:
    rule = sr.Rule(tolerance=0.10, slack=5.0)
    # A big first window (warm-up), then steady within 10 %: flat.
    assert sr.verdict([300.0, 100.0, 104.0, 109.0], rule)["verdict"] == sr.FLAT
    grown = sr.verdict([100.0, 100.0, 120.0, 140.0], rule)
    assert grown["verdict"] == sr.GROWING and grown["change_pct"] == 40.0
    assert sr.verdict([10.0, 10.0, 2.0], rule)["verdict"] == sr.FALLING
    # The absolute slack: 3 MB more on 20 MB is 15 %, but within 5 MB.
    assert sr.verdict([20.0, 20.0, 23.0], rule)["verdict"] == sr.FLAT
    assert sr.verdict([1.0, 1.0], rule)["verdict"] == sr.TOO_SHORT
    assert sr.verdict([1.0, None, 2.0], rule)["verdict"] == sr.NO_DATA
    explained = sr.verdict([1.0, 10.0, 30.0], sr.Rule(explained="kept by design"))
    assert explained["explained"] == "kept by design"


def test_a_series_that_settles_later_is_judged_from_its_own_baseline() -> None:
    # A table pruned after a retention: it fills for three windows, then holds.
    filling = [10.0, 40.0, 70.0, 100.0, 104.0, 108.0]
    assert sr.verdict(filling, sr.Rule())["verdict"] == sr.GROWING
    settled = sr.verdict(filling, sr.Rule(baseline=3))
    assert settled["verdict"] == sr.FLAT and settled["baseline"] == 100.0
    assert settled["baseline_window"] == 3
    assert sr.verdict([*filling, 130.0], sr.Rule(baseline=3))["verdict"] == sr.GROWING
    # No window after the baseline: nothing to judge.
    assert sr.verdict(filling[:4], sr.Rule(baseline=3))["verdict"] == sr.TOO_SHORT


def test_the_report_from_windows_to_summary() -> None:
    samples = []
    for minute in range(4):
        # Memory flat after the first minute; the table grows with its rows, per row flat.
        samples.append(_sample(minute * 60 + 30, 150.0 if minute else 90.0,
                               10_000 * (minute + 1), 5.0 * (minute + 1), 100))  # fmt: skip
        samples[-1][1]["rss_mb.simulator"] = 50.0 + 40 * minute
    sends = [(START + i / 40, "pn-a", "campaign") for i in range(40 * 240)]
    calls = [(START + i / 10, 0.02 + (i % 10) / 1000) for i in range(2400)]
    lag = {"p50": 0.2, "p95": 0.4, "p99": 0.6, "max": 0.9, "n": 4000}
    windows = sr.window_rows(
        gauges=sr.gauge_windows(samples, start=START, window_s=WINDOW, windows=4),
        sends=sr.send_windows(sends, {"pn-a": 40.0}, start=START, window_s=WINDOW, windows=4),
        api_s=sr.event_windows(calls, start=START, window_s=WINDOW, windows=4),
        txn_to_sim_s=sr.event_windows(calls, start=START, window_s=WINDOW, windows=4),
        lags={w: {"webhook_lag_s": lag, "webhook_lag_meta_s": lag} for w in range(4)},
        window_s=WINDOW,
    )
    assert windows[1]["rss_mb"]["web"] == 150.0
    assert windows[3]["tables"]["delivery_message"]["total_mb"] == 20.0
    assert windows[2]["send"]["pn-a"]["ratio"] == 1.0
    assert windows[0]["api_s"]["n"] == 600
    judged = sr.verdicts(windows, sr.soak_rules(windows, flat_pct=10, kept_rows="kept"))
    assert judged["rss_mb.web"]["verdict"] == sr.FLAT
    assert judged["rss_mb.simulator"]["explained"] == sr.SIMULATOR_RECORDS
    assert judged["tables.delivery_message.total_mb"]["explained"] == "kept"
    assert judged["tables.delivery_message.bytes_per_row"]["verdict"] == sr.FLAT
    assert judged["tables.delivery_message.dead_fraction"]["verdict"] == sr.FLAT
    summary = sr.summary(judged)
    assert summary[sr.GROWING] == []
    assert set(summary["explained"]) == {
        "rss_mb.simulator",
        "tables.delivery_message.total_mb",
        "tables.delivery_message.indexes_mb",
    }
    assert "api_s.p99" in summary[sr.FLAT] and "send.pn-a.ratio" in summary[sr.FLAT]
    # Had its rows been pruned after a retention, its size would have to be flat too.
    pruned = sr.soak_rules(windows, flat_pct=10, kept_rows="kept", pruned={"delivery_message": 2})
    assert pruned["tables.delivery_message.total_mb"] == sr.Rule(tolerance=0.1, baseline=2)
    assert sr.verdicts(windows, pruned)["tables.delivery_message.total_mb"]["verdict"] == (
        sr.GROWING
    )


def _collected(soak: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "WHATSBLAST_SOAK"}
    if soak is not None:
        env["WHATSBLAST_SOAK"] = soak
    return subprocess.run(  # noqa: S603 - pytest itself
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/faults"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_the_default_run_does_not_collect_the_soak() -> None:
    assert "test_soak.py::" not in _collected(None)
    assert "test_soak_report.py::" in _collected(None)
    assert "test_soak.py::test_soak_keeps_every_series_flat_or_explained" in _collected("1")
