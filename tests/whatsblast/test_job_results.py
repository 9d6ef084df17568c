"""Finished jobs' return values are kept RQ_RESULT_TTL_SECONDS, not RQ's default 500 s."""

from __future__ import annotations

import pytest
import redis
from django.test import override_settings

from tests.engine_support import work_burst
from whatsblast.core import queues

pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(RQ_RESULT_TTL_SECONDS=45)
def test_a_finished_job_keeps_its_result_for_the_setting(redis_conn: redis.Redis) -> None:
    job = queues.enqueue(queues.WEBHOOK_APPLY)
    queue = queues.get_queue(queues.MAINTENANCE)
    queued = queue.fetch_job(job.id)
    assert queued is not None and queued.result_ttl == 45

    work_burst(queues.MAINTENANCE)

    done = queue.fetch_job(job.id)
    assert done is not None
    assert done.get_status() == "finished"
    assert done.return_value() is not None  # there, for an operator to read
    for key in (f"rq:job:{job.id}", f"rq:results:{job.id}"):
        assert 0 < redis_conn.ttl(key) <= 45, key


@override_settings(RQ_RESULT_TTL_SECONDS=0)
def test_no_result_is_kept_when_the_setting_is_zero(redis_conn: redis.Redis) -> None:
    job = queues.enqueue(queues.WEBHOOK_APPLY)
    work_burst(queues.MAINTENANCE)
    assert not redis_conn.exists(f"rq:job:{job.id}", f"rq:results:{job.id}")
