"""Runs named by what they are, on every page that shows them; the release report of a split's finished runs, the runs
it draws chosen by the coordinator; one model's strategy x category table beside the humans."""

from __future__ import annotations

import csv
import io
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import pytest

from annotator.models import Job, Release
from benchmark.taxonomy import CATEGORIES
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.results.beside import models_overview
from evaluation.results.release_report import FIGURE_RUNS, release_report_choice
from evaluation.runs.naming import prompt_hash, run_name, run_names
from evaluation.runs.strategies import STRATEGIES
from evaluation.runs.summaries import evaluation_totals
from tests.factories import make_pair, make_release_study, release_item
from tests.model_fixtures import make_endpoint

PROMPT = {"system": "Look closely.", "user": "{question}\n{options}"}
TEST_ITEMS = [f"{category}_yt8m_v{n}_{n}" for category in CATEGORIES for n in range(3)]  # 3 per category
VAL_ITEMS = ["temporal_yt8m_val_1", "state_yt8m_val_2"]
# Humans: two raters on each of the first two items of a category, one right and one as the index says.
HUMAN_ANSWERS = [
    (item_id, rater, rater == "p1" or index % 2 == 0)
    for index, item_id in enumerate(TEST_ITEMS)
    if index % 3 != 2
    for rater in ("p1", "p2")
]


@pytest.fixture
def release(db):
    release = Release.objects.create(number=1, manifest_sha256="0" * 64, content_sha256="1" * 64, card="# card\n")
    for split, ids in (("test", TEST_ITEMS), ("val", VAL_ITEMS)):
        for position, item_id in enumerate(ids, 1):
            category = item_id.split("_")[0]
            pair = make_pair(category=category)
            release_item(
                release, pair, item_id=item_id, split=split, position=position, category=category, domain="natural",
                cluster=f"yt8m:{item_id}",
            ).save()  # fmt: skip
    return release


@pytest.fixture
def humans(release):
    """The answers of a study on the release."""
    make_release_study(release, "Humans", HUMAN_ANSWERS)
    return HUMAN_ANSWERS


def right(strategy_index: int, item_index: int) -> bool:
    """A known answer per strategy and item: each strategy right on another share of each category."""
    return (item_index + strategy_index) % 3 != 0 or (strategy_index + item_index) % 7 == 0


def make_release_run(
    release, endpoint, *, strategy="standard", split="test", status=Job.Status.SUCCEEDED, answers=None, **fields
):
    """A run on the release's split with `answers` {item_id: is_correct} stored as the job stores them."""
    job = Job.objects.create(kind=Job.Kind.MODEL_EVAL, title=f"Evaluate {endpoint.name}", status=status)
    fields.setdefault("prompt", dict(PROMPT))
    fields.setdefault("parameters", {"request": {"temperature": 0.5, "max_tokens": 1024}})
    run = ModelEvaluation.objects.create(
        endpoint=endpoint,
        job=job,
        source=ModelEvaluation.Source.RELEASE,
        release=release,
        split=split,
        strategy=strategy,
        **fields,
    )
    items = {row.item_id: row for row in release.items.all()}
    answers = answers if answers is not None else {item_id: True for item_id in TEST_ITEMS}
    ModelItemResult.objects.bulk_create(
        ModelItemResult(
            evaluation=run,
            release_item=items[item_id],
            pair_id=items[item_id].pair_id,
            question_id=item_id,
            category=items[item_id].category,
            domain="natural",
            options=["first image", "second image"],
            correct_letter="A",
            predicted_letter="A" if correct else "B",
            is_correct=correct,
        )
        for item_id, correct in answers.items()
    )
    ModelEvaluation.objects.filter(pk=run.pk).update(items=len(answers), **evaluation_totals(run))
    run.refresh_from_db()
    return run


# --- Names ----------------------------------------------------------------------------------------------------


