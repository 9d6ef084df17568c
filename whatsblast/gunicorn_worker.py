"""The web process's gunicorn worker: ``gthread`` that measures each request's queue wait.

``deploy/gunicorn.conf.py`` names it (``worker_class``). A connection is stamped when the
worker hands it to its thread pool (a new connection, or a kept-alive one with a request
ready); the thread that takes it records how long it waited (``whatsblast.core.
request_queue``) before serving. The time a new connection then spends waiting for its
client's bytes is the client's, not the queue's, and is not counted.
"""

from __future__ import annotations

import time
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

from whatsblast.core.request_queue import queue_wait_set


class QueueTimedThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn is untyped
    def enqueue_req(self, conn: Any) -> None:
        conn.whatsblast_queued_at = time.monotonic()
        super().enqueue_req(conn)

    def handle(self, conn: Any) -> Any:
        queued_at = getattr(conn, "whatsblast_queued_at", None)
        queue_wait_set(None if queued_at is None else time.monotonic() - queued_at)
        try:
            return super().handle(conn)
        finally:
            queue_wait_set(None)
