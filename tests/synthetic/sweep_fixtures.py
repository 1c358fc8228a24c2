"""Helpers of the sweep tests: define a sweep and run its units in this process, as a worker would."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from annotator.jobs.services import UnitRef
from annotator.models import Pair, Sweep
from annotator.similarity.services import current_fingerprint
from annotator.synthetic.generator import BACKGROUND
from annotator.synthetic.services import sweep_create, sweep_run_unit
from benchmark.regions import boxes_from_mask

SEEN_FROM = 18  # px: the fake model's (and the fake raters') acuity


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


def shapes_in(data_url: str) -> list[dict]:
    data = base64.b64decode(data_url.split(",", 1)[1])
    array = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    foreground = np.any(array != np.array(BACKGROUND, dtype=np.uint8), axis=2)
    return boxes_from_mask(foreground.astype(np.uint8), image=1, max_boxes=10_000)


def sharp_below_acuity(seen) -> str:
    """Count the shapes of each image: right when they are big enough to see, else the other image."""
    first, second = (shapes_in(url) for url in seen.images)
    more = "first image" if len(first) > len(second) else "second image"
    size = max(box["w"] for box in first + second)
    if size >= SEEN_FROM:
        return more
    return next(option for option in seen.options if option != more)
