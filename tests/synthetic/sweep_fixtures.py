"""Helpers of the sweep tests: define a sweep and run its units in this process, as a worker would."""

from __future__ import annotations

from annotator.jobs.services import UnitRef
from annotator.models import Pair, Sweep
from annotator.similarity.services import current_fingerprint
from annotator.synthetic.services import sweep_create, sweep_run_unit


def run_units(sweep: Sweep, cells=None) -> None:
    for unit in sweep.job.tasks.order_by("pk"):
        if cells is None or unit.kwargs["cell"] in cells:
            ref = UnitRef(unit.pk, celery_id=f"test-{unit.pk}", worker="test")
            sweep_run_unit(job_id=unit.kwargs["job_id"], sweep_id=sweep.pk, cell=unit.kwargs["cell"], unit=ref)
    sweep.refresh_from_db()
    sweep.job.refresh_from_db()


def generated_sweep(user, **fields) -> Sweep:
    """A sweep made and generated, its pairs scored as passing the similarity check (the tiny test model's scores
    of these images say nothing; the check itself is the similarity package's, tested there)."""
    definition = {
        "family": "quantity",
        "axes": [{"factor": "object_size", "levels": [10, 20, 30]}],
        "items_per_cell": 2,
        "size": 128,
        "factors": {"object_count": 4},
        "send": False,
        **fields,
    }
    sweep = sweep_create(user=user, **definition)
    run_units(sweep)
    Pair.objects.filter(sweep_item__sweep=sweep).update(similarity=0.95, similarity_model=current_fingerprint())
    return sweep
