"""The results of a synthetic sweep: every model run and every study on its pairs, as accuracy per cell of the
sweep's grid with intervals, and the level of the first factor where each series' fitted curve crosses a target
accuracy; the sweep's page shows them as a heatmap (evaluation.results.heatmaps), SVG, PNG and CSV to download."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from fractions import Fraction

from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.models import Pair, Sweep, SweepItem
from annotator.synthetic.generator import FAMILIES
from annotator.synthetic.services import sweep_releases
from benchmark.intervals import Scored, accuracy_interval, micro_mean
from benchmark.taxonomy import BINARY_CATEGORIES
from evaluation.models import Assignment, ModelEvaluation, ModelItemResult, Study, StudyItem
from evaluation.results.heatmaps import heatmap_png, heatmap_svg
from evaluation.results.psychometric import thresholds
from evaluation.runs.naming import run_names
from subtlebench.pages import carried
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.spreadsheet_csv import SafeCsvWriter

TARGETS = [0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95]


# --- Accuracy per cell -----------------------------------------------------------------------------------------


@dataclass
class Series:
    """One line of the heatmap: a model run, or the humans of a study; `answers`: (pair id, rater, correct)."""

    label: str
    kind: str  # "model" or "humans"
    answers: list[tuple[int, str, bool]]
    url: str = ""
    cells: list[dict] = field(default_factory=list)
    thresholds: list[dict] = field(default_factory=list)


def model_series(sweep: Sweep) -> list[Series]:
    """Every model run with an answer to a pair of the sweep, whatever it ran on (failed requests are no answer)."""
    rows = (
        ModelItemResult.objects.filter(pair__sweep_item__sweep=sweep, is_correct__isnull=False)
        .order_by("evaluation_id", "pk")
        .values_list("evaluation_id", "pair_id", "is_correct")
    )
    series: dict[int, Series] = {}
    for run_id, pair_id, is_correct in rows.iterator(chunk_size=2000):
        if run_id not in series:
            url = reverse("model-run-detail", args=[run_id])
            series[run_id] = Series(label="", kind="model", answers=[], url=url)
        series[run_id].answers.append((pair_id, "model", bool(is_correct)))
    runs = ModelEvaluation.objects.filter(pk__in=series).select_related("endpoint", "judge")
    for run_id, name in run_names(runs).items():
        series[run_id].label = name
    return list(series.values())


def human_series_on_sweep(sweep: Sweep) -> list[Series]:
    answered = (
        Assignment.objects.filter(
            item__pair__sweep_item__sweep=sweep, item__kind=StudyItem.Kind.SCORED, answered_at__isnull=False
        )
        .select_related("participant", "item")
        .order_by("item__study_id", "item__pair_id", "pk")
    )
    series: dict[int, Series] = {}
    for assignment in answered.iterator(chunk_size=2000):
        study_id = assignment.item.study_id
        if study_id not in series:
            study = Study.objects.get(pk=study_id)
            series[study_id] = Series(
                label=f"Humans: {study.name} (study {study_id})",
                kind="humans",
                answers=[],
                url=reverse("study-detail", args=[study_id]),
            )
        series[study_id].answers.append(
            (assignment.item.pair_id, assignment.participant.rater_key, bool(assignment.correct))
        )
    return list(series.values())


def guess_rate(sweep: Sweep) -> float:
    """Chance accuracy: 1 / the options of the family's questions (every pair of a family has as many)."""
    return 0.5 if FAMILIES[sweep.family] in BINARY_CATEGORIES else 1 / _option_count(sweep)


def _option_count(sweep: Sweep) -> int:
    first = SweepItem.objects.filter(sweep=sweep).select_related("pair").order_by("cell", "index", "pk").first()
    return len(first.pair.options) if first else 4


def cell_accuracy(answers: list[tuple[int, str, bool]], cell_of: dict[int, int], cells: int) -> list[dict]:
    """Per cell: answers, correct, accuracy and its 95% interval (items as clusters; several raters of one item are
    averaged into its score)."""
    by_item: dict[int, list[bool]] = {}
    for pair_id, _rater, correct in answers:
        if pair_id in cell_of:
            by_item.setdefault(pair_id, []).append(correct)
    per_cell: list[list[Scored]] = [[] for _ in range(cells)]
    counts = [[0, 0] for _ in range(cells)]
    for pair_id, marks in sorted(by_item.items()):
        cell = cell_of[pair_id]
        per_cell[cell].append(Scored(Fraction(sum(marks), len(marks)), cluster=pair_id))
        counts[cell][0] += sum(marks)
        counts[cell][1] += len(marks)
    out = []
    for cell in range(cells):
        correct, answered = counts[cell]
        mean = micro_mean(per_cell[cell])
        interval = accuracy_interval(mean, answers=answered) if mean else None
        out.append(
            {
                "correct": correct,
                "answered": answered,
                "items": len(per_cell[cell]),
                "accuracy": float(mean.estimate) if mean else None,
                "low": interval[0] if interval else None,
                "high": interval[1] if interval else None,
            }
        )
    return out


