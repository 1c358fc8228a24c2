"""The benchmark against the world: other benchmarks' scores for the models that ran here (entered or imported from a
CSV), their rank correlation with the release report's accuracies, and the items' accuracy by similarity beside
another benchmark's items (benchmark.correlation computes, benchmark.correlation_figure draws).

Our figure for a model is its macro accuracy in the release report, from the report itself (one definition): among
the report's runs that are drawn, the model's run with the standard strategy, else its first run; the section names
the run it used. A benchmark marked "lower is better" (an error rate) has its scores negated, so a positive
correlation always means "the same order".
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from fractions import Fraction

from django import forms
from django.contrib import messages
from django.db import transaction
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from annotator.models import Release
from benchmark.correlation import SIMILARITY_EDGES, Bin, Correlation, correlation, similarity_bins
from benchmark.correlation_figure import bins_svg, scatter_svg
from benchmark.report import percent
from evaluation.models import ModelEvaluation, ModelItemResult, OtherBenchmark, OtherBenchmarkItem, OtherBenchmarkScore
from evaluation.results.release_report import chosen_runs, load_release, release_report_choice
from evaluation.runs.naming import run_names
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.spreadsheet_csv import SafeCsvWriter, csv_download
from subtlebench.text import NAME_MAX, NOTE_MAX

STANDARD = "standard"
ITEMS_MAX = 200_000  # rows of an items file
CSV_MAX_BYTES = 20 * 1024 * 1024
ERRORS_SHOWN = 20


class CsvImportError(ValueError):
    """A file that cannot be imported: each problem names the file, the row and the field; nothing was stored."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        shown = problems[:ERRORS_SHOWN]
        more = len(problems) - len(shown)
        super().__init__("; ".join(shown) + (f"; and {more} more" if more else ""))


# --- Reading the files ------------------------------------------------------------------------------------------


