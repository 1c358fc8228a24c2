"""The release report: humans and every model on one release's split, as the paper prints it, with intervals that
count items sharing a video or a source image as one cluster (benchmark.report), and its downloads.

It reads both answer stores: the human answers (evaluation.studies.release_answers) and the model answers
(evaluation.runs). Both are read through the release's own items, never the live pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from django.core.exceptions import BadRequest
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotator.models import Release
from annotator.releases.services import release_get
from benchmark.figure import gap_svg
from benchmark.records import SPLITS
from benchmark.report import HUMANS, MACRO, MICRO, Cell, Report, percent
from benchmark.strategy_table import StrategyTable
from benchmark.taxonomy import ABBREVIATIONS, CATEGORIES, DOMAINS
from evaluation.models import ModelEvaluation
from evaluation.results.judge_check import release_judge_agreement
from evaluation.results.report import (
    release_report_file,
    release_report_file_names,
    release_report_kept,
    release_strategy_table_kept,
    strategy_file_names,
    strategy_table_file,
)
from evaluation.runs.description import accuracy_table
from evaluation.runs.naming import run_names
from evaluation.runs.selectors import report_runs
from evaluation.runs.strategies import STRATEGIES
from evaluation.studies.release_answers import release_public_answers
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.spreadsheet_csv import csv_download

FIGURE_RUNS = 5  # the models the gap figure draws by default, beside the humans: more make its legend unreadable


@dataclass
class ReportChoice:
    """The report of a split's finished runs (all of them, or those chosen), and what its figure draws."""

    report: Report
    figure: Report
    runs: list  # the finished multiple-choice runs of the split, each with `name` and `chosen` set
    chosen: list[int] | None  # the runs asked for (None: the default)
    figure_note: str
    public: dict  # what is public of the human baseline (release_public_answers), read once for the page


def chosen_runs(request) -> list[int] | None:
    """`?runs=3,5` (or `runs` repeated, as the checkboxes send it): the runs the report draws; None when not given.
    Anything but run numbers is a 400."""
    values = [part.strip() for value in request.GET.getlist("runs") for part in value.split(",") if part.strip()]
    if not request.GET.getlist("runs"):
        return None
    if not all(value.isdigit() for value in values):
        raise BadRequest("runs: run numbers separated by commas, e.g. ?runs=3,5.")
    return sorted({int(value) for value in values})


def release_report_choice(release: Release, *, split: str = "test", run_ids: list[int] | None = None) -> ReportChoice:
    """The report of `release`'s `split`: the humans and its finished multiple-choice runs (evaluation.runs.services.
    finished_runs; those of `run_ids` where given). The figure draws the chosen runs, or by default every run when
    there are at most FIGURE_RUNS, else the FIGURE_RUNS best by macro accuracy, and says so."""
    runs = report_runs(release, split)
    names = run_names(runs)
    known = {run.pk for run in runs}
    if run_ids is not None:
        unknown = [pk for pk in run_ids if pk not in known]
        if unknown:
            raise BadRequest(
                f"runs: {', '.join(map(str, unknown))} is not a finished run on release {release.name} ({split})."
            )
    for run in runs:
        run.run_name = names[run.pk]
        run.chosen = run_ids is None or run.pk in run_ids
    shown = [run for run in runs if run.chosen]
    public = release_public_answers(release, split)
    report = release_report_kept(
        release,
        runs=shown,
        split=split,
        humans_label=humans_label(public),
    )
    figure, note = report, ""
    if run_ids is None and len(report.models) > FIGURE_RUNS:
        ranked = sorted(
            report.models,
            key=lambda row: (-(row.macro.estimate if row.macro else -1), row.label),
        )
        best = {row.label for row in ranked[:FIGURE_RUNS]}
        figure = replace(
            report,
            models=tuple(row for row in report.models if row.label in best),
            gaps=tuple(gap for gap, row in zip(report.gaps, report.models, strict=True) if row.label in best),
        )
        note = (
            f"The figure draws the humans and the {FIGURE_RUNS} best of the {len(report.models)} runs by macro "
            "accuracy; choose the runs below to draw others."
        )
    return ReportChoice(report, figure, runs, run_ids, note, public)


