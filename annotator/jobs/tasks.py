"""Celery tasks of jobs: the sweeper (queued by beat), and the retry policy every task of a job declares."""

from __future__ import annotations

from celery import shared_task
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
