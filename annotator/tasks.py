"""Celery tasks: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task

# --- Export ---------------------------------------------------------------------------------------------------


@shared_task(acks_late=True, soft_time_limit=6 * 3600, time_limit=6 * 3600 + 60)
def export_benchmark_task(job_id: int) -> None:
    """Run one export job; a finished job is left alone, so a redelivery does nothing twice."""
    from annotator.export import export_run

    export_run(job_id=job_id)
