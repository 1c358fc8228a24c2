"""Celery tasks of similarity (DINOv3), routed to the `similarity` queue by their names `annotator.tasks.embed_*`.

One task per embedding run; the job row holds its progress and errors. A run embeds only what is still
pending, so a retry or a redelivery after a worker crash never duplicates rows.
"""

from __future__ import annotations

from celery import shared_task

EMBED_LIMITS = {"acks_late": True, "time_limit": 12 * 3600, "soft_time_limit": 12 * 3600 - 60}


@shared_task(name="annotator.tasks.embed_video_frames", **EMBED_LIMITS)
def embed_video_frames(job_id: int, video_id: int) -> None:
    from annotator.models import Job, Video
    from annotator.similarity.services import embeddings_compute

    job = Job.objects.get(pk=job_id)
    video = Video.objects.filter(pk=video_id).first()
    if video is None:
        job.finish(error=f"Video {video_id} no longer exists.")
        return
    embeddings_compute(job=job, video=video)


@shared_task(name="annotator.tasks.embed_images", **EMBED_LIMITS)
def embed_images(job_id: int, image_ids: list[int]) -> None:
    from annotator.models import Job
    from annotator.similarity.services import embeddings_compute

    embeddings_compute(job=Job.objects.get(pk=job_id), image_ids=image_ids)


@shared_task(name="annotator.tasks.embed_pending", **EMBED_LIMITS)
def embed_pending(job_id: int | None = None, retry_failed: bool = False) -> None:
    """All pending images and stale pairs: queued by compute_embeddings, and by beat without a job."""
    from annotator.models import Job
    from annotator.similarity.services import embeddings_catch_up, embeddings_compute

    if job_id is None:
        embeddings_catch_up()
        return
    embeddings_compute(job=Job.objects.get(pk=job_id), retry_failed=retry_failed)
