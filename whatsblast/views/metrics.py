"""``/metrics``: Django's own metrics (django-prometheus) followed by the engine's.

The engine collector lives in a registry of its own, registered once at import: it is
never mixed into prometheus_client's default registry, so it shows up the same whether
this process keeps its Django metrics in memory or, under gunicorn with
``PROMETHEUS_MULTIPROC_DIR`` set (deploy/gunicorn.conf.py), in shared files that every
gunicorn worker adds to.
"""

from __future__ import annotations

import os

import prometheus_client
from django.http import HttpRequest, HttpResponse
from prometheus_client import multiprocess

from whatsblast.observability.collector import EngineCollector

ENGINE_REGISTRY = prometheus_client.CollectorRegistry(auto_describe=False)
ENGINE_REGISTRY.register(EngineCollector())


def _django_registry() -> prometheus_client.CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return prometheus_client.REGISTRY


def metrics(request: HttpRequest) -> HttpResponse:
    body = prometheus_client.generate_latest(_django_registry())
    body += prometheus_client.generate_latest(ENGINE_REGISTRY)
    return HttpResponse(body, content_type=prometheus_client.CONTENT_TYPE_LATEST)
