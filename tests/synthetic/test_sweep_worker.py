"""A sweep through a real Celery worker: the units are queued after the commit, the worker makes every cell's pairs,
the job succeeds and the sweep's images are queued for the similarity worker."""

from __future__ import annotations

from annotator.models import Job, SweepItem
from annotator.synthetic.services import sweep_create
from tests.conftest import make_user, wait_until


def test_a_worker_generates_the_sweep(celery_worker_process):
    coordinator = make_user("cora", "coordinator")
    celery_worker_process()
    sweep = sweep_create(
        user=coordinator,
        family="existence",
        axes=[{"factor": "object_count", "levels": [2, 8]}, {"factor": "object_size", "levels": [12, 24]}],
        factors={"options": 3},  # two wrong answers: the two objects of the smallest scene
        items_per_cell=3,
        size=128,
    )
    job = wait_until(
        lambda: Job.objects.filter(pk=sweep.job_id, status__in=("succeeded", "failed")).first(),
        seconds=120,
        message="the sweep job to end",
    )
    assert job.status == Job.Status.SUCCEEDED, job.errors
    assert job.done == job.total == 12 and job.result["pairs"] == 12
    cells = SweepItem.objects.filter(sweep=sweep).values_list("cell", "index").order_by("cell", "index")
    assert list(cells) == [(cell, index) for cell in range(4) for index in range(3)]
    assert Job.objects.filter(kind=Job.Kind.SIMILARITY, title="Similarity: embed 24 images").exists()
