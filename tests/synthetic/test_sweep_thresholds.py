"""End to end on a sweep's experiment release: a fake model on a real loopback server that reads the two images
(it counts the shapes, and sees them only when they are at least 18 px) answers right only above that size; the
heatmap's cells and the fitted threshold recover the level. Humans who do the same in a study land on the same
axes, beside the model. The heatmap marks an interval that goes on past the levels."""

from __future__ import annotations

import pytest

from annotator.export.services import export_run
from annotator.llm.endpoints import endpoint_create
from annotator.models import Release
from annotator.synthetic.services import sweep_publish
from evaluation.results.heatmaps import heatmap_png, heatmap_svg
from evaluation.results.sweeps import Series, sweep_csv, sweep_results
from evaluation.runs.naming import run_name
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.conftest import make_user
from tests.model_server import ModelServer
from tests.synthetic.sweep_fixtures import SEEN_FROM, generated_sweep, sharp_below_acuity

pytestmark = pytest.mark.django_db

LEVELS = [8, 12, 16, 20, 24, 28]


@pytest.fixture
def released_sweep():
    coordinator = make_user("cora", "coordinator")
    sweep = generated_sweep(
        coordinator,
        axes=[{"factor": "object_size", "levels": LEVELS}],
        items_per_cell=6,
        size=192,
        factors={"object_count": 5, "difference": 2},
        landing="accepted",
    )
    job = export_run(job_id=sweep_publish(sweep=sweep, user=coordinator).pk)
    assert job.status == "succeeded", job.errors
    return coordinator, sweep, Release.objects.get(options__sweep=sweep.pk)


def test_the_heatmap_and_threshold_recover_the_models_acuity(released_sweep):
    coordinator, sweep, release = released_sweep
    server = ModelServer()
    server.seen_policy = sharp_below_acuity
    server.start()
    try:
        endpoint = endpoint_create(user=coordinator, name="acuity", base_url=server.base_url, model_id="tiny-vlm")
        run = evaluation_start(endpoint=endpoint, user=coordinator, source="release", release=release, split="test")
        run = evaluation_run(evaluation_id=run.pk)
    finally:
        server.stop()
    assert run.answered == 36 and run.failed == 0
    results = sweep_results(sweep, target=0.75)
    (model,) = results["series"]
    assert [cell["accuracy"] for cell in model.cells] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert all(cell["answered"] == 6 and cell["low"] < cell["accuracy"] + 1e-9 for cell in model.cells)
    (found,) = model.thresholds
    # Seen from 18 px: a step from 0% to 100% between the levels 16 and 20, its crossing midway, its interval spanning
    # the two levels; at a guess rate of 0.5, 6 of 6 right is still likely at 73%, a crossing just past 20.
    assert found["step"] and found["level"] == 18
    assert found["low"] == 16 and 20 < found["high"] < 20.5
    assert not (found["low_censored"] or found["high_censored"])
    text = sweep_csv(results, sweep)
    assert run_name(run) + ",model," in text and ",16,0,6,0.0000," in text and ",20,6,6,1.0000," in text
    assert ",0.75,18.000,16.000,20.115,0,0,1\n" in text  # the threshold's line: not censored, a step
    svg = heatmap_svg(results, sweep.axes).decode()
    assert svg.count("<rect") == 1 + len(LEVELS) and ">100%<" in svg and ">0%<" in svg
    assert "75% at object_size 18.0 [16.0, 20.1] (a step)" in svg
    assert heatmap_png(results, sweep.axes).startswith(b"\x89PNG")


def test_humans_of_a_study_on_the_sweep_land_on_the_same_axes(released_sweep):
    _, sweep, release = released_sweep
    study = studies.study_create(name="Acuity", release=release, split="test", fraction=1.0, practice_count=0)
    participant = studies.participant_create(study=study)
    participant.consent()
    while (assignment := participation.participant_next_item(participant=participant)) is not None:
        right = assignment.permutation.index(0) + 1
        seen = assignment.item.pair.sweep_item.levels["object_size"] >= SEEN_FROM
        position = right if seen else (2 if right == 1 else 1)
        participation.assignment_answer(participant=participant, token=assignment.token, position=position)
    results = sweep_results(sweep, target=0.75)
    (humans,) = [line for line in results["series"] if line.kind == "humans"]
    assert humans.label.startswith("Humans: Acuity")
    assert [cell["accuracy"] for cell in humans.cells] == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert 16 < humans.thresholds[0]["level"] < 20


def test_the_heatmap_marks_an_interval_that_goes_on_past_the_levels():
    cells = [{"accuracy": 0.5, "low": 0.3, "high": 0.7, "answered": 10}] * 3
    line = Series(label="run", kind="model", answers=[], cells=cells)
    axes = [{"factor": "object_size", "levels": [8, 12, 16]}]
    found = {"row": None, "level": 15.2, "low": 9.1, "high": 16, "target": 0.75, "step": False}
    line.thresholds = [{**found, "low_censored": False, "high_censored": True}]
    svg = heatmap_svg({"series": [line], "rows": [None]}, axes).decode()
    assert "75% at object_size 15.2 [9.1, &gt;16.0]" in svg
    line.thresholds[0].update(level=None, low=8, high=9.5, low_censored=True, high_censored=False)
    svg = heatmap_svg({"series": [line], "rows": [None]}, axes).decode()
    assert "75% not crossed within the levels [&lt;8.0, 9.5]" in svg
