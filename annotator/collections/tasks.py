"""Celery task of the collection import. The name stays `annotator.tasks.*`, as every task's."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.import_collection",
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    **DATABASE_RETRIES,
)
def import_collection(self, job_id: int, source: str, name: str, domain: str, layout: str, unit_id=None) -> None:
    """Import one collection (annotator.collections.services); a redelivered message does nothing twice."""
    from annotator.collections.services import collection_import_run
    from annotator.jobs.services import unit_of

    collection_import_run(
        job_id=job_id, source=source, name=name, domain=domain, layout=layout, unit=unit_of(self, unit_id)
    )
