"""Model results: a model's mc_evaluation_results.json imported beside the humans' answers."""

from __future__ import annotations

import json

from django.db import transaction

from evaluation.models import ModelAnswer, ModelRun, Study
from evaluation.studies import StudyError


def _entries(data, label: str) -> list:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "per_question", "details", "questions"):
            if isinstance(data.get(key), list):
                return data[key]
        if data and all(isinstance(v, dict) for v in data.values()):
            return [{"question_id": k, **v} for k, v in data.items()]
    raise StudyError(
        f"{label}: expected a JSON list of per-question results (or an object holding one under 'results')."
    )


@transaction.atomic
def model_run_import(*, study: Study, name: str, content: bytes, file_name: str = "") -> ModelRun:
    """Import mc_evaluation_results.json; entries are matched to scored items by question_id."""
    label = file_name or "the file"
    if not name.strip():
        raise StudyError({"name": ["give the model a name."]})
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StudyError(f"{label}: not valid JSON ({error}).")
    entries = _entries(data, label)
    by_question = {item.question_id: item for item in study.items.scored().select_related("pair__video")}
    answers: dict[int, ModelAnswer] = {}
    run = ModelRun(study=study, name=name.strip(), file_name=file_name, entries=len(entries))
    for index, entry in enumerate(entries):
        where = f"{label}, entry {index}"
        if not isinstance(entry, dict):
            raise StudyError(f"{where}: expected an object, got {type(entry).__name__}.")
        missing = [f for f in ("question_id", "is_correct") if f not in entry]
        if missing:
            raise StudyError(f"{where}: missing field {', '.join(missing)}.")
        if not isinstance(entry["is_correct"], bool):
            raise StudyError(f"{where}: is_correct must be true or false, got {entry['is_correct']!r}.")
        item = by_question.get(str(entry["question_id"]))
        if item is None:
            continue
        if item.pk in answers:
            raise StudyError(f"{where}: question_id {entry['question_id']} appears twice.")
        answers[item.pk] = ModelAnswer(
            run=run, item=item, predicted=str(entry.get("predicted_answer") or ""), is_correct=entry["is_correct"]
        )
    if not answers:
        raise StudyError(f"{label}: none of its {len(entries)} question ids is an item of this study's sample.")
    run.matched = len(answers)
    run.save()
    ModelAnswer.objects.bulk_create(answers.values())
    return run
