"""Synthetic sweeps: defined with their levels, generated as a job (one unit per cell, resumable without duplicates),
kept out of the benchmark's exports as an experiment, and published as their own release that the validator passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import transaction

from annotator.export.format import validate_dataset
from annotator.export.services import ExportOptions, benchmark_export, export_run
from annotator.models import Job, JobTask, Pair, Release, SweepItem
from annotator.synthetic.services import _make_items, sweep_create, sweep_publish
from subtlebench.errors import Conflict, Forbidden, Invalid
from tests.conftest import make_user
from tests.factories import make_pair
from tests.synthetic.sweep_fixtures import generated_sweep, run_units

pytestmark = pytest.mark.django_db


@pytest.fixture
def coordinator():
    return make_user("cora", "coordinator")


def test_it_generates_every_cell_with_its_factors_recorded(coordinator):
    sweep = generated_sweep(coordinator)
    assert sweep.job.status == Job.Status.SUCCEEDED and sweep.job.done == sweep.job.total == 6
    items = list(SweepItem.objects.filter(sweep=sweep).select_related("pair").order_by("cell", "index"))
    assert [(item.cell, item.index) for item in items] == [(c, i) for c in range(3) for i in range(2)]
    for item in items:
        pair = item.pair
        assert (pair.domain, pair.source, pair.category, pair.status) == (
            "synthetic",
            "synthetic",
            "quantity",
            "submitted",
        )
        info = pair.generation_info
        assert info["factors"]["object_size"] == item.levels["object_size"] == [10, 20, 30][item.cell]
        assert info["factors"]["object_count"] == 4 and info["sweep"] == sweep.pk and info["seed"] == 0
        assert pair.regions and pair.regions[0]["image"] in (1, 2)
    # Positions balanced: each cell's two items answer one each.
    answers = [item.pair.answer for item in items]
    assert answers.count("first image") == answers.count("second image") == 3
    # The same similarity check as every pair: the sweep's images are queued for embedding.
    embedding = Job.objects.filter(kind=Job.Kind.SIMILARITY).latest("pk")
    image_ids = set(embedding.tasks.get().kwargs["image_ids"])
    assert image_ids == {i for item in items for i in (item.pair.image_1_id, item.pair.image_2_id)}


def test_a_unit_run_again_makes_no_pair_twice(coordinator):
    sweep = sweep_create(
        user=coordinator,
        family="spatial",
        axes=[{"factor": "displacement", "levels": [5, 15]}],
        items_per_cell=3,
        size=128,
        factors={"object_size": 16, "object_count": 3},
        send=False,
    )
    # A worker died after it made item 0 of cell 0 (committed with its progress): the unit is requeued.
    with transaction.atomic():
        _make_items(sweep, 0, [0], sweep.cells()[0])
        sweep.job.advance(1)
    run_units(sweep)
    assert SweepItem.objects.filter(sweep=sweep).count() == 6
    assert sweep.job.status == Job.Status.SUCCEEDED and sweep.job.done == 6
    # A second delivery of a finished unit does nothing.
    JobTask.objects.filter(job=sweep.job).update(status=JobTask.Status.PENDING)
    Job.objects.filter(pk=sweep.job_id).update(status=Job.Status.RUNNING)
    run_units(sweep)
    assert SweepItem.objects.filter(sweep=sweep).count() == 6 and sweep.job.done == 6


def test_it_refuses_a_definition_it_cannot_make_naming_the_cell(coordinator):
    with pytest.raises(Invalid, match="cell object_count 200: quantity: 201 objects of 60 px do not fit"):
        sweep_create(
            user=coordinator,
            family="quantity",
            axes=[{"factor": "object_count", "levels": [4, 200]}],
            items_per_cell=1,
            factors={"object_size": 60},
            send=False,
        )
    with pytest.raises(Invalid, match="not a numeric factor of quantity"):
        sweep_create(user=coordinator, family="quantity", axes=[{"factor": "step", "levels": [1]}], items_per_cell=1)
    with pytest.raises(Invalid, match="levels go from 6 to 160"):
        sweep_create(
            user=coordinator, family="quantity", axes=[{"factor": "object_size", "levels": [2]}], items_per_cell=1
        )
    assert not Job.objects.filter(kind=Job.Kind.SWEEP).exists()


def test_only_a_coordinator_defines_a_sweep():
    reviewer = make_user("rita", "reviewer")
    with pytest.raises(Forbidden):
        sweep_create(
            user=reviewer, family="quantity", axes=[{"factor": "object_size", "levels": [10]}], items_per_cell=1
        )


def test_an_experiment_stays_out_of_the_benchmark_and_gets_a_release_the_validator_passes(coordinator, tmp_path):
    sweep = generated_sweep(coordinator, landing="accepted")
    with pytest.raises(Conflict, match="not generated yet|no exportable"):
        sweep_publish(sweep=generated_sweep(coordinator, landing="review", seed=5), user=coordinator)
    make_pair()  # one pair of the benchmark
    ours = benchmark_export(options=ExportOptions(out=str(tmp_path / "bench"), val_fraction=0.0))
    assert ours["considered"] == 1  # the sweep's pairs are kept apart
    job = export_run(job_id=sweep_publish(sweep=sweep, user=coordinator).pk)
    assert job.status == Job.Status.SUCCEEDED, job.errors
    release = Release.objects.get(options__sweep=sweep.pk)
    assert release.item_count == 6
    assert set(release.items.values_list("pair_id", flat=True)) == set(
        Pair.objects.filter(sweep_item__sweep=sweep).values_list("pk", flat=True)
    )
    assert [str(violation) for violation in validate_dataset(Path(job.result["out"]))] == []
    records = [json.loads(line) for line in (Path(job.result["out"]) / "data" / "test.jsonl").read_text().splitlines()]
    assert len(records) == 6 and {r["domain"] for r in records} == {"synthetic"}
    assert sorted(r["generation_info"]["factors"]["object_size"] for r in records) == [10, 10, 20, 20, 30, 30]


def test_a_retried_sweep_makes_only_the_missing_pairs(coordinator):
    from annotator.jobs.services import UnitRef, job_retry, job_task_abandon, job_task_claim

    sweep = sweep_create(
        user=coordinator,
        family="attribute",
        axes=[{"factor": "step", "levels": [0.1, 0.3]}],
        items_per_cell=2,
        size=128,
        factors={"object_size": 20, "object_count": 3},
        send=False,
    )
    first, second = sweep.job.tasks.order_by("pk")
    run_units(sweep, cells=[0])
    job_task_claim(unit=UnitRef(second.pk, celery_id="lost", worker="gone"))  # its worker then vanished
    second.refresh_from_db()
    job_task_abandon(task=second, reason="its worker stopped beating")
    sweep.job.refresh_from_db()
    assert sweep.job.status == Job.Status.FAILED and SweepItem.objects.filter(sweep=sweep).count() == 2
    again = job_retry(job=sweep.job, user=coordinator)
    sweep.refresh_from_db()
    run_units_of(again, sweep)
    sweep.refresh_from_db()
    assert sweep.job_id == again.pk
    again.refresh_from_db()
    assert again.status == Job.Status.SUCCEEDED and again.result["pairs"] == 4
    assert sorted(SweepItem.objects.filter(sweep=sweep).values_list("cell", "index")) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]


def run_units_of(job, sweep) -> None:
    from annotator.jobs.services import UnitRef
    from annotator.synthetic.services import sweep_run_unit

    for unit in job.tasks.order_by("pk"):
        ref = UnitRef(unit.pk, celery_id=f"retry-{unit.pk}", worker="test")
        sweep_run_unit(job_id=job.pk, sweep_id=sweep.pk, cell=unit.kwargs["cell"], unit=ref)


def test_an_item_id_taken_by_another_pair_fails_the_job_saying_which(coordinator):
    sweep = sweep_create(
        user=coordinator,
        family="quantity",
        axes=[{"factor": "object_size", "levels": [10]}],
        items_per_cell=3,
        size=96,
        send=False,
    )
    make_pair(category="quantity", source="synthetic", source_id=f"sweep{sweep.pk}-c0-i1")
    run_units(sweep)
    assert sweep.job.status == Job.Status.FAILED
    assert "cell 0" in sweep.job.errors[-1] and "items [0, 1, 2] cannot be written" in sweep.job.errors[-1]
    assert not SweepItem.objects.filter(sweep=sweep).exists()


def test_a_sweep_begun_by_an_older_generator_is_not_finished_by_this_one(coordinator):
    sweep = sweep_create(
        user=coordinator,
        family="attribute",
        axes=[{"factor": "step", "levels": [0.1, 0.3]}],
        items_per_cell=2,
        size=96,
        factors={"change": "colour", "object_size": 20, "object_count": 3},
        send=False,
    )
    run_units(sweep, cells=[0])
    made_before = []
    for pair in Pair.objects.filter(sweep_item__sweep=sweep).order_by("pk"):  # as version 1 recorded them
        pair.generation_info = {**pair.generation_info, "version": 1}
        pair.save(update_fields=["generation_info"])
        made_before.append((pair.pk, pair.answer, pair.image_1_id, pair.image_2_id))
    run_units(sweep, cells=[1])
    assert sweep.job.status == Job.Status.FAILED
    assert (
        "cell 1" in sweep.job.errors[-1] and "version 1 of the generator and this is version 2" in sweep.job.errors[-1]
    )
    assert list(SweepItem.objects.filter(sweep=sweep).values_list("cell", flat=True)) == [0, 0]
    # The older pairs stay as they were: nothing drawn again, nothing removed.
    kept = Pair.objects.filter(sweep_item__sweep=sweep).order_by("pk")
    assert [(p.pk, p.answer, p.image_1_id, p.image_2_id) for p in kept] == made_before
    assert {p.generation_info["version"] for p in kept} == {1}
