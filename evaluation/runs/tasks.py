"""Celery task of a model evaluation. The name stays `annotator.tasks.*`, like every other job's task."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


# The broker's visibility timeout (13 h) exceeds this time limit, so a running task is never delivered twice.
@shared_task(
    bind=True,
    name="annotator.tasks.evaluate_model_task",
    acks_late=True,
    soft_time_limit=10 * 3600,
    time_limit=10 * 3600 + 60,
    **DATABASE_RETRIES,
)
def evaluate_model_task(self, evaluation_id: int, unit_id: int | None = None, job_id: int | None = None) -> None:
    """Run (or continue) one model evaluation; a unit already claimed or done is left alone. `job_id`: the job
    of a retry (annotator.jobs.services.job_retry), which takes the run over and continues it."""
    from annotator.jobs.services import unit_of
    from evaluation.runs.services import evaluation_run

    evaluation_run(evaluation_id=evaluation_id, unit=unit_of(self, unit_id), job_id=job_id)
