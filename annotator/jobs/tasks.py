"""Celery tasks of jobs: the sweeper (queued by beat), the retry policy every task of a job declares, and what a
worker says of the units it runs (annotator/jobs/liveness.py) as each task starts and ends."""

from __future__ import annotations

from celery import shared_task, signals
from django.conf import settings
from django.db import InterfaceError, OperationalError

# What every task of a job declares. A database restart takes minutes: exponential backoff (5, 10, 20, 40, 60, 60 ...
# s, with jitter) over 10 retries rides it out. A retry keeps the task's id, so it claims its own unit again.
DATABASE_RETRIES = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": settings.TASK_RETRY_BACKOFF_SECONDS,
    "retry_backoff_max": settings.TASK_RETRY_BACKOFF_MAX_SECONDS,
    "retry_jitter": True,
    "max_retries": settings.TASK_MAX_RETRIES,
}


@shared_task(name="annotator.tasks.sweep_jobs", acks_late=False, time_limit=300, soft_time_limit=240)
def sweep_jobs() -> dict:
    """Send pending units, requeue or give up units whose worker vanished (annotator.jobs.services.jobs_sweep)."""
    from annotator.jobs.services import jobs_sweep

    return jobs_sweep()


@signals.task_prerun.connect
def units_liveness_on(task=None, **kwargs) -> None:
    """A worker process says which units it runs, from its first task on (an eager call in a test says nothing)."""
    from annotator.jobs import liveness

    if task is not None and not task.request.is_eager:
        liveness.enable()


@signals.task_postrun.connect
def units_settle(task_id=None, task=None, retval=None, state=None, **kwargs) -> None:
    """A task ended: its claims are no longer run here, and one it left running because it raised is settled now
    (paused for an outage, requeued with the error: annotator.jobs.services.job_task_failed)."""
    from annotator.jobs import liveness
    from annotator.jobs.services import job_task_failed

    if task is None or task.request.is_eager:
        return
    error = retval if state == "FAILURE" and isinstance(retval, BaseException) else None
    liveness.task_ended(celery_id=task_id or "", error=error, retrying=state == "RETRY", settle=job_task_failed)
