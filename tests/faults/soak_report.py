"""The soak's arithmetic: samples and events into windows, windows into verdicts.

Pure functions over plain data (no Django, no processes), so the default test suite shows
them on real structures while the soak itself (``tests.faults.soak``) runs only on demand.

* A **gauge** is sampled now and then (RSS of a process, Redis ``used_memory``, a table's
  size): a window holds the largest sample taken in it, so a peak between two windows'
  ends is not missed.
* An **event** happens at a moment and has a value (a transactional API call and its
  duration, a webhook and its lag, an accepted send): a window holds the percentiles or
  the count of the events that happened in it.
* A **verdict** compares the last window with a baseline window, the second by default
  (the first is the warm-up: imports, caches, connection pools and tables filling for the
  first time): ``flat`` when the last is within ``tolerance`` (a fraction of the baseline)
  or ``slack`` (an absolute amount) of it, else ``growing`` or ``falling``. A series that
  only settles later (a table whose rows are deleted after a retention: it fills until its
  first rows age out, then its free space is reused) names a later baseline. Too few
  windows to have one after the baseline give ``too short``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FLAT = "flat"
GROWING = "growing"
FALLING = "falling"
TOO_SHORT = "too short"
NO_DATA = "no data"


def window_of(t: float, *, start: float, window_s: float) -> int:
    """The index of the window ``t`` falls in (negative before the start)."""
    return math.floor((t - start) / window_s)


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest rank: the smallest value with at least ``p`` % of the values at or below it."""
    if not ordered:
        raise ValueError("no values")
    index = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[index]


