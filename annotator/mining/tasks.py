"""Celery task of pair mining: one unit of a mining job (the whole run, a block pair or the merge), on the
similarity queue (settings)."""

from __future__ import annotations

from celery import shared_task

from annotator.jobs.tasks import DATABASE_RETRIES


@shared_task(
    bind=True,
    name="annotator.tasks.mine_pairs",
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    **DATABASE_RETRIES,
)
def mine_pairs(self, job_id: int, unit_id: int | None = None, block: list | None = None, merge: bool = False) -> None:
    """Mine the job's scope, one block pair of it, or merge its block pairs; a run after a crash writes no
    candidate twice (annotator.mining.services)."""
    from annotator.jobs.services import unit_of
    from annotator.mining.services import mining_run

    mining_run(job_id=job_id, unit=unit_of(self, unit_id), block=block, merge=merge)
