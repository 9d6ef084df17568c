"""Replaying prepared webhook POSTs with wrk, for the benchmarks that load the endpoint.

The requests file holds one POST per line, ``<signature> <body>`` (``-`` for none: an
unsigned POST). wrk hands the same script arguments to every thread, so each slice of the
file gets its own wrk process (one thread each); the figures of the processes are summed,
and of their latency percentiles the worst is reported.
"""

from __future__ import annotations

import math
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

# Loads its slice of the requests, replays them in a loop (counting the wraps, which repeat
# a body), optionally paces each connection (``delay``), and prints one RESULT line.
_SCRIPT = r"""
local requests = {}
local count = 0
local index = 0
local pace = 0
statuses = {}
retry_after = 0
wrapped = 0

function init(args)
  local file = io.open(args[1])
  local slice = tonumber(args[2])
  local slices = tonumber(args[3])
  pace = tonumber(args[4])
  local n = 0
  for line in file:lines() do
    if n % slices == slice then
      local signature, body = line:match("^(%S+) (.*)$")
      local headers = {["Content-Type"] = "application/json"}
      if signature ~= "-" then headers["X-Hub-Signature-256"] = signature end
      requests[#requests + 1] = wrk.format("POST", "__PATH__", headers, body)
    end
    n = n + 1
  end
  file:close()
  count = #requests
end

function request()
  index = index + 1
  if index > count then index = 1; wrapped = wrapped + 1 end
  return requests[index]
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local t = threads[1]
  local codes = {}
  for status, n in pairs(t:get("statuses")) do codes[#codes + 1] = status .. "=" .. n end
  io.write(string.format(
    "RESULT %d %d %.3f %.3f %.3f %.3f %d %d %d %d %d %d %d %s\n",
    summary.requests, summary.duration,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.timeout, summary.errors.status, t:get("retry_after"), t:get("wrapped"),
    table.concat(codes, ",")
  ))
end
"""

# Only when pacing is asked for: wrk calls ``delay`` before every request.
_PACING = r"""
function delay()
  return pace
end
"""

# Only when answers are to be counted by status: wrk then parses every answer's headers
# for the script, which costs the client some of the rate it can offer.
_COUNTING = r"""
function response(status, headers, body)
  local key = tostring(status)
  statuses[key] = (statuses[key] or 0) + 1
  -- Header names are case-insensitive: nginx's own answers say Retry-After, gunicorn's
  -- asgi worker passes the application's retry-after as it is.
  if status == 503 and (headers["Retry-After"] or headers["retry-after"]) then
    retry_after = retry_after + 1
  end
end
"""


def wrk_script(path: str, *, pace_ms: int, count_statuses: bool) -> str:
    return (
        _SCRIPT.replace("__PATH__", path)
        + (_PACING if pace_ms else "")
        + (_COUNTING if count_statuses else "")
    )


def wrk_replay(
    url: str,
    path: str,
    requests_file: Path,
    *,
    connections: int,
    seconds: int,
    processes: int = 1,
    pace_ms: int = 0,
    timeout_s: float = 30.0,
    count_statuses: bool = False,
) -> dict[str, Any]:
    """Replay ``requests_file`` against ``url`` + ``path`` for ``seconds``; the figures.

    ``statuses`` and ``retry_after_on_503`` are counted only with ``count_statuses``;
    ``non_2xx`` always (wrk's own count).
    """
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    script.write_text(wrk_script(path, pace_ms=pace_ms, count_statuses=count_statuses))
    per = max(1, math.ceil(connections / processes))
    procs = [
        subprocess.Popen(  # noqa: S603 - a fixed tool and our own arguments
            [
                "wrk",
                "-t1",
                f"-c{per}",
                f"-d{seconds}s",
                "--timeout",
                f"{math.ceil(timeout_s)}s",
                "-s",
                str(script),
                url,
                "--",
                str(requests_file),
                str(index),
                str(processes),
                str(pace_ms),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for index in range(processes)
    ]
    rows: list[list[str]] = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=seconds + 120)
            match = re.search(r"^RESULT (.*)$", out, re.M)
            if match is None:
                raise RuntimeError(f"wrk printed no result:\n{out}")
            rows.append(match.group(1).split())
    finally:
        script.unlink()
    statuses: dict[str, int] = {}
    for row in rows:
        for pair in filter(None, row[13].split(",") if len(row) > 13 else []):
            status, _, n = pair.partition("=")
            statuses[status] = statuses.get(status, 0) + int(n)
    requests = sum(int(r[0]) for r in rows)
    duration_s = max(int(r[1]) for r in rows) / 1e6
    non_2xx = sum(int(r[10]) for r in rows)
    return {
        "connections": per * processes,
        "requests": requests,
        "seconds": round(duration_s, 2),
        "posts_per_s": round(requests / duration_s),
        "ok_per_s": round((requests - non_2xx) / duration_s),
        "non_2xx": non_2xx,
        "statuses": dict(sorted(statuses.items())),
        "retry_after_on_503": sum(int(r[11]) for r in rows),
        "p50_ms": max(float(r[2]) for r in rows),
        "p90_ms": max(float(r[3]) for r in rows),
        "p99_ms": max(float(r[4]) for r in rows),
        "max_ms": max(float(r[5]) for r in rows),
        "errors": {
            "connect": sum(int(r[6]) for r in rows),
            "read": sum(int(r[7]) for r in rows),
            "write": sum(int(r[8]) for r in rows),
            "timeout": sum(int(r[9]) for r in rows),
        },
        "wrapped": sum(int(r[12]) for r in rows),
    }
