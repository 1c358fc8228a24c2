"""Celery tasks of the annotator app: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task

# --- Pair picking ---------------------------------------------------------------------------------------------


@shared_task(soft_time_limit=60, time_limit=90, ignore_result=True)
def sweep_video_leases() -> int:
    """Return leases without a recent heartbeat to the pool (Celery beat runs it; idempotent)."""
    from annotator.picking import video_leases_sweep

    return video_leases_sweep()
