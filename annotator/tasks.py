"""Celery tasks: thin wrappers that take ids, call one service, and declare their retries and time limits."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from annotator.models import Job, Video
from annotator.similarity import embeddings_catch_up, embeddings_compute

# --- Videos and import ---


@shared_task(
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=1800,
    time_limit=1900,
)
def sample_video(*, job_id: int, video_id: int, source: str, every, count, labels, domain, title=""):
    """Sample one video of an import job. Idempotent: a video already sampled the same way is skipped."""
    from annotator.videos import video_sample

    return video_sample(
        job_id=job_id,
        video_id=video_id,
        source=source,
        every=every,
        count=count,
        labels=labels,
        domain=domain,
        title=title,
    )


# --- Pair picking ---------------------------------------------------------------------------------------------


@shared_task(soft_time_limit=60, time_limit=90, ignore_result=True)
def sweep_video_leases() -> int:
    """Return leases without a recent heartbeat to the pool (Celery beat runs it; idempotent)."""
    from annotator.picking import video_leases_sweep

    return video_leases_sweep()


# --- Similarity (DINOv3): routed to the `similarity` queue (settings: annotator.tasks.embed_*) ---------------
# One task per embedding run; the job row holds its progress and errors. A run embeds only what is still
# pending, so a retry or a redelivery after a worker crash never duplicates rows.
EMBED_LIMITS = {"acks_late": True, "time_limit": 12 * 3600, "soft_time_limit": 12 * 3600 - 60}


@shared_task(**EMBED_LIMITS)
def embed_video_frames(job_id: int, video_id: int) -> None:
    job = Job.objects.get(pk=job_id)
    video = Video.objects.filter(pk=video_id).first()
    if video is None:
        job.finish(error=f"Video {video_id} no longer exists.")
        return
    embeddings_compute(job=job, video=video)


@shared_task(**EMBED_LIMITS)
def embed_images(job_id: int, image_ids: list[int]) -> None:
    embeddings_compute(job=Job.objects.get(pk=job_id), image_ids=image_ids)


@shared_task(**EMBED_LIMITS)
def embed_pending(job_id: int | None = None, retry_failed: bool = False) -> None:
    """All pending images and stale pairs: queued by compute_embeddings, and by beat without a job."""
    if job_id is None:
        embeddings_catch_up()
        return
    embeddings_compute(job=Job.objects.get(pk=job_id), retry_failed=retry_failed)


# --- Export ---------------------------------------------------------------------------------------------------


@shared_task(acks_late=True, soft_time_limit=6 * 3600, time_limit=6 * 3600 + 60)
def export_benchmark_task(job_id: int) -> None:
    """Run one export job; a finished job is left alone, so a redelivery does nothing twice."""
    from annotator.export import export_run

    export_run(job_id=job_id)
