"""The sweep pages in a real browser at 1440x900: the form, a sweep's facts and pairs, and its heatmap with a model
run, a second model and a study's humans (one factor), and a grid (two factors). Nothing runs off to the side.
SWEEP_SCREENSHOTS=<folder> saves what they looked like."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotator.export.services import export_run
from annotator.llm.endpoints import endpoint_create
from annotator.models import Release
from annotator.synthetic.services import sweep_publish
from evaluation.runs.services import evaluation_run, evaluation_start
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.conftest import browser_login
from tests.model_server import ModelServer
from tests.synthetic.sweep_fixtures import SEEN_FROM, generated_sweep, sharp_below_acuity

pytestmark = pytest.mark.django_db(transaction=True)


def released(coordinator, **fields):
    sweep = generated_sweep(coordinator, landing="accepted", **fields)
    export_run(job_id=sweep_publish(sweep=sweep, user=coordinator).pk)
    return sweep, Release.objects.get(options__sweep=sweep.pk)


def run_model(coordinator, endpoint, release):
    run = evaluation_start(endpoint=endpoint, user=coordinator, source="release", release=release, split="test")
    evaluation_run(evaluation_id=run.pk)


def shot(page, name: str) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{name}: the page runs {overflow}px off to the side"
    if os.environ.get("SWEEP_SCREENSHOTS"):
        page.screenshot(path=str(Path(os.environ["SWEEP_SCREENSHOTS"]) / f"{name}.png"), full_page=True)


def test_the_sweep_pages_fit_the_window(page, coordinator):
    levels = [8, 12, 16, 20, 24, 28]
    one, release = released(
        coordinator,
        axes=[{"factor": "object_size", "levels": levels}],
        items_per_cell=6,
        size=192,
        factors={"object_count": 5, "difference": 2},
        title="Quantity: object size",
    )
    grid, grid_release = released(
        coordinator,
        axes=[{"factor": "object_size", "levels": [8, 14, 20, 26]}, {"factor": "object_count", "levels": [3, 9]}],
        items_per_cell=3,
        size=192,
        title="Quantity: size × count",
    )
    acuity = ModelServer(model="acuity-vlm")
    acuity.seen_policy = sharp_below_acuity
    first = ModelServer(model="first-option-vlm")
    servers = [acuity.start(), first.start()]
    try:
        endpoints = [
            endpoint_create(user=coordinator, name=server.model, base_url=server.base_url, model_id=server.model)
            for server in servers
        ]
        for endpoint in endpoints:
            run_model(coordinator, endpoint, release)
        run_model(coordinator, endpoints[0], grid_release)
    finally:
        for server in servers:
            server.stop()
    study = studies.study_create(name="Acuity", release=release, split="test", fraction=1.0, practice_count=0)
    participant = studies.participant_create(study=study)
    participant.consent()
    while (assignment := participation.participant_next_item(participant=participant)) is not None:
        right = assignment.permutation.index(0) + 1
        seen = assignment.item.pair.sweep_item.levels["object_size"] >= SEEN_FROM - 2
        participation.assignment_answer(
            participant=participant, token=assignment.token, position=right if seen else 3 - right
        )

    browser_login(page, coordinator.username)
    page.goto("/synthetic/")
    assert page.locator("#sweep-list tbody tr").count() == 2
    shot(page, "sweep-list")
    page.goto(f"/synthetic/{one.pk}/")
    assert page.locator("#sweep-thresholds tbody tr").count() == 3
    assert page.locator("#sweep-heatmap svg rect").count() == 1 + 3 * len(levels)
    shot(page, "sweep-detail")
    page.locator("select[name=target]").select_option("0.9")
    page.locator("#sweep-target button").click()
    page.wait_for_url("**target=0.9")
    assert "90% at object_size" in page.locator("#sweep-thresholds thead").inner_text().lower()
    page.goto(f"/synthetic/{grid.pk}/")
    assert page.locator("#sweep-heatmap svg").count() == 1
    shot(page, "sweep-grid")