def test_a_name_says_model_strategy_task_prompt_and_the_settings_off_their_defaults(release, settings):
    settings.MODEL_EVAL_TEMPERATURE, settings.MODEL_EVAL_MAX_TOKENS = 0.5, 1024
    model = make_endpoint("gpt-4o")
    plain = make_release_run(release, model)
    digest = prompt_hash(PROMPT)
    assert len(digest) == 8 and digest == prompt_hash({"user": PROMPT["user"], "system": PROMPT["system"]})
    assert run_name(plain) == f"gpt-4o · standard · multiple choice · prompt {digest}"
    tuned = make_release_run(
        release,
        model,
        strategy="grid",
        circular=True,
        prompt={"system": "Other.", "user": "{question} {options}"},
        parameters={"request": {"temperature": 0.0, "reasoning_effort": "high"}},
    )
    other = prompt_hash(tuned.prompt)
    assert other != digest
    assert run_name(tuned) == (
        f"gpt-4o · grid · multiple choice, circular · prompt {other} · temperature 0 · no token limit · reasoning high"
    )
    tuned.label = "ablation A"
    assert run_name(tuned).startswith("ablation A — gpt-4o · grid · multiple choice, circular")


def test_two_runs_with_the_same_name_get_their_numbers_and_a_name_like_a_numbered_one_stays_apart(release):
    model = make_endpoint("gpt-4o")
    first, second, third = (make_release_run(release, model) for _ in range(3))
    third.strategy = "grid"
    names = run_names([first, second, third])
    base = run_name(first)
    assert names == {
        first.pk: f"{base} (run {first.pk})",
        second.pk: f"{base} (run {second.pk})",
        third.pk: run_name(third),
    }
    third.strategy, third.label, third.prompt, third.parameters = "standard", "", {}, {}
    third.name, third.endpoint, third.endpoint_id = f"{base} (run {first.pk})", None, None
    assert len(set(run_names([first, second, third]).values())) == 3


# --- Told apart on every page ----------------------------------------------------------------------------------


@pytest.fixture
def two_strategies(release, humans):
    model = make_endpoint("gpt-4o")
    standard = make_release_run(release, model, answers={i: n % 2 == 0 for n, i in enumerate(TEST_ITEMS)})
    grid = make_release_run(release, model, strategy="grid", answers={i: n % 3 == 0 for n, i in enumerate(TEST_ITEMS)})
    failed = make_release_run(release, model, strategy="overlapped", status=Job.Status.FAILED, label="crashed")
    val = make_release_run(release, model, strategy="concatenated", split="val", label="other split",
                           answers={i: True for i in VAL_ITEMS})  # fmt: skip
    running = make_release_run(release, model, strategy="substract", status=Job.Status.RUNNING, label="still going")
    return {"model": model, "standard": standard, "grid": grid, "failed": failed, "val": val, "running": running}


def test_two_strategies_of_one_model_read_apart_on_compare_report_markdown_beside_and_api(
    two_strategies, client_for, coordinator, release
):
    standard, grid = two_strategies["standard"], two_strategies["grid"]
    names = [run_name(standard), run_name(grid)]
    assert names[0] != names[1] and "standard" in names[0] and "grid" in names[1]
    client = client_for(coordinator)
    compare = client.get("/models/compare/", {"release": release.pk}).content.decode()
    report = client.get("/releases/v1/report/").content.decode()
    markdown = client.get("/releases/v1/report/test/v1-test-report.md").content.decode()
    beside = client.get("/studies/models/").content.decode()
    for page in (compare, report, markdown, beside):
        assert all(name in page for name in names), page[:200]
    by_name = {model["name"]: model for model in models_overview()["models"]}
    assert [by_name[name]["detail"] for name in names] == ["app, latest answers of 1 run"] * 2
    assert by_name[names[0]]["key"] != by_name[names[1]]["key"]
    api = {run.pk: client.get(f"/api/models/runs/{run.pk}/").json() for run in (standard, grid)}
    assert [api[standard.pk]["name"], api[grid.pk]["name"]] == names
    assert api[standard.pk]["endpoint"] == "gpt-4o" and api[standard.pk]["label"] == ""
    runs_page = client.get("/models/").content.decode()
    detail = client.get(f"/models/runs/{grid.pk}/").content.decode()
    assert all(name in runs_page for name in names) and names[1] in detail


