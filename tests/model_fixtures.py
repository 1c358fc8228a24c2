"""Model endpoints, runs and per-item results written directly, as the model evaluation job writes them."""

from __future__ import annotations

import itertools
from datetime import timedelta

from django.utils import timezone

from annotator.models import Job, ModelEndpoint, Pair
from evaluation.models import ModelEvaluation, ModelItemResult

_counter = itertools.count(1)


def make_endpoint(name: str | None = None, **fields) -> ModelEndpoint:
    number = next(_counter)
    defaults = {"base_url": "http://127.0.0.1:9/v1", "model_id": f"vlm-{number}"}
    defaults.update(fields)
    return ModelEndpoint.objects.create(name=name or f"model-{number}", **defaults)


def make_run(
    endpoint: ModelEndpoint, *, study_id: int | None = None, age_minutes: int = 0, **fields
) -> ModelEvaluation:
    """A finished run of `endpoint`, on `release` if given, else from before releases (on the study `study_id`, or
    on pairs); `age_minutes` makes it older than runs made after it with a smaller age."""
    created = timezone.now() - timedelta(minutes=age_minutes)
    job = Job.objects.create(
        kind=Job.Kind.MODEL_EVAL, title=f"Evaluate {endpoint.name}", status=Job.Status.SUCCEEDED, created=created
    )
    if fields.get("release") is not None:
        source = ModelEvaluation.Source.RELEASE
    else:  # a run from before releases, as the database holds it: an import that keeps the source it was run on
        source = ModelEvaluation.Source.IMPORT
        retired = {"retired_source": "study" if study_id else "filter"}
        fields["parameters"] = {**fields.get("parameters", {}), **retired}
    return ModelEvaluation.objects.create(
        endpoint=endpoint, job=job, source=source, study_id=study_id, created=created, **fields
    )


def record(
    run: ModelEvaluation, pair: Pair, correct: bool | None, *, question_id: str | None = None
) -> ModelItemResult:
    """One item's result: right (True), wrong (False) or a failed request (None); keeps the run's counters."""
    options = pair.options
    result = ModelItemResult.objects.create(
        evaluation=run,
        pair=pair,
        question_id=question_id or f"{pair.category}_{pair.source}_{pair.source_id or pair.pk}",
        category=pair.category,
        domain=pair.domain,
        options=options,
        correct_letter="A",
        predicted_letter="" if correct is None else ("A" if correct else "B"),
        is_correct=correct,
        failure="" if correct is not None else ModelItemResult.Failure.TIMEOUT,
        failure_message="" if correct is not None else "no answer within 120 s",
    )
    run.items += 1
    if correct is None:
        run.failed += 1
    else:
        run.answered += 1
        run.correct += int(correct)
    run.save(update_fields=["items", "failed", "answered", "correct"])
    return result


def import_into_study(study, *, name: str, content: bytes, file_name: str = "") -> ModelEvaluation:
    """A results file imported into a study before releases, as the migration of ModelRun rows left it: a run
    of source import with the study's id, one result per entry whose question_id is a scored item of the study."""
    from benchmark.results import read_results

    by_question = {item.question_id: item for item in study.items.scored().select_related("pair__video")}
    outcomes = [o for o in read_results(content) if o.question_id in by_question]
    job = Job.objects.create(kind=Job.Kind.MODEL_EVAL, title=f"Import {name}", status=Job.Status.SUCCEEDED)
    run = ModelEvaluation.objects.create(
        name=name,
        job=job,
        source=ModelEvaluation.Source.IMPORT,
        study_id=study.pk,
        file_name=file_name,
        items=len(outcomes),
        answered=len(outcomes),
        correct=sum(o.is_correct for o in outcomes),
    )
    for outcome in outcomes:
        item = by_question[outcome.question_id]
        ModelItemResult.objects.create(
            evaluation=run,
            pair=item.pair,
            question_id=outcome.question_id,
            category=item.category,
            domain=item.domain,
            options=[],
            correct_letter="",
            is_correct=outcome.is_correct,
            response_text=outcome.predicted,
        )
    return run