def _rows(name: str, data: bytes, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    """(line number, row) of a CSV file with a header naming the `required` columns (any case, any order)."""
    if len(data) > CSV_MAX_BYTES:
        raise CsvImportError([f"{name}: {len(data)} bytes, over the limit of {CSV_MAX_BYTES} bytes"])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CsvImportError([f"{name}: not UTF-8 text (byte {error.start})"]) from error
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [(field or "").strip().lower() for field in (reader.fieldnames or [])]
    missing = [column for column in required if column not in header]
    if missing:
        raise CsvImportError(
            [f"{name}, row 1: no column {', '.join(missing)} (the header must name {', '.join(required)})"]
        )
    reader.fieldnames = header
    try:
        return [(reader.line_num, row) for row in reader]
    except csv.Error as error:
        raise CsvImportError([f"{name}, row {reader.line_num}: not valid CSV ({error})"]) from error


def _number(name: str, line: int, field: str, raw, low: float | None = None, high: float | None = None):
    """(value, problem): a finite number within [low, high]."""
    text = (raw or "").strip()
    try:
        value = float(text)
    except ValueError:
        return None, f"{name}, row {line}, field {field}: {text!r} is not a number"
    if not math.isfinite(value):
        return None, f"{name}, row {line}, field {field}: {text!r} is not a finite number"
    if (low is not None and value < low) or (high is not None and value > high):
        return None, f"{name}, row {line}, field {field}: {text} is outside {low:g} to {high:g}"
    return value, None


def scores_from_csv(name: str, data: bytes) -> dict[str, float]:
    """{model: score} of a CSV with the columns `model` and `score`; every problem at once, by row and field."""
    scores, seen, problems = {}, {}, []
    for line, row in _rows(name, data, ("model", "score")):
        model = " ".join((row.get("model") or "").split())
        if not model:
            problems.append(f"{name}, row {line}, field model: empty")
            continue
        if len(model) > NAME_MAX:
            problems.append(f"{name}, row {line}, field model: longer than {NAME_MAX} characters")
            continue
        if model in seen:
            problems.append(f"{name}, row {line}, field model: {model!r} again (first on row {seen[model]})")
            continue
        seen[model] = line
        value, problem = _number(name, line, "score", row.get("score"))
        if problem:
            problems.append(problem)
        else:
            scores[model] = value
    if problems:
        raise CsvImportError(problems)
    if not scores:
        raise CsvImportError([f"{name}: no rows under the header"])
    return scores


def items_from_csv(name: str, data: bytes) -> list[tuple[str, float, float]]:
    """(item_id, similarity, accuracy) of a CSV with the columns `similarity` and `accuracy` (0..1; `item_id`
    optional); every problem at once, by row and field."""
    items, problems = [], []
    for line, row in _rows(name, data, ("similarity", "accuracy")):
        if len(items) >= ITEMS_MAX:
            problems.append(f"{name}: more than {ITEMS_MAX} items")
            break
        similarity, problem = _number(name, line, "similarity", row.get("similarity"), -1.0, 1.0)
        accuracy, other = _number(name, line, "accuracy", row.get("accuracy"), 0.0, 1.0)
        found = [text for text in (problem, other) if text]
        if found:
            problems += found
            continue
        items.append(((row.get("item_id") or "").strip()[:300], similarity, accuracy))
    if problems:
        raise CsvImportError(problems)
    if not items:
        raise CsvImportError([f"{name}: no rows under the header"])
    return items


# --- Storing ----------------------------------------------------------------------------------------------------


def benchmark_scores_set(*, benchmark: OtherBenchmark, scores: dict[str, float]) -> int:
    """Stores a score per model (replacing that model's earlier score); one transaction. The count stored."""
    with transaction.atomic():
        for model, score in scores.items():
            OtherBenchmarkScore.objects.update_or_create(benchmark=benchmark, model=model, defaults={"score": score})
    return len(scores)


def benchmark_items_replace(*, benchmark: OtherBenchmark, items: list[tuple[str, float, float]]) -> int:
    """Replaces the benchmark's items with these, in one transaction."""
    with transaction.atomic():
        OtherBenchmarkItem.objects.filter(benchmark=benchmark).delete()
        OtherBenchmarkItem.objects.bulk_create(
            [OtherBenchmarkItem(benchmark=benchmark, item_id=i, similarity=s, accuracy=a) for i, s, a in items],
            batch_size=5000,
        )
    return len(items)


def model_names_with_runs() -> list[str]:
    """Every model name runs give (an endpoint's name, an imported file's model): what scores are keyed by."""
    endpoints = ModelEvaluation.objects.filter(endpoint__isnull=False).values_list("endpoint__name", flat=True)
    imported = ModelEvaluation.objects.filter(endpoint__isnull=True).values_list("name", flat=True)
    return sorted({*endpoints.distinct(), *(name or "imported model" for name in imported.distinct())})


# --- The section ------------------------------------------------------------------------------------------------


@dataclass
class BenchmarkCorrelation:
    benchmark: OtherBenchmark
    result: Correlation
    runs: list[tuple[str, str]]  # (model, the run's name) of each model in the correlation
    missing: list[str]  # models in the report without a score on this benchmark
    svg: str


def model_accuracies(choice) -> dict[str, tuple[Fraction, str]]:
    """{model: (macro accuracy in the report, the run's name)}: for each model among the drawn runs of a
    evaluation.results.release_report.ReportChoice, its standard-strategy run, else its first run."""
    shown = [run for run in choice.runs if run.chosen]
    labels = run_names(shown)  # the report's rows are named among the drawn runs
    rows = {row.label: row for row in choice.report.models}
    picked: dict[str, ModelEvaluation] = {}
    for run in sorted(shown, key=lambda r: (r.strategy != STANDARD, r.pk)):
        picked.setdefault(run.model_name, run)
    accuracies = {}
    for model, run in picked.items():
        row = rows.get(labels[run.pk])
        if row is not None and row.macro is not None:
            accuracies[model] = (row.macro.estimate, labels[run.pk])
    return accuracies


def benchmark_correlations(release: Release, choice) -> list[BenchmarkCorrelation]:
    """One correlation per other benchmark with a score for at least one model of the report."""
    accuracies = model_accuracies(choice)
    found = []
    for benchmark in OtherBenchmark.objects.prefetch_related("scores"):
        sign = 1 if benchmark.higher_is_better else -1
        scores = {score.model: sign * score.score for score in benchmark.scores.all()}
        both = sorted(model for model in accuracies if model in scores)
        if not both:
            continue
        result = correlation((model, float(accuracies[model][0]), scores[model]) for model in both)
        svg = scatter_svg(result, benchmark=benchmark.name, release=release.name).decode()
        runs = [(model, accuracies[model][1]) for model in both]
        missing = sorted(model for model in accuracies if model not in scores)
        found.append(BenchmarkCorrelation(benchmark, result, runs, missing, svg))
    return found


def release_item_accuracies(release: Release, split: str, runs) -> list[tuple[float, Fraction, str]]:
    """(similarity, share of the drawn runs right, cluster) of each item of the split that a drawn run answered and
    that has a similarity in its provenance."""
    similarity = {}
    for item_id, provenance, cluster in release.items.filter(split=split).values_list(
        "item_id", "provenance", "cluster"
    ):
        value = json.loads(provenance).get("similarity")
        if isinstance(value, int | float):
            similarity[item_id] = (float(value), cluster)
    tallies: dict[str, list[int]] = {}
    answers = ModelItemResult.objects.filter(
        evaluation__in=runs, release_item__split=split, release_item__release=release, is_correct__isnull=False
    ).values_list("release_item__item_id", "is_correct")
    for item_id, correct in answers:
        tally = tallies.setdefault(item_id, [0, 0])
        tally[0] += int(correct)
        tally[1] += 1
    return [
        (similarity[item_id][0], Fraction(right, asked), similarity[item_id][1])
        for item_id, (right, asked) in sorted(tallies.items())
        if item_id in similarity
    ]


def other_item_bins(benchmark: OtherBenchmark) -> list[Bin]:
    rows = benchmark.items.values_list("pk", "similarity", "accuracy")
    # Each item its own cluster: the other benchmark's file says nothing of which items share a source.
    return similarity_bins((s, Fraction(str(a)), f"item {pk}") for pk, s, a in rows)


def bin_rows(series: list[tuple[str, list[Bin]]]) -> list[dict]:
    rows = []
    for index, edge in enumerate(zip(SIMILARITY_EDGES, SIMILARITY_EDGES[1:], strict=False)):
        cells = []
        for _, bins in series:
            b = bins[index]
            interval = f"{percent(b.interval[0])}–{percent(b.interval[1])}" if b.interval else ""
            cells.append({"items": b.items, "accuracy": percent(b.accuracy) if b.items else "—", "interval": interval})
        rows.append({"low": edge[0], "high": edge[1], "cells": cells})
    return rows


def _report_choice(request, release_name: str, split: str):
    """The release and its report as the report's page draws it (`?runs=` honoured)."""
    release = load_release(release_name, split)
    return release, release_report_choice(release, split=split, run_ids=chosen_runs(request))


@role_required(COORDINATOR)
@require_GET
def correlation_section(request, release_name: str, split: str):
    """The report's correlation section, as a fragment its page loads (honours `?runs=` as the page does)."""
    release, choice = _report_choice(request, release_name, split)
    shown = [run for run in choice.runs if run.chosen]
    ours = similarity_bins(release_item_accuracies(release, split, shown))
    series = [(f"{release.name} ({split})", ours)]
    for benchmark in OtherBenchmark.objects.filter(items__isnull=False).distinct():
        series.append((benchmark.name, other_item_bins(benchmark)))
    context = {
        "release": release,
        "split": split,
        "correlations": benchmark_correlations(release, choice),
        "bins_svg": bins_svg(series, title="Accuracy by similarity (items; 95% interval)").decode() if shown else "",
        "series": [name for name, _ in series],
        "bin_rows": bin_rows(series) if shown else [],
    }
    return render(request, "evaluation/_correlation.html", context)


# --- Pages of the other benchmarks --------------------------------------------------------------------------


class BenchmarkForm(forms.ModelForm):
    class Meta:
        model = OtherBenchmark
        fields = ["name", "description", "higher_is_better"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2, "maxlength": NOTE_MAX})}


