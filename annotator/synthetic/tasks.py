"""Celery task of synthetic sweeps: one unit (one cell) of a sweep's job."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.sweep_cell",
    acks_late=True,
    soft_time_limit=1800,
    time_limit=1900,
    **DATABASE_RETRIES,
)
def sweep_cell(self, job_id: int, sweep_id: int, cell: int, unit_id: int | None = None) -> None:
    """Make the cell's pairs not made yet (annotator.synthetic.services.sweep_run_unit)."""
    from annotator.jobs.services import unit_of
    from annotator.synthetic.services import sweep_run_unit

    sweep_run_unit(job_id=job_id, sweep_id=sweep_id, cell=cell, unit=unit_of(self, unit_id))
