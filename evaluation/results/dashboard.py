"""The measuring side's part of the coordinator's home page (annotator/home.py loads it with htmx, as the annotator
app cannot read studies and runs): the studies that still take answers with their progress, and the latest model
runs with their state. Each figure is its page's own function: a study's progress is `study_results`' (its
dashboard), a run's state `ModelEvaluation.state` and its name `run_names` (the Models page)."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluation.models import ModelEvaluation, Study
from evaluation.runs.naming import run_names
from evaluation.studies.reports import study_results
from subtlebench.roles import COORDINATOR, role_required

STUDIES_SHOWN = 3
RUNS_SHOWN = 6


def studies_running() -> list[dict]:
    """The newest studies that are not archived and still have places to fill, each with its progress."""
    rows = []
    for study in Study.objects.filter(archived_at__isnull=True).select_related("release").order_by("-created", "-pk"):
        if len(rows) == STUDIES_SHOWN:
            break
        if study.is_full():
            continue
        progress = study_results(study)["progress"]
        needed = progress["responses_needed"]
        percent = min(100, round(100 * progress["responses"] / needed)) if needed else 100
        rows.append({"study": study, "progress": progress, "percent": percent})
    return rows


def runs_latest() -> list[ModelEvaluation]:
    runs = list(
        ModelEvaluation.objects.select_related("endpoint", "job", "release", "judge").order_by("-created", "-pk")[
            :RUNS_SHOWN
        ]
    )
    names = run_names(runs)
    for run in runs:
        run.run_name = names[run.pk]
    return runs


@role_required(COORDINATOR)
@require_GET
def home_measure(request):
    context = {"studies_running": studies_running(), "runs": runs_latest()}
    return render(request, "evaluation/_home_measure.html", context)
