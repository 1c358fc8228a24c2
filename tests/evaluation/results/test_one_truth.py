"""One truth for every figure: on one release, one study (two raters per item, a 1-1 tie among them) and two runs of
one model under two strategies (and a failed run, and a run on the other split), the release report and its
downloads, the study's dashboard, its JSON summary and the API, the models beside the humans and the paired
comparison give the same human accuracy and the same gap for each category, with the same interval, all equal to
the figures worked out here from the answers; each run reads apart by its name, and only the split's finished runs
are in the report."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction

import pytest

from annotator.models import Job
from benchmark.report import score_cell
from evaluation.models import ModelItemResult
from evaluation.results.beside import models_overview
from evaluation.results.compare import human_release_side, paired_compare, run_side
from evaluation.results.release_report import release_report_of
from evaluation.results.study_summary import study_summary
from evaluation.runs.naming import run_names
from evaluation.studies import participation
from evaluation.studies import services as studies
from tests.evaluation.results.test_evaluation_release import make_pool, ready_participant
from tests.evaluation.results.test_run_names import make_release_run
from tests.model_fixtures import make_endpoint
from tests.release_factories import make_release

pytestmark = pytest.mark.django_db

# Per test item (in release order): how many of its two raters are right. Each category gets a 1-1 tie.
RIGHT_OF_TWO = [2, 1, 2, 0, 1, 2, 2, 1, 1, 2]
CATEGORIES = ("state", "quality", "action")


@pytest.fixture
def world():
    pairs = make_pool(12)
    val = {pairs[10].pk, pairs[11].pk}
    release = make_release(pairs, split_of=lambda pair: "val" if pair.pk in val else "test")
    test_items = list(release.items.filter(split="test").order_by("position"))
    right_of_two = {item.pk: RIGHT_OF_TWO[n] for n, item in enumerate(test_items)}
    study = studies.study_create(name="Two raters", release=release, fraction=1, raters_per_item=2, practice_count=0)
    for rater in range(2):
        participant = ready_participant(study)
        while (assignment := participation.participant_next_item(participant=participant)) is not None:
            correct = rater < right_of_two[assignment.item.release_item_id]
            shown = assignment.permutation.index(0) + 1
            position = shown if correct else (shown % len(assignment.permutation)) + 1
            participation.assignment_answer(participant=participant, token=assignment.token, position=position)
    model = make_endpoint("gpt-x")
    standard = {item.item_id: n % 2 == 0 for n, item in enumerate(test_items)}
    grid = {item.item_id: n % 3 != 1 for n, item in enumerate(test_items)}
    val_ids = list(release.items.filter(split="val").values_list("item_id", flat=True))
    runs = {
        "standard": make_release_run(release, model, strategy="standard", answers=standard),
        "grid": make_release_run(release, model, strategy="grid", answers=grid),
        "failed": make_release_run(
            release, model, strategy="overlapped", status=Job.Status.FAILED, answers=dict.fromkeys(standard, True)
        ),
        "val": make_release_run(
            release,
            model,
            strategy="substract",
            split="val",
            answers=dict.fromkeys(val_ids, True),
        ),
    }
    return {"release": release, "study": study, "items": test_items, "right": right_of_two, "runs": runs}


def expected(world, category: str, run: str | None = None) -> tuple[Fraction, float, float]:
    """The humans' accuracy on a category (or the gap humans - run), worked out here from the answers: each item the
    share of its two raters who were right, each pair its own video (its own cluster)."""
    entries = []
    for item in world["items"]:
        if item.category != category:
            continue
        score = Fraction(world["right"][item.pk], 2)
        answers = 2
        if run is not None:
            model = world["runs"][run].results.get(release_item=item).is_correct
            score, answers = score - int(model), 3
        entries.append((item.item_id, score, answers, frozenset(), category, item.cluster))
    cell = score_cell(entries, gap=run is not None)
    return cell.estimate, cell.low, cell.high


def test_every_page_download_and_api_answer_gives_the_same_humans_and_gaps(world, client_for, coordinator):
    release, study, runs = world["release"], world["study"], world["runs"]
    names = run_names([runs["standard"], runs["grid"]])
    assert names[runs["standard"].pk] != names[runs["grid"].pk]
    assert "standard" in names[runs["standard"].pk] and "grid" in names[runs["grid"].pk]

    report = release_report_of(release, split="test")
    assert sorted(row.label for row in report.models) == sorted(names.values())  # no failed run, no val run
    summary = study_summary(study)
    api = client_for(coordinator).get(f"/api/studies/{study.pk}/results/").json()
    summary_json = json.loads(client_for(coordinator).get(f"/studies/{study.pk}/summary.json").content)
    download = client_for(coordinator).get("/releases/v1/report/test/v1-test-report.csv")
    assert download.status_code == 200
    report_csv = list(csv.DictReader(io.StringIO(download.content.decode())))
    beside = {model["name"]: model for model in models_overview(study)["models"]}
    dashboard = client_for(coordinator).get(f"/studies/{study.pk}/").content.decode()
    by_category = dashboard[
        dashboard.index('id="by-category"') : dashboard.index("</table>", dashboard.index('id="by-category"'))
    ]
    humans_side = human_release_side(release, "test")

    for category in CATEGORIES:
        estimate, low, high = expected(world, category)
        assert low < float(estimate) < high  # an interval with width
        cell = report.humans.categories[category]
        assert (cell.estimate, cell.low, cell.high) == (estimate, low, high)
        for shown in (summary, api, summary_json):
            figure = shown["accuracy"]["categories"][category]
            assert (figure["accuracy"], figure["low"], figure["high"]) == pytest.approx(
                (float(estimate), low, high), abs=1e-12
            )
        assert f"{100 * float(estimate):.1f}" in by_category and f"{100 * low:.1f}–{100 * high:.1f}" in by_category
        row = next(r for r in report_csv if r["row"] == "Humans" and r["key"] == category)
        assert (float(row["estimate"]), float(row["low"]), float(row["high"])) == pytest.approx(
            (float(estimate), low, high), abs=1e-6
        )
        for run in ("standard", "grid"):
            name = names[runs[run].pk]
            gap, gap_low, gap_high = expected(world, category, run)
            assert gap_low < float(gap) < gap_high
            report_gap = next(g for g in report.gaps if g.label.endswith(name)).categories[category]
            assert (report_gap.estimate, report_gap.low, report_gap.high) == (gap, gap_low, gap_high)
            beside_row = next(m for n, m in beside.items() if n == name or n.startswith(name))
            side = beside_row["categories"][category]
            assert (side["human"]["accuracy"], side["human"]["low"], side["human"]["high"]) == pytest.approx(
                (float(estimate), low, high), abs=1e-12
            )
            assert (side["gap"]["accuracy"], side["gap"]["low"], side["gap"]["high"]) == pytest.approx(
                (float(gap), gap_low, gap_high), abs=1e-12
            )
            paired = paired_compare(humans_side, run_side(runs[run], "test"))
            paired_row = next(r for r in paired["categories"] if r["name"] == category)
            assert (paired_row["a"]["accuracy"], paired_row["a"]["low"], paired_row["a"]["high"]) == pytest.approx(
                (float(estimate), low, high), abs=1e-12
            )
            assert (paired_row["difference"], paired_row["low"], paired_row["high"]) == pytest.approx(
                (float(gap), gap_low, gap_high), abs=1e-12
            )

    page = client_for(coordinator).get("/releases/v1/report/test/").content.decode()
    markdown = client_for(coordinator).get("/releases/v1/report/test/v1-test-report.md").content.decode()
    for name in names.values():
        assert name in page and name in markdown
    for excluded in ("overlapped", "substract"):
        assert excluded not in markdown


def test_the_report_rows_are_summed_once_per_latest_answer_and_kept_figures_are_the_computed_ones(world, monkeypatch):
    from evaluation.results import report as reports
    from evaluation.runs.selectors import model_answers_on_release, report_runs
    from evaluation.studies.release_answers import human_answers_on_release

    release, runs = world["release"], world["runs"]
    computed = []
    humans, model, gap = reports.human_row_sums, reports.model_row_sums, reports.gap_row_sums
    monkeypatch.setattr(reports, "human_row_sums", lambda *a: computed.append("humans") or humans(*a))
    monkeypatch.setattr(reports, "model_row_sums", lambda r, s, run: computed.append(run.pk) or model(r, s, run))
    monkeypatch.setattr(reports, "gap_row_sums", lambda r, s, run: computed.append(-run.pk) or gap(r, s, run))
    first = release_report_of(release, split="test")
    again = release_report_of(release, split="test")  # the page, then a download: each row summed once
    shown = report_runs(release, "test")
    every = ["humans", *(run.pk for run in shown), *(-run.pk for run in shown)]
    assert sorted(computed, key=str) == sorted(every, key=str) and again == first
    uncached = reports.release_report(
        release,
        human_answers=human_answers_on_release(release),
        model_answers=model_answers_on_release(release, shown),
        split="test",
    )
    assert again == uncached  # every Fraction, interval and count the same
    # A model's answer replaced: a new key, the figures computed again and changed.
    row = runs["standard"].results.order_by("pk").first()
    ModelItemResult.objects.filter(pk=row.pk).delete()
    ModelItemResult.objects.create(
        **{f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields if f.attname != "id"}
        | {"is_correct": not row.is_correct}
    )
    computed.clear()
    changed = release_report_of(release, split="test")
    # Its model row and its gap row summed again; the humans' row and the other run's rows kept.
    assert computed == [runs["standard"].pk, -runs["standard"].pk] and changed != first
    assert changed == reports.release_report(
        release,
        human_answers=human_answers_on_release(release),
        model_answers=model_answers_on_release(release, shown),
        split="test",
    )
