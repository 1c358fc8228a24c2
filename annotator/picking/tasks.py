"""Celery tasks of pair picking. Names stay `annotator.tasks.*`: queued messages and beat use them."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="annotator.tasks.sweep_video_leases", soft_time_limit=60, time_limit=90, ignore_result=True)
def sweep_video_leases() -> int:
    """Return leases without a recent heartbeat to the pool (Celery beat runs it; idempotent)."""
    from annotator.picking.services import video_leases_sweep

    return video_leases_sweep()