def test_the_report_holds_the_splits_finished_runs_only(two_strategies, client_for, coordinator, release):
    client = client_for(coordinator)
    report = client.get("/releases/v1/report/").content.decode()
    markdown = client.get("/releases/v1/report/test/v1-test-report.md").content.decode()
    csv_text = client.get("/releases/v1/report/test/v1-test-report.csv").content.decode()
    for page in (report, markdown, csv_text):
        assert "crashed" not in page and "other split" not in page and "still going" not in page
    rows = {row["row"] for row in csv.DictReader(io.StringIO(csv_text)) if row["kind"] == "model"}
    assert rows == {run_name(two_strategies["standard"]), run_name(two_strategies["grid"])}
    val = client.get("/releases/v1/report/val/v1-val-report.md").content.decode()
    assert "other split" in val and "crashed" not in val


def test_a_label_given_on_the_runs_page_and_by_the_api_leads_its_name_everywhere(
    two_strategies, client_for, coordinator, annotator, release
):
    standard, grid = two_strategies["standard"], two_strategies["grid"]
    client = client_for(coordinator)
    assert client.post(f"/models/runs/{grid.pk}/label/", {"label": "paper grid"}).status_code == 302
    grid.refresh_from_db()
    assert grid.label == "paper grid" and run_name(grid).startswith("paper grid — gpt-4o · grid")
    answer = client.post(
        f"/api/models/runs/{standard.pk}/label/", {"label": "paper standard"}, content_type="application/json"
    )
    assert answer.status_code == 200 and answer.json()["name"].startswith("paper standard — gpt-4o · standard")
    standard.refresh_from_db()
    for page in (
        client.get("/models/compare/", {"release": release.pk}),
        client.get("/releases/v1/report/"),
        client.get("/releases/v1/report/test/v1-test-report.md"),
        client.get("/releases/v1/report/test/v1-test-report.tex"),
        client.get("/studies/models/"),
        client.get(f"/models/runs/{grid.pk}/"),
    ):
        text = page.content.decode()
        assert "paper grid" in text and "gpt-4o · grid" in text, page.request["PATH_INFO"]
    bad = client.post(f"/api/models/runs/{grid.pk}/label/", {"label": "two\nlines"}, content_type="application/json")
    assert bad.status_code == 400
    # A GET of the form's target goes to the run's page (no blank 405); another method is refused.
    assert client.get(f"/models/runs/{grid.pk}/label/")["Location"] == f"/models/runs/{grid.pk}/"
    assert client.put(f"/models/runs/{grid.pk}/label/").status_code == 405
    refused = client_for(annotator).post(f"/models/runs/{grid.pk}/label/", {"label": "mine"})
    assert refused.status_code == 403
    client.logout()
    anonymous = client.post(f"/models/runs/{grid.pk}/label/", {"label": "mine"})
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    grid.refresh_from_db()
    assert grid.label == "paper grid"


# --- Choosing the runs the report draws ------------------------------------------------------------------------


def test_the_report_draws_the_chosen_runs_and_its_downloads_follow(two_strategies, client_for, coordinator):
    standard, grid = two_strategies["standard"], two_strategies["grid"]
    client = client_for(coordinator)
    page = client.get("/releases/v1/report/", {"runs": str(grid.pk)}).content.decode()
    markdown = client.get("/releases/v1/report/test/v1-test-report.md", {"runs": str(grid.pk)}).content.decode()
    svg = client.get("/releases/v1/report/test/v1-test-gaps.svg", {"runs": str(grid.pk)}).content.decode()
    assert run_name(grid) in markdown and run_name(standard) not in markdown
    assert f"Humans - {run_name(standard)}" not in page and f"Humans - {run_name(grid)}" in page
    assert run_name(grid) in svg and run_name(standard) not in svg
    assert f"v1-test-report.md?runs={grid.pk}" in page
    assert client.get("/releases/v1/report/", {"runs": "x"}).status_code == 400
    assert client.get("/releases/v1/report/", {"runs": str(two_strategies["failed"].pk)}).status_code == 400


def test_with_many_runs_the_figure_draws_the_best_few_and_says_so(release, humans):
    model = make_endpoint("gpt-4o")
    runs = [
        make_release_run(release, model, label=f"r{k}", answers={i: n < 3 * k for n, i in enumerate(TEST_ITEMS)})
        for k in range(1, FIGURE_RUNS + 3)
    ]
    choice = release_report_choice(release, split="test")
    assert len(choice.report.models) == len(runs) and len(choice.figure.gaps) == FIGURE_RUNS
    best = {run_name(run) for run in runs[-FIGURE_RUNS:]}  # more categories right: a higher macro
    assert {row.label for row in choice.figure.models} == best and "best" in choice.figure_note
    chosen = release_report_choice(release, split="test", run_ids=[runs[0].pk])
    assert [row.label for row in chosen.figure.models] == [run_name(runs[0])] and chosen.figure_note == ""


