"""Celery tasks of videos and import. Names stay `annotator.tasks.*`: queued messages and routes use them."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(
    name="annotator.tasks.sample_video",
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    soft_time_limit=1800,
    time_limit=1900,
)
def sample_video(*, job_id: int, video_id: int, source: str, every, count, labels, domain, title=""):
    """Sample one video of an import job. Idempotent: a video already sampled the same way is skipped."""
    from annotator.videos.services import video_sample

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