def percentiles(values: Iterable[float]) -> dict[str, float] | None:
    """p50 / p95 / p99 / max and the count, or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return {
        "p50": round(percentile(ordered, 50), 4),
        "p95": round(percentile(ordered, 95), 4),
        "p99": round(percentile(ordered, 99), 4),
        "max": round(ordered[-1], 4),
        "n": len(ordered),
    }


def gauge_windows(
    samples: Iterable[tuple[float, Mapping[str, float]]],
    *,
    start: float,
    window_s: float,
    windows: int,
) -> list[dict[str, float]]:
    """Per window, the largest value each gauge took in it (a gauge never sampled: absent)."""
    out: list[dict[str, float]] = [{} for _ in range(windows)]
    for t, values in samples:
        index = window_of(t, start=start, window_s=window_s)
        if not 0 <= index < windows:
            continue
        row = out[index]
        for name, value in values.items():
            row[name] = max(value, row.get(name, value))
    return out


def event_windows(
    events: Iterable[tuple[float, float]], *, start: float, window_s: float, windows: int
) -> list[list[float]]:
    """The values of the events (moment, value) that happened in each window."""
    out: list[list[float]] = [[] for _ in range(windows)]
    for t, value in events:
        index = window_of(t, start=start, window_s=window_s)
        if 0 <= index < windows:
            out[index].append(value)
    return out


@dataclass(frozen=True)
class Rule:
    """How a series is judged: flat within ``tolerance`` x the baseline window, or ``slack``."""

    tolerance: float = 0.10
    slack: float = 0.0
    # Why the series may grow by design; printed with a growing verdict.
    explained: str = ""
    # The window the last is compared with: the second (the first is the warm-up), or the
    # first one after the series has settled.
    baseline: int = 1


# Redis holds RQ's finished jobs for RQ_RESULT_TTL_SECONDS (60 s, ~5 KB each): at the soak's
# 25-30 jobs a second that is 7-9 MB of its 10-12, and it swings with the mix of jobs from
# one window to the next (13.7, 13.1, 11.2, 9.8, 10.9 MB in five windows of the 3 Dec 2026
# hour, no trend). A leak grows window after window, by more than that.
REDIS_SLACK_MB = 3.0


def verdict(values: Sequence[float | None], rule: Rule = Rule()) -> dict[str, Any]:
    """Flat or growing: the last window against the baseline (by default the second)."""
    if len(values) < rule.baseline + 2:
        return {"verdict": TOO_SHORT, "windows": len(values)}
    if values[rule.baseline] is None or values[-1] is None:
        return {"verdict": NO_DATA, "windows": len(values)}
    base, last = float(values[rule.baseline]), float(values[-1])
    allowed = max(rule.tolerance * abs(base), rule.slack)
    change = last - base
    if abs(change) <= allowed:
        judged = FLAT
    else:
        judged = GROWING if change > 0 else FALLING
    result: dict[str, Any] = {
        "verdict": judged,
        "baseline_window": rule.baseline,
        "baseline": round(base, 4),
        "last": round(last, 4),
        "change_pct": round(100 * change / base, 1) if base else None,
        "allowed": round(allowed, 4),
    }
    if judged == GROWING and rule.explained:
        result["explained"] = rule.explained
    return result


def series(windows: Sequence[Mapping[str, Any]], path: str) -> list[float | None]:
    """One figure of every window, by a dotted path (``rss.web``, ``api_s.p99``)."""
    values: list[float | None] = []
    for window in windows:
        node: Any = window
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        values.append(float(node) if isinstance(node, int | float) else None)
    return values


def verdicts(
    windows: Sequence[Mapping[str, Any]], rules: Mapping[str, Rule]
) -> dict[str, dict[str, Any]]:
    """A verdict for every series named in ``rules`` (a path into the windows)."""
    return {path: verdict(series(windows, path), rule) for path, rule in rules.items()}


def summary(judged: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """The series by verdict; a growing series with a stated reason counts as explained."""
    out: dict[str, list[str]] = {
        kind: [] for kind in (FLAT, "explained", GROWING, FALLING, TOO_SHORT, NO_DATA)
    }
    for path, result in judged.items():
        kind = result["verdict"]
        if kind == GROWING and result.get("explained"):
            kind = "explained"
        out[kind].append(path)
    return out


# --------------------------------------------------------------------------------------
# The soak's own figures
# --------------------------------------------------------------------------------------


def table_ratios(values: Mapping[str, float]) -> dict[str, float]:
    """A sample with each table's per-row figures added (``tables.<t>.<figure>``).

    ``bytes_per_row`` and ``index_bytes_per_row`` (sizes over live tuples): a table that
    keeps every row grows with the traffic, but its bytes per row stay flat unless bloat
    builds up. ``dead_fraction``: dead tuples over all tuples, which autovacuum keeps
    bounded (its default scale factor lets 20 % pile up before it runs).
    """
    out = dict(values)
    tables = {key.split(".")[1] for key in values if key.startswith("tables.")}
    for table in tables:
        live = values.get(f"tables.{table}.live", 0.0)
        dead = values.get(f"tables.{table}.dead", 0.0)
        if live > 0:
            total = values[f"tables.{table}.total_mb"] * 1e6
            out[f"tables.{table}.bytes_per_row"] = round(total / live, 1)
            out[f"tables.{table}.index_bytes_per_row"] = round(
                values[f"tables.{table}.indexes_mb"] * 1e6 / live, 1
            )
        if live + dead > 0:
            out[f"tables.{table}.dead_fraction"] = round(dead / (live + dead), 4)
    return out


def send_windows(
    sends: Iterable[tuple[float, str, str]],
    targets: Mapping[str, float],
    *,
    start: float,
    window_s: float,
    windows: int,
) -> list[dict[str, dict[str, float]]]:
    """Per window and number: campaign and transactional sends per second, and the
    campaign rate against its target (the number's campaign share).

    ``sends``: (moment, number, "campaign" | "transactional"), one per accepted send.
    """
    counts: list[dict[str, Counter[str]]] = [
        {number: Counter() for number in targets} for _ in range(windows)
    ]
    for t, number, kind in sends:
        index = window_of(t, start=start, window_s=window_s)
        if 0 <= index < windows and number in targets:
            counts[index][number][kind] += 1
    out: list[dict[str, dict[str, float]]] = []
    for row in counts:
        window: dict[str, dict[str, float]] = {}
        for number, target in targets.items():
            campaign = row[number]["campaign"] / window_s
            window[number] = {
                "campaign_per_s": round(campaign, 2),
                "transactional_per_s": round(row[number]["transactional"] / window_s, 2),
                "target_per_s": target,
                "ratio": round(campaign / target, 3) if target else 0.0,
            }
        out.append(window)
    return out


def window_rows(
    *,
    gauges: Sequence[Mapping[str, float]],
    sends: Sequence[Mapping[str, Any]],
    api_s: Sequence[Sequence[float]],
    txn_to_sim_s: Sequence[Sequence[float]],
    lags: Mapping[int, Mapping[str, Any]],
    window_s: float,
) -> list[dict[str, Any]]:
    """One row per window: the gauges nested by their dotted names, the send rates, the
    latency and lag percentiles."""
    rows: list[dict[str, Any]] = []
    for index, values in enumerate(gauges):
        row: dict[str, Any] = {
            "window": index,
            "from_min": round(index * window_s / 60, 2),
            "to_min": round((index + 1) * window_s / 60, 2),
        }
        for name, value in sorted(values.items()):
            node = row
            *parents, leaf = name.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        row["send"] = sends[index]
        row["api_s"] = percentiles(api_s[index])
        row["txn_to_sim_s"] = percentiles(txn_to_sim_s[index])
        row.update(lags.get(index, {}))
        rows.append(row)
    return rows


SIMULATOR_RECORDS = "the simulator is the instrument: it keeps one record per request"
LATENCY = Rule(tolerance=0.5, slack=0.05)  # a shared 2-core machine: half again, or 50 ms
LAG = Rule(tolerance=0.5, slack=0.5)
META_LAG = Rule(tolerance=0.5, slack=1.0)  # Meta's timestamps are whole seconds


def soak_rules(
    windows: Sequence[Mapping[str, Any]],
    *,
    flat_pct: float,
    kept_rows: str,
    pruned: Mapping[str, int] | None = None,
) -> dict[str, Rule]:
    """The series the soak judges, each with its rule (``flat_pct`` for the memories and
    the per-row sizes).

    ``pruned``: tables whose rows are deleted after a retention, each with the first window
    in which it has settled. Their rows are bounded, so their sizes too are judged flat
    (not explained by rows kept), from that window on.
    """
    if not windows:
        return {}
    share = flat_pct / 100
    last = windows[-1]
    pruned = pruned or {}
    rules: dict[str, Rule] = {}
    for name in last.get("rss_mb", {}):
        explained = SIMULATOR_RECORDS if name == "simulator" else ""
        rules[f"rss_mb.{name}"] = Rule(tolerance=share, slack=5.0, explained=explained)
    rules["redis_used_mb"] = Rule(tolerance=share, slack=REDIS_SLACK_MB)
    for table in last.get("tables", {}):
        settled = pruned.get(table)
        baseline = settled if settled is not None else 1
        kept = "" if settled is not None else kept_rows
        for figure in ("total_mb", "indexes_mb"):
            rules[f"tables.{table}.{figure}"] = Rule(
                tolerance=share, explained=kept, baseline=baseline
            )
        for figure in ("bytes_per_row", "index_bytes_per_row"):
            rules[f"tables.{table}.{figure}"] = Rule(tolerance=share, baseline=baseline)
        rules[f"tables.{table}.dead_fraction"] = Rule(tolerance=0.0, slack=0.1, baseline=baseline)
    for number in last.get("send", {}):
        rules[f"send.{number}.ratio"] = Rule(tolerance=0.05)
    for figure in ("p50", "p99"):
        rules[f"api_s.{figure}"] = LATENCY
        rules[f"txn_to_sim_s.{figure}"] = LATENCY
        rules[f"webhook_lag_s.{figure}"] = LAG
        rules[f"webhook_lag_meta_s.{figure}"] = META_LAG
    return rules
