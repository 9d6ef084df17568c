"""Probes: ``/healthz`` (liveness, no I/O) and ``/readyz`` (every dependency, JSON details)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from whatsblast.observability.readiness import readiness_report


def healthz(request: HttpRequest) -> JsonResponse:
    """Answers while the process can serve requests; touches nothing else."""
    return JsonResponse({"status": "ok"})


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when Postgres, Redis, migrations, workers and the webhook applier are all fine."""
    ready, report = readiness_report()
    return JsonResponse(report, status=200 if ready else 503)
