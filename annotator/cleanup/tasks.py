"""Celery task of the clean-up after crashes, queued by beat every CLEANUP_MINUTES."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="annotator.tasks.clean_up", acks_late=False, time_limit=3600, soft_time_limit=3500)
def clean_up() -> dict:
    """Remove orphaned frame files and stale export staging folders older than CLEANUP_GRACE_MINUTES."""
    from annotator.cleanup.services import storage_clean_up

    return storage_clean_up()
