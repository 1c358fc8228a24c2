"""What the pages that set runs side by side read of them: a release's runs, its finished runs of a split, their
answers and failures by run name, and the release page's section of runs."""

from __future__ import annotations

from django.db import models, transaction

from annotator.models import (
    Job,
    Release,
)
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs import description
from evaluation.runs.naming import run_names

# --- What the release report reads ----------------------------------------------------------------------------


def release_runs(release: Release):
    """The runs on a release that are not running (in the app and imported), oldest first."""
    return (
        ModelEvaluation.objects.filter(release=release)
        .exclude(job__status__in=(Job.Status.QUEUED, Job.Status.RUNNING))
        .select_related("endpoint", "job", "judge")
        .order_by("created", "pk")
    )


def finished_runs(release: Release, split: str):
    """The runs that finished on `release`'s `split`: their job succeeded (every item answered or failed; a failed,
    incomplete, cancelled or running run is not a result), on that split, or imported across both splits. Oldest
    first."""
    return (
        release_runs(release)
        .filter(job__status=Job.Status.SUCCEEDED, split__in=(split, ""))
        .exclude(ended__in=(ModelEvaluation.Ended.FAILED, ModelEvaluation.Ended.INCOMPLETE))
    )


def report_runs(release: Release, split: str) -> list[ModelEvaluation]:
    """The multiple-choice runs of the release report of `split`: the finished ones (a description run's judged
    descriptions are another task, with its own section)."""
    return [run for run in finished_runs(release, split) if run.task != description.DESCRIPTION]


def model_answers_on_release(release: Release, runs=None) -> dict[str, list[tuple[str, bool]]]:
    """Per run (by default every multiple-choice run on the release that is not running), its answers as (item id,
    is_correct) keyed by the run's name (evaluation.runs.naming), in the release's order (split, then place in the
    file). Failed requests are no answer: left out here, counted by `model_failures_on_release`."""
    if runs is None:
        runs = [run for run in release_runs(release) if run.task != description.DESCRIPTION]
    runs = list(runs)
    names = run_names(runs)
    answers: dict[str, list[tuple[str, bool]]] = {names[run.pk]: [] for run in runs}
    rows = (
        ModelItemResult.objects.filter(evaluation__in=runs, release_item__isnull=False, is_correct__isnull=False)
        .order_by("evaluation_id", "release_item__split", "release_item__position", "pk")
        .values_list("evaluation_id", "release_item__item_id", "is_correct")
    )
    for run_id, identifier, correct in rows:
        answers[names[run_id]].append((identifier, correct))
    return answers


def model_failures_on_release(release: Release) -> dict[str, int]:
    """Per multiple-choice run on the release that is not running, how many of its requests failed (no answer)."""
    runs = [run for run in release_runs(release) if run.task != description.DESCRIPTION]
    names = run_names(runs)
    failed = dict(
        ModelItemResult.objects.filter(evaluation__in=runs, is_correct__isnull=True)
        .order_by()
        .values("evaluation_id")
        .annotate(n=models.Count("pk"))
        .values_list("evaluation_id", "n")
    )
    return {names[run.pk]: failed.get(run.pk, 0) for run in runs}


@transaction.atomic
def release_model_runs_section(release: Release) -> list[dict]:
    """The release page's "model runs on this release" (annotator.releases.services.release_links)."""
    from django.urls import reverse

    runs = list(
        ModelEvaluation.objects.filter(release=release)
        .select_related("endpoint", "job", "judge")
        .order_by("created", "pk")
    )
    labels = run_names(runs)
    rows = [
        {
            "label": labels[run.pk],
            "url": reverse("model-run-detail", args=[run.pk]),
            "detail": f"{run.get_source_display()} · {run.split or 'both splits'} · {run.correct} of {run.answered}"
            f" answered right · {run.failed} failed · {run.state}",
        }
        for run in runs
    ]
    return [
        {
            "id": "release-model-runs",
            "title": "Model runs on this release",
            "rows": rows,
            "empty": "No model has run on this release yet.",
        }
    ]
