"""The release report from the database's sums is the item-by-item report to the last digit: on a fixed world stored
as a release (items whose clusters span categories and domains, a category in one cluster, items of the other split)
with the human answers of two studies (1 to 3 raters an item, 1-1 ties, an item rated in both studies, answers on
the other split, an answer not given yet, an attention check) and two runs (one leaving out items the humans
answered, failed requests, answers on the other split), every Fraction, interval and count of the humans', the
models' and the gaps' rows, on the page's report and the strategy table, is the one computed item by item in
Fractions from the same answers (tests/benchmark/test_integer_sums.py's anchor); a changed answer changes the kept
report."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from annotator.models import Release, ReleaseItem
from benchmark.report import report_json, scores_of_humans
from evaluation.models import Assignment, ModelItemResult, StudyItem
from evaluation.results.report import release_report, release_report_kept, release_strategy_table_kept
from evaluation.runs.naming import run_names
from evaluation.runs.selectors import model_answers_on_release
from evaluation.studies.release_answers import human_answers_on_release
from tests.benchmark.test_integer_sums import fixed_world, item_by_item_report
from tests.evaluation.results.test_run_names import make_release_run
from tests.factories import make_pair, make_release_study, release_item
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
        release_item(
            release,
            pair,
            item_id=item_id,
            split=split,
            position=position,
            category=category,
            domain=domain,
            cluster=cluster,
        )  # fmt: skip
        for position, (split, (item_id, category, domain, cluster)) in enumerate(placed, 1)
    )
    # The humans' answers in two studies (an item rated in both: its raters are those of both), answers on the
    # other split, and what the report leaves out: an answer not given yet, an attention check.
    humans = arguments["humans"]
    first = [entry for entry in humans if int(entry[1][1:].split("-")[0]) % 2]
    second = [entry for entry in humans if entry not in first]
    on_val = [("val0", "r1-0", True), ("val0", "r2-0", False), ("val1", "r3-0", True)]
    make_release_study(release, "First", first + on_val)
    make_release_study(release, "Second", second)
    make_release_study(
        release, "Not given", [(item_id, "late", True) for item_id, *_ in arguments["items"][:5]], answered=False
    )
    make_release_study(
        release, "Attention", [("i1", "r1-0", False), ("i2", "r1-0", True)], kind=StudyItem.Kind.ATTENTION
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
    stored = human_answers_on_release(release)
    test_ids = {item_id for item_id, *_ in arguments["items"]}
    assert len(stored) == len(humans) + 3 and len([entry for entry in stored if entry[0] in test_ids]) == len(humans)
    kept = release_report_kept(release, runs=runs, split="test")
    answers = model_answers_on_release(release, runs)
    on_test = {name: [entry for entry in given if entry[0] in test_ids] for name, given in answers.items()}
    anchor = item_by_item_report(**arguments | {"release": release.name, "release_hash": "1" * 64}, models=on_test)
    assert kept == anchor and report_json(kept) == report_json(anchor)
    assert kept == release_report(release, human_answers=stored, model_answers=answers)
    assert [row.micro.items for row in kept.models] == [len(on_test[row.label]) for row in kept.models]
    # The world reaches what it should: 1-1 ties, items of 1 and 3 raters, an item rated in both studies, a run
    # that left out items the humans answered (its gap counts fewer items than the other's).
    checked = {item_id: None for item_id in test_ids}
    scores = scores_of_humans(humans, checked, "test")
    assert {(score.numerator, score.denominator, raters) for score, raters, _ in scores.values()} >= {
        (1, 2, 2),
        (1, 1, 1),
        (2, 3, 3),
    }
    studies = [
        set(Assignment.objects.filter(item__study__name=name).values_list("item__release_item__item_id", flat=True))
        for name in ("First", "Second")
    ]
    assert studies[0] & studies[1]
    assert kept.humans.micro.items == len(scores) and kept.humans.micro.answers == len(humans)
    assert (
        sorted(row.micro.items for row in kept.gaps)[0]
        < kept.humans.micro.items
        == max(row.micro.items for row in kept.gaps)
    )
    # Read again: the kept rows, the same report; the strategy table's rows are the report's.
    assert release_report_kept(release, runs=runs, split="test") == kept
    names = run_names(runs)
    table = release_strategy_table_kept(
        release,
        model="gpt-x",
        strategies={run.strategy: (names[run.pk], run) for run in runs},
    )
    by_name = {row.label: row for row in kept.models}
    assert table.humans == kept.humans and table.items == kept.items == len(arguments["items"])
    for line, run in zip(table.strategies, runs, strict=True):
        assert line.row.micro == by_name[names[run.pk]].micro and line.row.categories == by_name[line.run].categories


def test_a_changed_answer_makes_new_figures(world):
    release, runs, arguments = world
    before = release_report_kept(release, runs=runs, split="test")
    row = runs[0].results.filter(is_correct=True).order_by("pk").first()
    ModelItemResult.objects.filter(pk=row.pk).delete()
    ModelItemResult.objects.create(
        **{f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields if f.attname != "id"}
        | {"is_correct": False}
    )
    after = release_report_kept(release, runs=runs, split="test")
    assert after != before
    humans = human_answers_on_release(release)
    assert after == release_report(release, human_answers=humans, model_answers=model_answers_on_release(release, runs))
    # A human answer changed: the humans' row and every gap row summed again.
    answer = Assignment.objects.filter(answered_at__isnull=False, item__kind=StudyItem.Kind.SCORED).order_by("pk")[0]
    Assignment.objects.filter(pk=answer.pk).delete()
    answer.pk, answer.correct = None, not answer.correct
    answer.save()
    again = release_report_kept(release, runs=runs, split="test")
    assert again.humans != after.humans and again.gaps != after.gaps and again.models == after.models
    humans = human_answers_on_release(release)
    assert again == release_report(release, human_answers=humans, model_answers=model_answers_on_release(release, runs))
