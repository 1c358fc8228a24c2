"""The benchmark's counts are the benchmark's: a 70-pair sweep kept apart as an experiment (made, reviewed, answered by
a model and captioned) leaves the overview, /stats/, the targets, "models right" and the pools drawn for the
benchmark as they were, while the sweep's own pages count it. Every benchmark count is of `Pair.objects.in_benchmark()`,
the queryset the export starts from."""

from __future__ import annotations

import pytest
from django.utils import timezone

from annotator.captions import services as captions
from annotator.export.services import ExportOptions, export_queryset
from annotator.home import targets_to_go
from annotator.models import Pair
from annotator.picking import services as picking
from annotator.picking.questions import answer_position_next
from annotator.stats import figures
from annotator.stats import services as stats
from benchmark.taxonomy import FIRST_IMAGE, SECOND_IMAGE
from evaluation.studies.services import study_pool
from tests.factories import make_pair
from tests.model_fixtures import make_endpoint, make_run, record
from tests.synthetic.sweep_fixtures import generated_sweep

pytestmark = pytest.mark.django_db

CAPTION = "The red square moved a little to the right of where it was."
EXPERIMENT = {
    "axes": [{"factor": "object_size", "levels": [8, 10, 12, 14, 16, 18, 20]}],
    "items_per_cell": 10,
    "landing": "accepted",
}


def benchmark_world(annotator, reviewer, coordinator):
    """Video pairs in every state (one accepted one without a similarity: held back), a small sweep that is part of
    the benchmark, targets, and a model's answers. Returns the model's run."""
    for category in ("quantity", "quantity", "temporal"):
        pair = make_pair(status=Pair.Status.SUBMITTED, category=category, author=annotator)
        picking.pair_review(pair=pair, reviewer=reviewer, decision="accept", version=pair.version)
    returned = make_pair(status=Pair.Status.SUBMITTED, category="quantity", author=annotator)
    picking.pair_review(pair=returned, reviewer=reviewer, decision="reject", version=1, reason="Two changes.")
    make_pair(status=Pair.Status.SUBMITTED, category="quantity", author=annotator)
    make_pair(category="quantity", author=annotator, similarity=None)
    generated_sweep(coordinator, landing="accepted", experiment=False, items_per_cell=1, seed=3)  # 3 pairs
    stats.targets_set(counts={("quantity", "natural"): 10, ("quantity", "synthetic"): 10, ("temporal", "natural"): 4})
    run = make_run(make_endpoint("model-a"))
    for pair in Pair.objects.in_benchmark().order_by("pk"):
        record(run, pair, pair.category == "temporal")
    return run


def benchmark_figures(today) -> dict:
    return {
        "overview": picking.overview_figures() | {"experiments": None},
        "models_right": picking.model_success_by_category(),
        "stats": figures.team_figures(days=7, today=today),
        "targets": figures.target_progress(),
        "home_targets": targets_to_go(),
        "caption_pool": captions.caption_pool().count(),
        "study_pool": study_pool().count(),
        "next_quantity_answer": answer_position_next("quantity"),
    }


def experiment_sweep(coordinator, reviewer, annotator2, run):
    """70 quantity pairs kept apart, made in the coordinator's name and accepted; two of them reopened and decided
    again by a reviewer (one rejected), all answered right by the model, one captioned."""
    sweep = generated_sweep(coordinator, **EXPERIMENT)
    pairs = list(Pair.objects.filter(sweep_item__sweep=sweep).order_by("pk"))
    # Every answer on the first image: counted, they would tip the next binary pair of the benchmark to the second.
    Pair.objects.filter(pk__in=[p.pk for p in pairs]).update(answer=FIRST_IMAGE, distractors=[SECOND_IMAGE])
    for pair, decision in ((pairs[0], "reject"), (pairs[1], "accept")):
        picking.pair_reopen(pair=pair, by=coordinator, reason="Look again.")
        picking.pair_review(pair=pair, reviewer=reviewer, decision=decision, version=pair.version, reason="Too easy.")
    for pair in pairs:
        record(run, pair, True)
    captions.caption_batch_create(created_by=coordinator, title="exp", selection="list", pair_ids=[pairs[1].pk])
    task = captions.caption_task_lease(user=annotator2)
    captions.caption_submit(task_id=task.pk, user=annotator2, text=CAPTION)
    return sweep


def test_an_experiment_sweep_counts_on_its_own_pages_and_leaves_every_benchmark_count_as_it_was(
    client_for, annotator, annotator2, reviewer, coordinator
):
    today = timezone.localdate()
    run = benchmark_world(annotator, reviewer, coordinator)
    before = benchmark_figures(today)
    # The world counts something everywhere, so an experiment counted anywhere would show.
    quantity = next(row for row in before["overview"]["categories"] if row["name"] == "quantity")
    counted = (quantity["in_benchmark"], quantity["held_back"], quantity["submitted"], quantity["rejected"])
    assert counted == (5, 1, 1, 1)
    assert before["models_right"]["quantity"]["answers"] == 5 and before["models_right"]["quantity"]["correct"] == 0
    targets = {(row["category"], row["domain"]): row["in_benchmark"] for row in before["targets"]}
    assert targets == {("quantity", "natural"): 2, ("quantity", "synthetic"): 3, ("temporal", "natural"): 1}
    assert before["home_targets"]["to_go"] == 24 - 6
    assert [p["username"] for p in before["overview"]["people"]] == ["alice", "cora"]  # cora: the benchmark's sweep
    assert [(p["username"], p["submitted"]) for p in before["stats"]["annotator_totals"]] == [("alice", 6), ("cora", 3)]
    assert [r["username"] for r in before["stats"]["reviewers"]] == ["rita"]
    assert before["next_quantity_answer"] == FIRST_IMAGE  # the benchmark's binary answers mostly name the second

    sweep = experiment_sweep(coordinator, reviewer, annotator2, run)

    assert benchmark_figures(today) == before
    # The export's own selection is what the overview counts.
    exported = export_queryset(ExportOptions(out="/unused"))
    assert exported.count() == before["overview"]["totals"]["in_benchmark"] == 6
    assert not exported.filter(sweep_item__sweep=sweep).exists()
    assert picking.overview_figures()["experiments"] == 70

    client = client_for(coordinator)
    listed = client.get("/synthetic/").content.decode()
    row = listed[listed.index(f'href="/synthetic/{sweep.pk}/"') :]
    assert '<td class="num">70</td>' in row[: row.index("</tr>")]
    detail = client.get(f"/synthetic/{sweep.pk}/").content.decode()
    assert "69 accepted · 1 rejected" in detail and "69 exportable" in detail
    overview = client.get("/overview/").content.decode()
    assert "70 pairs of synthetic sweeps kept apart as experiments are not counted here" in overview
    total = overview[overview.index('<tr class="total">') :]
    assert '<td class="num"><strong>6</strong></td><td class="num">1</td>' in total[: total.index("</tr>")]
