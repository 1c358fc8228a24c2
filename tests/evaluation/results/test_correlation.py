"""The benchmark against the world: rank correlations with other benchmarks' scores (checked against scipy on a fixed
table of five models), bootstrap intervals over models, the items' accuracy by similarity beside another benchmark's
items, the CSV imports that name each bad row and field and store nothing then, and the report's section."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from scipy import stats

from benchmark.correlation import (
    MIN_MODELS,
    average_ranks,
    bootstrap_interval,
    correlation,
    kendall,
    similarity_bins,
    spearman,
)
from benchmark.intervals import Scored, accuracy_interval, micro_mean
from evaluation.models import OtherBenchmark, OtherBenchmarkItem, OtherBenchmarkScore
from evaluation.results.correlation import CsvImportError, items_from_csv, scores_from_csv
from tests.evaluation.results.test_evaluation_release import make_pool
from tests.evaluation.results.test_run_names import make_release_run
from tests.model_fixtures import make_endpoint
from tests.release_factories import make_release

# Five models: accuracy here, score there (a tie on each side, and one pair out of order).
TABLE = [
    ("alpha", 0.81, 71.0),
    ("beta", 0.62, 55.5),
    ("gamma", 0.62, 60.0),
    ("delta", 0.44, 60.0),
    ("epsilon", 0.90, 68.2),
]


def test_spearman_and_kendall_are_scipys_on_a_fixed_table_of_five_models():
    ours = [row[1] for row in TABLE]
    theirs = [row[2] for row in TABLE]
    assert average_ranks(ours) == list(stats.rankdata(ours))
    assert spearman(ours, theirs) == pytest.approx(stats.spearmanr(ours, theirs).statistic, abs=1e-12)
    assert kendall(ours, theirs) == pytest.approx(stats.kendalltau(ours, theirs).statistic, abs=1e-12)  # tau-b
    result = correlation(TABLE)
    assert [model for model, _, _ in result.models] == sorted(model for model, _, _ in TABLE)
    assert result.spearman.value == pytest.approx(stats.spearmanr(ours, theirs).statistic, abs=1e-12)
    assert result.kendall.value == pytest.approx(stats.kendalltau(ours, theirs).statistic, abs=1e-12)


def test_the_bootstrap_interval_is_seeded_holds_the_estimate_and_collapses_on_a_perfect_order():
    ours = [row[1] for row in TABLE]
    theirs = [row[2] for row in TABLE]
    first = bootstrap_interval(ours, theirs, spearman)
    assert first == bootstrap_interval(ours, theirs, spearman)  # the same draws every time
    low, high, draws = first
    assert -1 <= low < spearman(ours, theirs) < high <= 1 and draws > 1000
    # Models in the same order on both sides: every draw (ties included) ranks them alike.
    assert bootstrap_interval([1, 2, 3, 4, 5], [10, 20, 30, 40, 50], kendall)[:2] == (1.0, 1.0)
    assert bootstrap_interval([1, 2, 3], [3, 1, 2], spearman) is None  # under MIN_MODELS: no interval
    assert MIN_MODELS == 4
    assert correlation(TABLE[:3]).spearman.low is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None and kendall([1, 1], [2, 3]) is None  # constant: undefined


def test_similarity_bins_count_each_item_once_with_the_reports_interval():
    items = [
        (0.81, Fraction(1), "v1"),
        (0.83, Fraction(0), "v1"),
        (0.83, Fraction(1, 2), "v2"),
        (0.90, Fraction(1), "v3"),
        (1.0, Fraction(1), "v4"),  # the upper edge belongs to the last bin
        (0.79, Fraction(1), "v5"),  # under the 0.8 rule: no bin
    ]
    bins = similarity_bins(items)
    assert [b.items for b in bins] == [3, 0, 1, 0, 1]
    first = micro_mean([Scored(Fraction(1), "v1"), Scored(Fraction(0), "v1"), Scored(Fraction(1, 2), "v2")])
    assert bins[0].accuracy == Fraction(1, 2) == first.estimate
    assert bins[0].interval == accuracy_interval(first, answers=3)
    assert bins[1].accuracy is None and bins[1].interval is None


def test_a_scores_file_with_bad_rows_names_each_by_row_and_field_and_a_good_one_reads():
    bad = b"model,score\nalpha,0.5\n,3\nbeta,abc\nalpha,0.7\ngamma,inf\n"
    with pytest.raises(CsvImportError) as raised:
        scores_from_csv("scores.csv", bad)
    assert raised.value.problems == [
        "scores.csv, row 3, field model: empty",
        "scores.csv, row 4, field score: 'abc' is not a number",
        "scores.csv, row 5, field model: 'alpha' again (first on row 2)",
        "scores.csv, row 6, field score: 'inf' is not a finite number",
    ]
    with pytest.raises(CsvImportError, match=r"scores.csv, row 1: no column score"):
        scores_from_csv("scores.csv", b"model,points\nalpha,1\n")
    assert scores_from_csv("s.csv", "\ufeffModel,Score\nalpha , 71\nbeta,55.5\n".encode()) == {
        "alpha": 71.0,
        "beta": 55.5,
    }
    with pytest.raises(CsvImportError) as raised:
        items_from_csv("items.csv", b"item_id,similarity,accuracy\na,0.9,1.5\nb,x,0.5\n")
    assert raised.value.problems == [
        "items.csv, row 2, field accuracy: 1.5 is outside 0 to 1",
        "items.csv, row 3, field similarity: 'x' is not a number",
    ]


@pytest.mark.django_db
def test_a_bad_file_on_the_page_stores_nothing_and_says_where(client_for, coordinator):
    benchmark = OtherBenchmark.objects.create(name="MMBench")
    OtherBenchmarkScore.objects.create(benchmark=benchmark, model="alpha", score=1.0)
    client = client_for(coordinator)
    upload = _file("scores.csv", b"model,score\nalpha,2\nbeta,nope\n")
    response = client.post(f"/models/benchmarks/{benchmark.pk}/", {"action": "scores_csv", "file": upload})
    assert response.status_code == 400
    assert "scores.csv, row 3, field score: &#x27;nope&#x27; is not a number" in response.content.decode()
    assert list(benchmark.scores.values_list("model", "score")) == [("alpha", 1.0)]  # alpha not changed to 2

    items = _file("items.csv", b"similarity,accuracy\n0.9,0.5\n0.95,1\n")
    response = client.post(f"/models/benchmarks/{benchmark.pk}/", {"action": "items_csv", "items-file": items})
    assert response.status_code == 302
    assert sorted(benchmark.items.values_list("similarity", "accuracy")) == [(0.9, 0.5), (0.95, 1.0)]

    asked = client.post(f"/models/benchmarks/{benchmark.pk}/", {"action": "delete"})  # asks first
    assert 'id="confirm-delete"' in asked.content.decode() and OtherBenchmark.objects.filter(pk=benchmark.pk).exists()
    gone = client.post(f"/models/benchmarks/{benchmark.pk}/", {"action": "delete", "confirmed": "yes"})
    assert gone.status_code == 302 and not OtherBenchmark.objects.filter(pk=benchmark.pk).exists()


def _file(name: str, content: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content, content_type="text/csv")


@pytest.mark.django_db
def test_the_reports_section_correlates_each_models_report_accuracy_with_the_other_benchmark(client_for, coordinator):
    """Five models with runs on a release (one with two strategies: its standard run is the one used), scores on an
    other benchmark for four of them: the section's rho and tau are scipy's on the report's macro accuracies."""
    pairs = make_pool(10)
    for n, pair in enumerate(pairs):
        type(pair).objects.filter(pk=pair.pk).update(similarity=0.8 + 0.019 * n)
        pair.refresh_from_db()
    release = make_release(pairs)
    items = list(release.items.order_by("position"))
    assert json.loads(items[3].provenance)["similarity"] == pytest.approx(0.857)
    rights = {"alpha": 9, "beta": 4, "gamma": 6, "delta": 2, "epsilon": 7}
    runs = {}
    for model, right in rights.items():
        endpoint = make_endpoint(model)
        answers = {item.item_id: n < right for n, item in enumerate(items)}
        runs[model] = make_release_run(release, endpoint, strategy="standard", answers=answers)
        if model == "alpha":  # a second strategy, all wrong: not the run the correlation takes
            make_release_run(release, endpoint, strategy="grid", answers=dict.fromkeys(answers, False))
    other = OtherBenchmark.objects.create(name="MMBench")
    for model, score in {"alpha": 80.0, "beta": 61.0, "gamma": 58.0, "delta": 40.0}.items():
        OtherBenchmarkScore.objects.create(benchmark=other, model=model, score=score)
    OtherBenchmarkItem.objects.bulk_create(
        OtherBenchmarkItem(benchmark=other, similarity=s, accuracy=a) for s, a in [(0.82, 0.9), (0.97, 0.4)]
    )

    from evaluation.results.release_report import release_report_choice

    choice = release_report_choice(release, split="test")
    macro = {}
    for row in choice.report.models:
        model = row.label.split(" · ")[0]
        if " · standard · " in row.label:
            macro[model] = float(row.macro.estimate)
    used = ["alpha", "beta", "delta", "gamma"]
    ours = [macro[m] for m in used]
    theirs = [80.0, 61.0, 40.0, 58.0]
    rho = stats.spearmanr(ours, theirs).statistic
    tau = stats.kendalltau(ours, theirs).statistic

    response = client_for(coordinator).get(f"/releases/{release.name}/report/test/correlation/")
    assert response.status_code == 200
    section = response.content.decode()
    assert f"{rho:.3f}" in section and f"{tau:.3f}" in section
    assert "No score on MMBench for: epsilon." in section
    assert "<svg" in section and 'id="similarity-bins"' in section
    # Our items by similarity: 0.800, 0.819 and 0.838 fall in the first bin (0.80-0.84), each answered by 6 runs.
    assert 'title="3 items"' in section

    download = client_for(coordinator).get(f"/releases/{release.name}/report/test/correlation.csv")
    [line] = download.content.decode().lstrip("\ufeff").splitlines()[1:]
    cells = line.split(",")
    assert cells[:2] == ["MMBench", "4"]
    assert float(cells[2]) == pytest.approx(rho, abs=1e-6) and float(cells[5]) == pytest.approx(tau, abs=1e-6)
    page = client_for(coordinator).get(f"/releases/{release.name}/report/test/").content.decode()
    assert f"/releases/{release.name}/report/test/correlation/" in page  # the report loads the section
