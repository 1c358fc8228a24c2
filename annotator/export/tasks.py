"""Celery tasks of the export. Names stay `annotator.tasks.*`: queued messages use them."""

from __future__ import annotations

from celery import shared_task


@shared_task(
    name="annotator.tasks.export_benchmark_task", acks_late=True, soft_time_limit=6 * 3600, time_limit=6 * 3600 + 60
)
def export_benchmark_task(job_id: int) -> None:
    """Run one export job; a finished job is left alone, so a redelivery does nothing twice."""
    from annotator.export.services import export_run

    export_run(job_id=job_id)