class ScoreForm(forms.Form):
    model = forms.CharField(max_length=NAME_MAX)
    score = forms.FloatField()

    def clean_score(self):
        value = self.cleaned_data["score"]
        if not math.isfinite(value):
            raise forms.ValidationError("a finite number")
        return value


class UploadForm(forms.Form):
    file = forms.FileField()


@role_required(COORDINATOR)
def benchmark_list(request):
    form = BenchmarkForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        benchmark = form.save(commit=False)
        benchmark.created_by = request.user
        benchmark.save()
        messages.success(request, f"Added {benchmark.name}: enter its scores or import them.")
        return redirect("other-benchmark", benchmark.pk)
    rows = OtherBenchmark.objects.annotate(
        score_count=Count("scores", distinct=True), item_count=Count("items", distinct=True)
    )
    return render(
        request,
        "evaluation/other_benchmarks.html",
        {"form": form, "benchmarks": [(b, b.score_count, b.item_count) for b in rows]},
        status=400 if form.errors else 200,
    )


def _read_upload(form: UploadForm) -> tuple[str, bytes] | None:
    if not form.is_valid():
        return None
    upload = form.cleaned_data["file"]
    if upload.size > CSV_MAX_BYTES:
        form.add_error("file", f"{upload.name}: {upload.size} bytes, over the limit of {CSV_MAX_BYTES} bytes")
        return None
    return upload.name, upload.read()


