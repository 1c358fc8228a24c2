"""Celery tasks of the export. Names stay `annotator.tasks.*`: queued messages use them."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


# The broker's visibility timeout (CELERY_VISIBILITY_TIMEOUT, 13 h) exceeds this time limit: see settings.
@shared_task(
    bind=True,
    name="annotator.tasks.export_benchmark_task",
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    **DATABASE_RETRIES,
)
def export_benchmark_task(self, job_id: int, unit_id: int | None = None) -> None:
    """Run one export job; a unit already claimed or done is left alone, so a redelivery does nothing twice."""
    from annotator.export.services import export_run
    from annotator.jobs.services import unit_of

    export_run(job_id=job_id, unit=unit_of(self, unit_id))


@shared_task(
    bind=True,
    name="annotator.tasks.export_zip_task",
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    **DATABASE_RETRIES,
)
def export_zip_task(self, job_id: int, unit_id: int | None = None) -> None:
    """Build the zip of a local export (annotator.export.services.export_zip_run); a redelivery does nothing twice."""
    from annotator.export.services import export_zip_run
    from annotator.jobs.services import unit_of

    export_zip_run(job_id=job_id, unit=unit_of(self, unit_id))