def sweep_results(sweep: Sweep, *, target: float = 0.75) -> dict:
    """Every series (model runs, then the humans of each study) with its accuracy per cell and, along the first axis
    (for each level of the second), the level where its fitted curve crosses `target`, with a profile-likelihood 95%
    interval (psychometric.py: censored at the levels swept, a step's spanning the levels around it)."""
    cells = sweep.cells()
    cell_of = dict(SweepItem.objects.filter(sweep=sweep).values_list("pair_id", "cell"))
    series = model_series(sweep) + human_series_on_sweep(sweep)
    guess = guess_rate(sweep)
    first = sweep.axes[0]
    rows = sweep.axes[1]["levels"] if len(sweep.axes) == 2 else [None]
    width = len(first["levels"])
    picked = []
    for line in series:
        line.cells = cell_accuracy(line.answers, cell_of, len(cells))
        for row_number in range(len(rows)):
            # Cells are ordered with the first axis varying slowest: this row's cells are every len(rows)-th.
            picked.append([line.cells[i * len(rows) + row_number] for i in range(width)])
    found = []
    if picked:  # every series and row in one fit: they share the levels, the guess rate and the target
        correct = [[cell["correct"] for cell in row] for row in picked]
        answered = [[cell["answered"] for cell in row] for row in picked]
        found = thresholds(first["levels"], correct, answered, guess=guess, target=target)
    for number, line in enumerate(series):
        line.thresholds = [
            {
                "row": row,
                "level": one.level,
                "low": one.low,
                "high": one.high,
                "low_censored": one.low_censored,
                "high_censored": one.high_censored,
                "step": one.step,
                "target": target,
            }
            for row, one in zip(rows, found[number * len(rows) : (number + 1) * len(rows)], strict=True)
        ]
    return {"cells": cells, "series": series, "guess": guess, "target": target, "rows": rows}


def sweep_csv(results: dict, sweep: Sweep) -> str:
    """One line per series and cell: the factor levels, correct, answered, accuracy and its interval."""
    out = io.StringIO()
    writer = SafeCsvWriter(out, lineterminator="\n")
    names = sweep.factor_names
    writer.writerow(["series", "kind", *names, "correct", "answered", "accuracy", "low", "high"])
    for line in results["series"]:
        for levels, cell in zip(results["cells"], line.cells, strict=True):
            writer.writerow(
                [
                    line.label,
                    line.kind,
                    *(levels[name] for name in names),
                    cell["correct"],
                    cell["answered"],
                    "" if cell["accuracy"] is None else f"{cell['accuracy']:.4f}",
                    "" if cell["low"] is None else f"{cell['low']:.4f}",
                    "" if cell["high"] is None else f"{cell['high']:.4f}",
                ]
            )
    writer.writerow([])
    # low_censored / high_censored: the interval goes on past that end, the first or last level swept; step: the
    # answers jump from chance to 100% (no finite curve fits better), the interval spans the levels around the jump.
    writer.writerow(
        ["series", "kind", "row", "target", "threshold", "low", "high", "low_censored", "high_censored", "step"]
    )
    for line in results["series"]:
        for found in line.thresholds:
            writer.writerow(
                [
                    line.label,
                    line.kind,
                    "" if found["row"] is None else found["row"],
                    found["target"],
                    *("" if found[k] is None else f"{found[k]:.3f}" for k in ("level", "low", "high")),
                    *(int(found[k]) for k in ("low_censored", "high_censored", "step")),
                ]
            )
    return out.getvalue()


# --- Pages -----------------------------------------------------------------------------------------------------


def _target(request) -> float:
    try:
        value = float(request.GET.get("target", "0.75"))
    except ValueError:
        return 0.75
    return value if 0.05 <= value <= 0.99 else 0.75


@role_required(COORDINATOR)
@require_GET
def sweep_detail(request, sweep_id: int):
    sweep = get_object_or_404(Sweep.objects.select_related("job", "created_by"), pk=sweep_id)
    target = _target(request)
    results = sweep_results(sweep, target=target)
    pairs = Pair.objects.filter(sweep_item__sweep=sweep)
    statuses = dict(pairs.values_list("status").annotate(n=Count("pk")).order_by("status"))
    sample = pairs.select_related("image_1", "image_2", "sweep_item").order_by("sweep_item__cell", "pk")
    context = {
        "sweep": sweep,
        "results": results,
        "target": target,
        "target_percent": round(target * 100),
        "svg": heatmap_svg(results, sweep.axes).decode(),
        "statuses": statuses,
        "passing": pairs.passing_similarity().count(),
        "exportable": pairs.exportable().count(),
        "releases": sweep_releases(sweep),
        "sample": sample[:6],
        "cells": len(results["cells"]),
        "target_choices": TARGETS if target in TARGETS else sorted({*TARGETS, target}),
        "refused": carried(request),
    }
    return render(request, "synthetic/detail.html", context)


def _download(content: bytes | str, content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@role_required(COORDINATOR)
@require_GET
def sweep_heatmap_svg(request, sweep_id: int):
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    svg = heatmap_svg(sweep_results(sweep, target=_target(request)), sweep.axes)
    return _download(svg, "image/svg+xml", f"sweep-{sweep.pk}-heatmap.svg")


@role_required(COORDINATOR)
@require_GET
def sweep_heatmap_png(request, sweep_id: int):
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    png = heatmap_png(sweep_results(sweep, target=_target(request)), sweep.axes)
    return _download(png, "image/png", f"sweep-{sweep.pk}-heatmap.png")


@role_required(COORDINATOR)
@require_GET
def sweep_results_csv(request, sweep_id: int):
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    text = sweep_csv(sweep_results(sweep, target=_target(request)), sweep)
    return _download(text, "text/csv; charset=utf-8", f"sweep-{sweep.pk}-results.csv")
