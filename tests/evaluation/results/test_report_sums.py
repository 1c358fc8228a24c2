"""The release report from the database's sums is the item-by-item report to the last digit: on a fixed world stored
as a release (items whose clusters span categories and domains, a category in one cluster, items of the other split)
with two runs (one leaving items out, failed requests, answers on the other split), every Fraction, interval and
count of the page's report and of the strategy table is the one computed item by item in Fractions from the same
answers (tests/benchmark/test_integer_sums.py's anchor); a changed answer changes the kept report."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from annotator.models import Release, ReleaseItem
from benchmark.report import report_json
from evaluation.models import ModelItemResult
from evaluation.results.report import release_report, release_report_kept, release_strategy_table_kept
from evaluation.runs.naming import run_names
from evaluation.runs.selectors import model_answers_on_release
from tests.benchmark.test_integer_sums import fixed_world, item_by_item_report
from tests.evaluation.results.test_run_names import make_release_run
from tests.factories import make_pair
from tests.model_fixtures import make_endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    arguments, answers = fixed_world()
    pair = make_pair()
    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    val = [(f"val{n}", "state", "natural", f"video{n}") for n in range(4)]
    placed = [("test", entry) for entry in arguments["items"]] + [("val", entry) for entry in val]
    ReleaseItem.objects.bulk_create(
        ReleaseItem(
            release=release,
            item_id=item_id,
            split=split,
            position=position,
            line="{}",
            provenance="{}",
            category=category,
            domain=domain,
            cluster=cluster,
            image_1=pair.image_1,
            image_2=pair.image_2,
            image_1_sha256="a" * 64,
            image_2_sha256="b" * 64,
            pair=pair,
        )
        for position, (split, (item_id, category, domain, cluster)) in enumerate(placed, 1)
    )
    model = make_endpoint("gpt-x")
    runs = []
    for strategy, label in (("standard", "m"), ("grid", "other")):
        given = dict(answers[label])
        given.update({item_id: True for item_id, *_ in val})  # the other split: left out of the test report
        failed = {item_id: None for item_id, *_ in arguments["items"][::11] if item_id not in given}
        runs.append(make_release_run(release, model, strategy=strategy, answers={**given, **failed}))
    cache.clear()
    return release, runs, arguments


def test_the_database_sums_give_the_item_by_item_report_to_the_last_digit(world):
    release, runs, arguments = world
    humans = arguments["humans"]
    kept = release_report_kept(release, runs=runs, human_answers=lambda: humans, split="test")
    answers = model_answers_on_release(release, runs)
    test_ids = {item_id for item_id, *_ in arguments["items"]}
    on_test = {name: [entry for entry in given if entry[0] in test_ids] for name, given in answers.items()}
    anchor = item_by_item_report(**arguments | {"release": release.name, "release_hash": "1" * 64}, models=on_test)
    assert kept == anchor and report_json(kept) == report_json(anchor)
    assert kept == release_report(release, human_answers=humans, model_answers=answers)
    assert [row.micro.items for row in kept.models] == [len(on_test[row.label]) for row in kept.models]
    assert all(row.micro is not None for row in kept.gaps)
    # Read again: the kept rows, the same report; the strategy table's rows are the report's.
    assert release_report_kept(release, runs=runs, human_answers=lambda: [], split="test") == kept
    names = run_names(runs)
    table = release_strategy_table_kept(
        release,
        model="gpt-x",
        human_answers=lambda: humans,
        strategies={run.strategy: (names[run.pk], run) for run in runs},
    )
    by_name = {row.label: row for row in kept.models}
    assert table.humans == kept.humans and table.items == kept.items == len(arguments["items"])
    for line, run in zip(table.strategies, runs, strict=True):
        assert line.row.micro == by_name[names[run.pk]].micro and line.row.categories == by_name[line.run].categories


def test_a_changed_answer_makes_new_figures(world):
    release, runs, arguments = world
    humans = arguments["humans"]
    before = release_report_kept(release, runs=runs, human_answers=lambda: humans, split="test")
    row = runs[0].results.filter(is_correct=True).order_by("pk").first()
    ModelItemResult.objects.filter(pk=row.pk).delete()
    ModelItemResult.objects.create(
        **{f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields if f.attname != "id"}
        | {"is_correct": False}
    )
    after = release_report_kept(release, runs=runs, human_answers=lambda: humans, split="test")
    assert after != before
    assert after == release_report(release, human_answers=humans, model_answers=model_answers_on_release(release, runs))
