"""Celery tasks of similarity (DINOv3), routed to the `similarity` queue by their names `annotator.tasks.embed_*`.

One task per embedding run (a unit of its job, annotator.models.JobTask); the job row holds its progress and
errors. A delivery of a unit another worker runs or ran does nothing, and a run embeds only what is still pending,
so a retry or a redelivery after a worker crash never duplicates rows or progress.
"""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES

# The broker's visibility timeout (CELERY_VISIBILITY_TIMEOUT, 13 h) exceeds this time limit: see settings.
EMBED_LIMITS = {"acks_late": True, "time_limit": 12 * 3600, "soft_time_limit": 12 * 3600 - 60, **DATABASE_RETRIES}


@shared_task(bind=True, name="annotator.tasks.embed_video_frames", **EMBED_LIMITS)
def embed_video_frames(self, job_id: int, video_id: int, unit_id: int | None = None) -> None:
    from annotator.jobs.services import unit_of
    from annotator.similarity.services import embeddings_run

    embeddings_run(job_id=job_id, video_id=video_id, unit=unit_of(self, unit_id))


@shared_task(bind=True, name="annotator.tasks.embed_images", **EMBED_LIMITS)
def embed_images(self, job_id: int, image_ids: list[int], unit_id: int | None = None) -> None:
    from annotator.jobs.services import unit_of
    from annotator.similarity.services import embeddings_run

    embeddings_run(job_id=job_id, image_ids=image_ids, unit=unit_of(self, unit_id))


@shared_task(bind=True, name="annotator.tasks.embed_pending", **EMBED_LIMITS)
def embed_pending(self, job_id: int | None = None, retry_failed: bool = False, unit_id: int | None = None) -> None:
    """All pending images and stale pairs: queued by compute_embeddings, and by beat without a job."""
    from annotator.jobs.services import unit_of
    from annotator.similarity.services import embeddings_catch_up, embeddings_run

    if job_id is None:
        embeddings_catch_up()
        return
    embeddings_run(job_id=job_id, retry_failed=retry_failed, unit=unit_of(self, unit_id))
