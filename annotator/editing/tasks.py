"""Celery task of edit jobs: one unit (the job's images, one after another) on the default queue."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.edit_images",
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    **DATABASE_RETRIES,
)
def edit_images(self, job_id: int, unit_id: int | None = None) -> None:
    """Edit the job's images still pending (annotator.editing.services): a requeued unit goes on where it stopped."""
    from annotator.editing.services import edit_job_run
    from annotator.jobs.services import unit_of

    edit_job_run(job_id=job_id, unit=unit_of(self, unit_id))
