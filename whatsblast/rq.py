"""RQ worker classes that always speak JSON.

Jobs are enqueued with RQ's JSON serializer (settings.RQ_QUEUES): job payloads stay
readable, and nothing a worker loads can execute code the way a pickle can. django-rq's
``rqworker`` command passes the pickle serializer unless told otherwise, so these classes
(settings.RQ["WORKER_CLASS"]) pin JSON whatever they are given, keeping the documented
``manage.py rqworker transactional campaigns maintenance --with-scheduler`` correct.
"""

from __future__ import annotations

from typing import Any

import rq
from rq.serializers import JSONSerializer


class Worker(rq.Worker):
    """Forks a work horse per job (a crashed job cannot take the worker down)."""

    def __init__(self, *args: Any, serializer: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, serializer=JSONSerializer, **kwargs)


class SimpleWorker(rq.SimpleWorker):
    """Runs jobs in-process: for tests and for platforms without fork."""

    def __init__(self, *args: Any, serializer: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, serializer=JSONSerializer, **kwargs)
