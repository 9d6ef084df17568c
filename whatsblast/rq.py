"""RQ worker classes: JSON only, Django connection hygiene, and no fork per job by default.

Jobs are enqueued with RQ's JSON serializer (settings.RQ_QUEUES): job payloads stay
readable, and nothing a worker loads can execute code the way a pickle can. django-rq's
``rqworker`` command passes the pickle serializer unless told otherwise, so these classes
(settings.RQ["WORKER_CLASS"]) pin JSON whatever they are given, keeping the documented
``manage.py rqworker transactional campaigns maintenance --with-scheduler`` correct.

The default ``Worker`` runs jobs in its own process instead of forking a work horse per
job. Measured with bench/transactional_latency.py, a fork per job cost 0.2-0.9 s per
transactional send (imports and connections rebuilt every time), which is the whole
latency budget of an OTP; campaign jobs run for many seconds and gain nothing from a fork.
Crash isolation is kept where it matters: a worker that dies is restarted by its process
manager, and the reconciler settles whatever it held (rows in `sending` with an expired
lease). ``ForkingWorker`` remains for deployments that prefer a horse per job.
"""

from __future__ import annotations

import gc
import inspect
from typing import Any

import rq
from django.db import close_old_connections
from redis.client import PubSubWorkerThread
from rq.serializers import JSONSerializer

from delivery.engine.send_service import service_start, service_stop
from whatsblast.core.service_versions import redis_version_check

# redis-py 8.2's PubSubWorkerThread.stop() joins the thread unless given a timeout.
_LISTENER_STOP_JOINS = "timeout" in inspect.signature(PubSubWorkerThread.stop).parameters


class _DjangoJobs:
    """Around every job: drop database connections that are broken or past their age.

    A worker lives for days; without this, a connection broken by a PostgreSQL restart
    would fail every later job in that process.
    """

    def work(self, *args: Any, burst: bool = False, **kwargs: Any) -> Any:
        # Refuse an old Redis at start-up, naming its version (whatsblast.core.service_versions).
        redis_version_check(self.connection)  # type: ignore[attr-defined]
        serves_campaigns = "campaigns" in self.queue_names()  # type: ignore[attr-defined]
        if burst or not serves_campaigns:
            return super().work(*args, burst=burst, **kwargs)  # type: ignore[misc]
        # A long-running worker of the campaigns queue sends for the number slots it takes
        # from its own event loop while it goes on taking jobs (delivery.engine.send_service).
        start_up_objects_freeze()
        service_start()
        try:
            return super().work(*args, burst=burst, **kwargs)  # type: ignore[misc]
        finally:
            service_stop()

    def unsubscribe(self) -> None:
        """Stop listening for commands without waiting out the listener's minute-long sleep.

        RQ unsubscribes first, so that Redis's reply wakes the listening thread, and then
        stops it. When the thread handles the reply before the stop, its running flag is
        still set: it goes back to wait, up to its whole sleep time (60 s), for a new
        subscription, and redis-py 8.2's ``stop()`` now joins it. Every worker exit (a
        deploy's warm shutdown, a burst) then took up to a minute, long enough for the
        results of the jobs just run (RQ_RESULT_TTL_SECONDS) to expire meanwhile. Tripping
        the flag before the unsubscribe leaves the thread nothing to go back to.
        """
        listener = self.pubsub_thread  # type: ignore[attr-defined]
        if listener is not None:
            if _LISTENER_STOP_JOINS:
                listener.stop(timeout=0)  # trip the flag, do not wait
            else:
                listener.stop()  # before redis-py 8.2, stop() only trips the flag
        super().unsubscribe()  # type: ignore[misc]

    def execute_job(self, job: Any, queue: Any) -> Any:
        close_old_connections()
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            close_old_connections()


def start_up_objects_freeze() -> None:
    """Keep what start-up built out of every later full garbage collection.

    The modules, settings, models and URL patterns loaded by now live as long as the
    process, about a hundred thousand objects. A full collection scans them all, 40 ms on
    this machine, and stops the send loop meanwhile: every send granted just before it
    leaves that much later, and at fifty numbers one such pause put a second's last sends
    into the next second at many numbers at once. Frozen, they are no longer scanned; what
    the process allocates later is collected as before.
    """
    gc.collect()
    gc.freeze()


class SimpleWorker(_DjangoJobs, rq.SimpleWorker):
    """Runs jobs in this process (the default worker class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["serializer"] = JSONSerializer  # whatever django-rq's command passes
        super().__init__(*args, **kwargs)


Worker = SimpleWorker


class ForkingWorker(_DjangoJobs, rq.Worker):
    """Forks a work horse per job: a job that crashes its process cannot take the worker."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["serializer"] = JSONSerializer
        super().__init__(*args, **kwargs)
