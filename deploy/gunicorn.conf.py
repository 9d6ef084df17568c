"""gunicorn for the web process: admin, Meta's webhook, the transactional API, metrics, probes.

    gunicorn -c deploy/gunicorn.conf.py whatsblast.asgi

gunicorn's ``asgi`` worker with its Python HTTP parser (``http_parser`` below): each process
serves its connections from one event loop. Meta's callbacks (one status per POST,
thousands a second) are handled on that loop (whatsblast/views/webhooks_async.py) and stored
by the process's group commit; every other request runs Django's WSGI application on a pool
of GUNICORN_THREADS threads (whatsblast/asgi.py). Every knob has an environment override
(GUNICORN_*). Each process keeps its committers' connections (WEBHOOK_COMMITTERS) and one per
thread that touches the database (admin, API) — size PostgreSQL's max_connections for
workers x (threads + committers) per host.

Django's request metrics (django-prometheus) are kept in files under
PROMETHEUS_MULTIPROC_DIR so that /metrics sums every gunicorn worker; the engine's
metrics (whatsblast_*) live in Redis and are the same from any process.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# Measured on 2 cores (bench/webhook_ingest.py): CPUs + 1 processes carried the most webhook
# POSTs (4,584-5,091/s against 2,988-4,367/s with 2, run alternately).
workers = _int("GUNICORN_WORKERS", (os.cpu_count() or 1) + 1)
# The asgi worker. The threaded alternative is whatsblast.gunicorn_worker.QueueTimedThreadWorker
# with whatsblast.wsgi (gthread, each request's wait measured), whose
# webhook POSTs cost some three times the CPU (docs/performance.md, 3 Dec 2026, evening).
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "asgi")
if worker_class != "asgi":
    # The asgi worker has no threads setting: Django's pool is sized from GUNICORN_THREADS by
    # whatsblast/settings.py (WEB_THREADS).
    threads = _int("GUNICORN_THREADS", 16)
# Python's own event loop, even where uvloop is installed (gunicorn's "auto" would take it):
# uvloop carried fewer webhook POSTs, 3,589-3,794/s against 4,158-4,932/s (three alternate
# pairs, bench/webhook_ingest.py, docs/performance.md 4 Dec 2026, late night).
asgi_loop = "asyncio"
# The asgi worker's pure-Python HTTP parser, not its C one (gunicorn_h1c): a request that
# reaches a kept-alive connection before the worker has reset its parser (the client sends
# it the moment the last answer arrives, and the loop is late while Django's thread ends the
# last request) is held as the parser's tail, which the C parser caps at 64 KiB; past that
# the worker closed the connection with the request unanswered and no "Connection: close"
# before it, one large API call in three (tests/whatsblast/test_web_keep_alive.py). The
# Python parser keeps the whole request, under the worker's read pause: 0.91x the webhook
# POSTs/s of the C one (median of 18 alternate pairs, docs/performance.md, 8 Dec 2026). The
# threaded alternative keeps the C parser: gunicorn's WSGI workers read each request whole.
http_parser = os.environ.get("GUNICORN_HTTP_PARSER", "python" if worker_class == "asgi" else "auto")
# Open connections per process, idle keep-alive ones included (gunicorn's default).
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 1000)
# Meta retries a callback that takes more than a few seconds; nothing here should come close.
timeout = _int("GUNICORN_TIMEOUT", 30)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Behind the proxy's keep-alive pool (deploy/nginx/whatsblast.conf keeps 32 connections).
keepalive = _int("GUNICORN_KEEPALIVE", 75)
# Recycle workers now and then: bounds any slow leak without a visible restart. Counted in
# requests, and at Meta's pace (one status per POST) a worker takes 1,000 a second: 20,000
# restarted each worker every 20 s under load, a second of lost capacity each time.
max_requests = _int("GUNICORN_MAX_REQUESTS", 1_000_000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 100_000)
# Only the local proxy may say which scheme and client a request came from.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# Django's DATA_UPLOAD_MAX_MEMORY_SIZE does not apply to the webhook (it reads the stream);
# cap the request line and headers here.
limit_request_line = 8190
accesslog = "-"
# Every request but accepted webhook POSTs (counted in whatsblast_webhooks_received_total).
logger_class = "whatsblast.observability.access_log.AccessLogger"
errorlog = "-"
access_log_format = '%({x-forwarded-for}i)s "%(r)s" %(s)s %(b)s %(M)sms'

# Gunicorn's own loggers go through the same scrubbing as Django's (a verify token in a
# query string, a phone number in a path) and in the same format (LOG_FORMAT=json or text).
_format = os.environ.get("LOG_FORMAT", "text").strip().lower()
logconfig_dict: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "mask_phones": {"()": "whatsblast.core.logging.PhoneMaskFilter"},
        "redact_secrets": {"()": "whatsblast.core.logging.SecretRedactFilter"},
    },
    "formatters": {
        "json": {"()": "whatsblast.core.logging.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "scrubbed": {
            "class": "logging.StreamHandler",
            "formatter": "json" if _format == "json" else "text",
            "filters": ["redact_secrets", "mask_phones"],
            "stream": "ext://sys.stderr",
        },
    },
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": ["scrubbed"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "handlers": ["scrubbed"], "propagate": False},
    },
    "root": {"level": "INFO", "handlers": []},
}

# One metrics directory per gunicorn master, set before any worker imports prometheus_client.
_metrics_dir = Path(
    os.environ.setdefault(
        "PROMETHEUS_MULTIPROC_DIR",
        str(Path(tempfile.gettempdir()) / f"whatsblast-prometheus-{os.getpid()}"),
    )
)


def on_starting(server: Any) -> None:
    """Start from an empty metrics directory: files of a previous run would count twice."""
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    _metrics_dir.mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker exited: its live gauges must stop counting (its counters stay summed)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def on_exit(server: Any) -> None:
    shutil.rmtree(_metrics_dir, ignore_errors=True)