@role_required(COORDINATOR)
def benchmark_detail(request, benchmark_id: int):
    benchmark = get_object_or_404(OtherBenchmark, pk=benchmark_id)
    score_form, upload_form, items_form, problems = ScoreForm(), UploadForm(), UploadForm(prefix="items"), []
    status, confirm_delete = 200, False
    if request.method == "POST":
        action = request.POST.get("action", "")
        try:
            if action == "score":
                score_form = ScoreForm(request.POST)
                if score_form.is_valid():
                    model = " ".join(score_form.cleaned_data["model"].split())
                    benchmark_scores_set(benchmark=benchmark, scores={model: score_form.cleaned_data["score"]})
                    messages.success(request, f"{model}: {score_form.cleaned_data['score']:g} on {benchmark.name}.")
                    return redirect("other-benchmark", benchmark.pk)
            elif action == "scores_csv":
                upload_form = UploadForm(request.POST, request.FILES)
                read = _read_upload(upload_form)
                if read is not None:
                    count = benchmark_scores_set(benchmark=benchmark, scores=scores_from_csv(*read))
                    messages.success(request, f"Imported {count} scores from {read[0]}.")
                    return redirect("other-benchmark", benchmark.pk)
            elif action == "items_csv":
                items_form = UploadForm(request.POST, request.FILES, prefix="items")
                read = _read_upload(items_form)
                if read is not None:
                    count = benchmark_items_replace(benchmark=benchmark, items=items_from_csv(*read))
                    messages.success(request, f"Imported {count} items from {read[0]} (the earlier items replaced).")
                    return redirect("other-benchmark", benchmark.pk)
            elif action == "delete_score":
                deleted, _ = benchmark.scores.filter(pk=request.POST.get("score")).delete()
                messages.success(request, "Score removed." if deleted else "That score was already gone.")
                return redirect("other-benchmark", benchmark.pk)
            elif action == "delete" and request.POST.get("confirmed") != "yes":
                confirm_delete = True  # the page asks first, naming what goes with it
            elif action == "delete":
                name = benchmark.name
                benchmark.delete()
                messages.success(request, f"Removed {name}, its scores and its items.")
                return redirect("other-benchmarks")
        except CsvImportError as error:
            problems = error.problems[:ERRORS_SHOWN]
            if len(error.problems) > ERRORS_SHOWN:
                problems.append(f"and {len(error.problems) - ERRORS_SHOWN} more; nothing was imported")
        status = 200 if confirm_delete else 400
    context = {
        "benchmark": benchmark,
        "scores": benchmark.scores.all(),
        "items": benchmark.items.count(),
        "score_form": score_form,
        "upload_form": upload_form,
        "items_form": items_form,
        "problems": problems,
        "models": model_names_with_runs(),
        "confirm_delete": confirm_delete,
    }
    return render(request, "evaluation/other_benchmark.html", context, status=status)


@role_required(COORDINATOR)
@require_GET
def correlation_csv(request, release_name: str, split: str) -> HttpResponse:
    """The correlations as a CSV: one row per other benchmark, with the models it stands on."""
    release, choice = _report_choice(request, release_name, split)
    out = io.StringIO()
    writer = SafeCsvWriter(out)
    writer.writerow(["benchmark", "models", "spearman", "spearman_low", "spearman_high", "kendall", "kendall_low",
                     "kendall_high", "models_used"])  # fmt: skip

    def figure(value):
        return "" if value is None else f"{value:.6f}"

    for found in benchmark_correlations(release, choice):
        r = found.result
        writer.writerow(
            [
                found.benchmark.name,
                len(r.models),
                figure(r.spearman.value),
                figure(r.spearman.low),
                figure(r.spearman.high),
                figure(r.kendall.value),
                figure(r.kendall.low),
                figure(r.kendall.high),
                "; ".join(f"{model}={ours:.6f}/{theirs:g}" for model, ours, theirs in r.models),
            ]
        )
    return csv_download(out.getvalue(), f"{release.name}-{split}-correlation.csv")
