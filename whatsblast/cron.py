"""The periodic sweep: ``manage.py rqcron whatsblast.cron`` (or a project cron config importing it).

The sweep applies events a missed enqueue left behind (Redis was down, a worker died) and
retries statuses that matched no message yet, so it must run even when no POST arrives.
"""

from rq import cron

from whatsblast.jobs import webhook_apply_job

SWEEP_INTERVAL_SECONDS = 30

cron.register(webhook_apply_job, "maintenance", interval=SWEEP_INTERVAL_SECONDS)
