"""Celery tasks of videos and import. Names stay `annotator.tasks.*`: queued messages and routes use them."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.sample_video",
    soft_time_limit=1800,
    time_limit=1900,
    **DATABASE_RETRIES,
)
def sample_video(
    self, *, job_id: int, video_id: int, source: str, every, count, labels, domain, title="", unit_id=None
):
    """Sample one video of an import job. Idempotent: a unit already claimed or done, or a video already sampled
    the same way, changes nothing."""
    from annotator.jobs.services import unit_of
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
        unit=unit_of(self, unit_id),
    )
