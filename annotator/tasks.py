"""Celery tasks: thin wrappers that take ids, call one service, and declare their retries and time limits."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

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