# --- The strategy x category table ------------------------------------------------------------------------------


def expected(fraction: Fraction) -> str:
    return str(
        (Decimal(fraction.numerator) / Decimal(fraction.denominator)).quantize(Decimal("0.000001"), ROUND_HALF_UP)
    )


def test_the_strategy_table_has_a_row_per_strategy_checked_cell_by_cell(release, humans, client_for, coordinator):
    model = make_endpoint("gpt-4o")
    other = make_endpoint("claude")
    make_release_run(release, model, strategy="grid", answers={i: False for i in TEST_ITEMS})  # superseded
    answers = {}
    for s, strategy in enumerate(STRATEGIES):
        answers[strategy] = {item_id: right(s, n) for n, item_id in enumerate(TEST_ITEMS)}
        make_release_run(release, model, strategy=strategy, answers=answers[strategy])
    make_release_run(release, model, strategy="grid", status=Job.Status.FAILED, answers={i: True for i in TEST_ITEMS})
    make_release_run(release, other, answers={i: True for i in TEST_ITEMS})
    client = client_for(coordinator)
    page = client.get("/releases/v1/report/", {"model": model.pk})
    assert page.status_code == 200 and 'id="report-strategies"' in page.content.decode()
    response = client.get(f"/releases/v1/report/test/v1-test-strategies-{model.pk}.csv")
    rows = list(
        csv.DictReader(
            io.StringIO(
                b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()
            )
        )
    )
    assert [row["row"] for row in rows] == [*STRATEGIES, "Humans"]
    for strategy, row in zip(STRATEGIES, rows, strict=False):
        assert row["model"] == "gpt-4o" and f"· {strategy} ·" in row["run"]
        per_category = {}
        for category in CATEGORIES:
            flags = [answers[strategy][i] for i in TEST_ITEMS if i.startswith(category + "_")]
            per_category[category] = Fraction(sum(flags), len(flags))
            assert row[category] == expected(per_category[category]), (strategy, category)
        assert row["avg"] == expected(sum(per_category.values()) / len(per_category)), strategy
        assert row["items"] == str(len(TEST_ITEMS))
    humans_row = rows[-1]
    for category in CATEGORIES:
        scores = []
        for item_id in TEST_ITEMS:
            if item_id.startswith(category + "_"):
                raters = [correct for i, _, correct in HUMAN_ANSWERS if i == item_id]
                if raters:
                    scores.append(Fraction(sum(raters), len(raters)))
        assert humans_row[category] == expected(sum(scores) / len(scores)), category
    report = release_report_choice(release, split="test").report
    assert humans_row["avg"] == expected(report.humans.macro.estimate)  # the report's humans row, the same rule
    markdown = client.get(f"/releases/v1/report/test/v1-test-strategies-{model.pk}.md").content.decode()
    latex = client.get(f"/releases/v1/report/test/v1-test-strategies-{model.pk}.tex").content.decode()
    first = per_category_percent(answers["standard"])
    assert f"| standard | {first} |" in markdown
    assert "\\toprule" in latex and "substract & " in latex and "two\\_stage & " in latex
    assert client.get(f"/releases/v1/report/test/v1-test-strategies-{model.pk}.md").content.decode() == markdown
    assert client.get(f"/releases/v1/report/test/v1-test-strategies-{other.pk}.csv").status_code == 200
    assert client.get("/releases/v1/report/test/v1-test-strategies-999999.csv").status_code == 404
    assert client.get("/releases/v1/report/", {"model": "999999"}).status_code == 400


def per_category_percent(answers: dict[str, bool]) -> str:
    cells = []
    for category in CATEGORIES:
        flags = [answers[i] for i in TEST_ITEMS if i.startswith(category + "_")]
        cells.append(Fraction(sum(flags), len(flags)))
    cells.append(sum(cells) / len(cells))
    return " | ".join(
        str((Decimal(c.numerator * 100) / Decimal(c.denominator)).quantize(Decimal("0.1"), ROUND_HALF_UP))
        for c in cells
    )
