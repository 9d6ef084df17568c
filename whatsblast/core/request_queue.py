"""How long the request being served waited in its web process's queue.

gunicorn's ``gthread`` worker accepts every connection at once and queues it for its
threads. Past capacity that queue grows without bound: each POST waits longer than the last
and Meta, whose callbacks time out after a few seconds, retries what it already sent. The
web process's worker class (``whatsblast.gunicorn_worker``) stamps each request with the
seconds it waited; the webhook view answers 503 at once to a POST that waited past its limit
rather than serving it late. Outside gunicorn (the test client, ``runserver``) nothing is
stamped and ``queue_wait_s`` is ``None``.
"""

from __future__ import annotations

import threading

_current = threading.local()


def queue_wait_set(seconds: float | None) -> None:
    """Record (or clear, with ``None``) the wait of the request this thread serves."""
    _current.seconds = seconds


def queue_wait_s() -> float | None:
    """Seconds the current request waited for a thread; ``None`` when nobody measured."""
    return getattr(_current, "seconds", None)
