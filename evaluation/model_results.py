"""Model results: a model's mc_evaluation_results.json imported beside the humans' answers."""

from __future__ import annotations

from django.db import transaction

from benchmark.results import ResultsFileError, load_results, outcome_of
from evaluation.models import ModelAnswer, ModelRun, Study
from evaluation.studies import StudyError


@transaction.atomic
def model_run_import(*, study: Study, name: str, content: bytes, file_name: str = "") -> ModelRun:
    """Import mc_evaluation_results.json; entries are matched to scored items by question_id."""
    label = file_name or "the file"
    if not name.strip():
        raise StudyError({"name": ["give the model a name."]})
    try:
        entries = load_results(content, label)
    except ResultsFileError as error:
        raise StudyError(str(error)) from None
    by_question = {item.question_id: item for item in study.items.scored().select_related("pair__video")}
    answers: dict[int, ModelAnswer] = {}
    run = ModelRun(study=study, name=name.strip(), file_name=file_name, entries=len(entries))
    for index, entry in enumerate(entries):
        try:
            outcome = outcome_of(entry, index, label)
        except ResultsFileError as error:
            raise StudyError(str(error)) from None
        item = by_question.get(outcome.question_id)
        if item is None:
            continue
        if item.pk in answers:
            raise StudyError(f"{label}, entry {index}: question_id {entry['question_id']} appears twice.")
        answers[item.pk] = ModelAnswer(run=run, item=item, predicted=outcome.predicted, is_correct=outcome.is_correct)
    if not answers:
        raise StudyError(f"{label}: none of its {len(entries)} question ids is an item of this study's sample.")
    run.matched = len(answers)
    run.save()
    ModelAnswer.objects.bulk_create(answers.values())
    return run
