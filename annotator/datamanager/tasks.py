"""Celery task of the data manager's bulk actions: one unit (up to BULK_UNIT_SIZE items) of a bulk job."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.bulk_items",
    acks_late=True,
    soft_time_limit=1800,
    time_limit=1900,
    **DATABASE_RETRIES,
)
def bulk_items(self, job_id: int, ids: list[int], unit_id: int | None = None) -> None:
    """Act on the unit's items; items a previous run of this unit did are skipped (annotator.datamanager.bulk)."""
    from annotator.datamanager.bulk import bulk_run_unit
    from annotator.jobs.services import unit_of

    bulk_run_unit(job_id=job_id, ids=ids, unit=unit_of(self, unit_id))
