"""A Graph-API-compatible fake of the WhatsApp Cloud API for tests, the demo and benchmarks.

In-process::

    with SimulatorServer(SimConfig(latency_ms=5), numbers=[{...}], templates=[{...}]) as sim:
        sim.url, sim.configure(mode="all_5xx"), sim.records(), sim.stats(), sim.histogram(pnid)

Out of process: ``manage.py simulator --port 9009 --latency-ms 250`` and the ``/_sim/...``
control API (see ``app.py``).
"""

from __future__ import annotations

from delivery.simulator.config import NumberSpec, SimConfig, TemplateSpec
from delivery.simulator.core import Simulator
from delivery.simulator.server import SimulatorServer
from delivery.simulator.webhooks import meta_json, signature

__all__ = [
    "NumberSpec",
    "SimConfig",
    "Simulator",
    "SimulatorServer",
    "TemplateSpec",
    "meta_json",
    "signature",
]