def release_report_of(release: Release, *, split: str = "test") -> Report:
    """The report of `release`'s `split`: the humans and every finished multiple-choice run of that split."""
    return release_report_choice(release, split=split).report


def humans_label(public: dict) -> str:
    """The humans' row as every table and file of the report names it: "Humans (open book)" or "Humans (7 items
    public since 2026-01-02, 3 answers after)" when items people answered are public, else "Humans"."""
    return f"{HUMANS} ({public['label']})" if public["label"] else HUMANS


def public_humans_note(public: dict) -> str:
    """What the report says beside the human accuracy when some item people answered is public ("" when none is):
    those answered after it became public may have been looked up by the images' pixels
    (evaluation.studies.served_images)."""
    if not public["label"]:
        return ""
    return (
        f"{public['scored']} of the {public['of']} items people answered are public since {public['since'][:10]} (a "
        f"published release holds them): {public['answers_after']['n']} answers were given after they became public "
        f"and may have been found by a search on the images' pixels, {public['answers_before']['n']} before."
        + (" A study on them was drawn knowingly: open book." if public["open_book"] else "")
    )


def load_release(name: str, split: str) -> Release:
    if split not in SPLITS:
        raise Http404(f"no split {split!r}: {', '.join(SPLITS)}")
    return release_get(name)


def cell_text(cell: Cell | None, *, signed: bool = False) -> dict:
    """What a table cell shows: the figure in %, its interval, and what stands behind it (the tooltip)."""
    if cell is None:
        return {"value": "—", "interval": "", "title": "no item"}
    value = percent(cell.estimate)
    if signed and not value.startswith("-"):
        value = f"+{value}"
    interval = "" if cell.low is None else f"{percent(cell.low)}–{percent(cell.high)}"
    behind = f"{cell.items} items in {cell.clusters} clusters, {cell.answers} answers"
    if cell.raters is not None:
        behind += f", {cell.raters} raters"
    return {"value": value, "interval": interval, "title": behind}


def table_rows(rows, *, signed: bool = False) -> list[dict]:
    return [
        {
            "label": row.label,
            "categories": [cell_text(row.categories.get(c), signed=signed) for c in CATEGORIES],
            "micro": cell_text(row.micro, signed=signed),
            "macro": cell_text(row.macro, signed=signed),
            "domains": [cell_text(row.domains.get(d), signed=signed) for d in DOMAINS],
            "n": row.micro.items if row.micro else 0,
            "raters": row.micro.raters if row.micro else None,
        }
        for row in rows
    ]


def description_runs_section(release: Release, split: str) -> list[dict]:
    """The description task on the release's split: each description run's judged accuracy with its interval, and
    its judge's agreement with people (Cohen's kappa, evaluation.results.judge_check)."""
    rows = []
    for row in release_judge_agreement(release):
        run = row["run"]
        if run.split != split:
            continue
        overall = accuracy_table(run)["overall"]
        rows.append({**row, "accuracy": overall})
    return rows


def strategy_models(runs) -> list[tuple[int, str]]:
    """The endpoints with a finished run on the split, (id, name), by name."""
    models = {run.endpoint_id: run.endpoint.name for run in runs if run.endpoint_id}
    return sorted(models.items(), key=lambda model: (model[1].lower(), model[0]))


def strategy_runs(runs, endpoint_id: int) -> dict[str, ModelEvaluation]:
    """The run that stands for each strategy of one endpoint, in STRATEGIES' order: its latest finished
    multiple-choice run with that strategy (a circular run answers another task and is left out)."""
    latest: dict[str, ModelEvaluation] = {}
    for run in runs:  # oldest first: a later run replaces an earlier one
        if run.endpoint_id == endpoint_id and not run.circular:
            latest[run.strategy] = run
    return {strategy: latest[strategy] for strategy in [*STRATEGIES, *sorted(latest)] if strategy in latest}


def strategy_table_of(release: Release, split: str, runs, endpoint_id: int, public: dict) -> StrategyTable | None:
    """`public`: release_public_answers of the release's split, which names the humans' row."""
    chosen = strategy_runs(runs, endpoint_id)
    if not chosen:
        return None
    names = run_names(chosen.values())
    return release_strategy_table_kept(
        release,
        model=next(iter(chosen.values())).endpoint.name,
        humans_label=humans_label(public),
        strategies={strategy: (names[run.pk], run) for strategy, run in chosen.items()},
        split=split,
    )


def strategy_rows(table: StrategyTable) -> list[dict]:
    def cells(row):
        return [cell_text(row.categories.get(c)) for c in CATEGORIES] + [cell_text(row.macro)]

    rows = [{"label": line.strategy, "run": line.run, "cells": cells(line.row)} for line in table.strategies]
    return rows + [{"label": HUMANS, "run": "", "cells": cells(table.humans)}]


def _chosen_model(request, models: list[tuple[int, str]]) -> int | None:
    value = request.GET.get("model", "")
    if not value:
        return models[0][0] if models else None
    if not value.isdigit() or int(value) not in dict(models):
        raise BadRequest(f"model: {value!r} is not a model with a finished run on this split.")
    return int(value)


@role_required(COORDINATOR)
@require_GET
def release_report_page(request, release_name: str, split: str = "test"):
    release = load_release(release_name, split)
    choice = release_report_choice(release, split=split, run_ids=chosen_runs(request))
    report = choice.report
    models = strategy_models(choice.runs)
    model = _chosen_model(request, models)
    table = strategy_table_of(release, split, choice.runs, model, choice.public) if model is not None else None
    query = urlencode({"runs": ",".join(map(str, choice.chosen))}) if choice.chosen is not None else ""
    context = {
        "release": release,
        "report": report,
        "split": split,
        "splits": SPLITS,
        "categories": [(ABBREVIATIONS[c], c) for c in CATEGORIES],
        "domains": list(DOMAINS),
        "rows": table_rows([report.humans, *report.models]),
        "gaps": table_rows(report.gaps, signed=True),
        "figure": gap_svg(choice.figure).decode() if choice.figure.gaps else "",
        "figure_note": choice.figure_note,
        "runs": choice.runs,
        "chosen": choice.chosen,
        "query": query,
        "files": release_report_file_names(report),
        "overall": (MICRO, MACRO),
        "public_humans": public_humans_note(choice.public),
        "description_runs": description_runs_section(release, split),
        "strategy_models": models,
        "strategy_model": model,
        "strategy_table": strategy_rows(table) if table else [],
        "strategy_files": strategy_file_names(release, split, model) if table else [],
    }
    return render(request, "evaluation/release_report.html", context)


STRATEGY_FILE = re.compile(r"^(?P<prefix>.+)-strategies-(?P<endpoint>[0-9]+)\.(?P<ext>csv|md|tex)$")


@role_required(COORDINATOR)
@require_GET
def release_report_download(request, release_name: str, split: str, file_name: str):
    """A file of the report: honours `?runs=` as the page does; `<release>-<split>-strategies-<endpoint>.<ext>` is
    that model's strategy table."""
    release = load_release(release_name, split)
    strategies = STRATEGY_FILE.match(file_name)
    if strategies and strategies["prefix"] == f"{release.name}-{split}":
        runs = report_runs(release, split)
        table = strategy_table_of(
            release, split, runs, int(strategies["endpoint"]), release_public_answers(release, split)
        )
        if table is None:
            raise Http404(f"no finished run of model {strategies['endpoint']} on this split")
        written = strategy_table_file(table, strategies["ext"])
    else:
        choice = release_report_choice(release, split=split, run_ids=chosen_runs(request))
        written = release_report_file(choice.report, file_name, figure=choice.figure)
    if written is None:
        raise Http404(f"no report file {file_name!r}")
    content, content_type = written
    if content_type.startswith("text/csv"):
        return csv_download(content, file_name)
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{file_name}"'
    return response
