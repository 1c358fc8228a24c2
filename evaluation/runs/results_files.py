"""A run's summary and its official results file (the `_finalize_mc_results` layout of krafton-ai/VLM-SubtleBench), and
an official results file imported onto a release: matched by the release's own item ids, exactly."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

from django.db import connection, transaction
from django.utils import timezone

from annotator.llm.endpoints import (
    check_coordinator,
)
from annotator.models import (
    Job,
    Release,
    ReleaseItem,
)
from benchmark.circular import rotation_entries
from benchmark.protocol import LETTERS
from benchmark.results import (
    QuestionCounts,
    ResultsFileError,
    load_results,
    outcome_of,
    question_entry,
    results_document,
)
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs import description
from evaluation.runs.summaries import evaluation_summary, evaluation_totals
from subtlebench.errors import Invalid
from subtlebench.planner import analyze_on_commit

# --- Summaries and the results file --------------------------------------------------------------------------


def results_file(evaluation: ModelEvaluation) -> dict:
    """The run as the official results file (`benchmark.results`): a failed request is an entry with `error`,
    `predicted_answer` null and `is_correct` false, as the official evaluator writes it; `accuracy` is over the
    answered entries, with `answered_count`, `failed_count` and `not_asked_count` beside it. A description run: the
    official free-form layout with the judge's verdicts (evaluation.runs.description)."""
    if evaluation.task == description.DESCRIPTION:
        return description.description_results_file(evaluation)
    return _document(evaluation, list(_entries(evaluation)))


ENTRIES_CHUNK = 2000  # results read, and their questions looked up, at a time


def _entries(evaluation: ModelEvaluation):
    """The results file's entries in the results' order, ENTRIES_CHUNK at a time with the questions of just those
    items: a download holds one chunk whatever the run's size (every question of a 45,000-item release read at once
    was most of a download's peak memory)."""
    rows = ModelItemResult.objects.filter(evaluation=evaluation).order_by("pk").iterator(chunk_size=ENTRIES_CHUNK)
    while chunk := list(itertools.islice(rows, ENTRIES_CHUNK)):
        texts = _question_texts(evaluation, [row.question_id for row in chunk])
        for row in chunk:
            yield question_entry(
                question_id=row.question_id,
                question_text=texts.get(row.question_id, ""),
                options=row.options,
                correct_letter=row.correct_letter,
                predicted_letter=row.predicted_letter,
                is_correct=bool(row.is_correct),
                category=row.category,
                domain=row.domain,
                error=f"{row.failure}: {row.failure_message}" if row.failure else None,
                response=row.response_text,
            ) | result_entry_extras(row)


def _document(evaluation: ModelEvaluation, questions: list, counts: QuestionCounts | None = None) -> dict:
    job = evaluation.job
    summary = job.result or {}
    skipped = summary.get("skipped", [])
    endpoint = evaluation.endpoint
    return results_document(
        model=endpoint.model_id if endpoint else evaluation.parameters.get("model") or evaluation.model_name,
        temperature=(evaluation.parameters.get("request") or {}).get("temperature"),
        questions=questions,
        loaded=evaluation.items + len(skipped),
        evaluation_time=(job.finished or timezone.now()).isoformat(),
        max_workers=endpoint.concurrency if endpoint else 0,
        skipped=skipped,
        seed=evaluation.seed,
        prompt_tokens=evaluation.prompt_tokens,
        completion_tokens=evaluation.completion_tokens,
        not_asked=evaluation.not_asked,
        counts=counts,
    ) | results_file_settings(evaluation)


PLACEHOLDER = "\x00questions\x00"


def results_file_text(evaluation: ModelEvaluation) -> Iterator[str]:
    """The results file as `json.dumps(results_file(evaluation), indent=2, ensure_ascii=False)` writes it, the same
    text, in pieces: one entry at a time, so a download of any size holds one entry (and the item texts). Read in one
    snapshot of the database (repeatable read), so the count written first is the entries' that follow."""
    snapshot = not connection.in_atomic_block  # inside a caller's transaction, its snapshot is the one
    with transaction.atomic():
        if snapshot:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        rows = ModelItemResult.objects.filter(evaluation=evaluation)
        evaluation.job.refresh_from_db(fields=["finished", "result"])
        if evaluation.task == description.DESCRIPTION or not rows.exists():
            yield json.dumps(results_file(evaluation), indent=2, ensure_ascii=False)
            return
        # The text around the entries: the document with a placeholder entry, its counts as they will be.
        evaluation_time = evaluation.job.finished or timezone.now()
        evaluation.job.finished = evaluation_time  # one time in the head and the tail
        counts = QuestionCounts(evaluated=rows.count())
        head = json.dumps(_document(evaluation, [PLACEHOLDER], counts), indent=2, ensure_ascii=False)
        yield head[: head.index(json.dumps(PLACEHOLDER))]
        counts = QuestionCounts()
        for entry in _entries(evaluation):
            text = json.dumps(entry, indent=2, ensure_ascii=False).replace("\n", "\n    ")
            yield text if not counts.evaluated else ",\n    " + text
            counts.add(entry)
        tail = json.dumps(_document(evaluation, [PLACEHOLDER], counts), indent=2, ensure_ascii=False)
        yield tail[tail.index(json.dumps(PLACEHOLDER)) + len(json.dumps(PLACEHOLDER)) :]


def result_entry_extras(row: ModelItemResult) -> dict:
    """Issue 28's fields of an entry: the parse outcome, a two-stage run's description, the extracted letter, and a
    circular run's rotations (benchmark.circular.rotation_entries: each one's options, letters and outcome)."""
    extras = {}
    if row.parse_outcome:
        extras["parse_outcome"] = row.parse_outcome
    if row.rotations:
        extras["rotations"] = rotation_entries(row.options, row.correct_letter, row.rotations)
    if row.first_response:
        extras["description"] = row.first_response
    if row.extraction:
        extras["llm_extraction"] = row.extraction
        extras["extracted_answer"] = row.extracted_letter or None
    return extras


def results_file_settings(evaluation: ModelEvaluation) -> dict:
    """Issue 28's settings and counts of the file: the prompt type and texts as run, max tokens, the unparsable
    replies and, with an extraction pass, the second figure under its own name."""
    if not evaluation.endpoint_id:
        return {"unparsable_count": evaluation.unparsable}  # an imported file: its settings are not known here
    request = evaluation.parameters.get("request") or {}
    settings_ = {
        "prompt_type": evaluation.strategy,
        "prompt": evaluation.prompt,
        "max_tokens": request.get("max_tokens"),
        "unparsable_count": evaluation.unparsable,
        "circular": evaluation.circular,
    }
    if "without_regions" in evaluation.parameters:
        settings_["items_without_regions"] = evaluation.parameters["without_regions"]
        settings_["items_without_regions_ids"] = evaluation.parameters.get("without_regions_ids", [])
    if evaluation.extraction_endpoint_id:
        settings_["llm_extraction"] = {
            "model": evaluation.extraction_endpoint.model_id,
            "endpoint": evaluation.extraction_endpoint.name,
            "prompt": evaluation.parameters.get("extraction_prompt") or {},
            "extracted_correct_count": evaluation.extracted_correct,
            "accuracy_with_llm_extraction": evaluation.accuracy_with_extraction,
        }
    return settings_


def _question_texts(evaluation: ModelEvaluation, question_ids: list[str]) -> dict[str, str]:
    """The question of each of these items: its release's record, or for a run from before releases the question of
    the pair each answer is linked to, where the pair is still here."""
    if evaluation.release_id:
        rows = ReleaseItem.objects.filter(release_id=evaluation.release_id, item_id__in=question_ids)
        return {item_id: json.loads(line)["question"] for item_id, line in rows.values_list("item_id", "line")}
    rows = evaluation.results.filter(pair__isnull=False, question_id__in=question_ids)
    return dict(rows.values_list("question_id", "pair__question"))


# --- An official results file imported onto a release ---------------------------------------------------------

UNKNOWN_IDS_SHOWN = 10


@transaction.atomic
def model_results_import(
    *, user, release: Release, name: str, content: bytes | str, file_name: str = ""
) -> ModelEvaluation:
    """Store an official results file (mc_evaluation_results.json) as a run on `release`: each entry is matched to
    the release item with exactly its `question_id` (the release's own item ids; nothing parsed back to pairs).
    Entries of unknown ids are stored nowhere and reported in the run's parameters (`unknown`, `unknown_ids`);
    an id given twice is refused, as is a file none of whose ids is an item of the release. An entry with an
    `error` is a failed request: no answer, counted apart, as for a run in the app."""
    check_coordinator(user)
    name = (name or "").strip()
    label = file_name or "the file"
    if not name:
        raise Invalid({"name": ["Give the model a name."]})
    if len(name) > ModelEvaluation._meta.get_field("name").max_length or "\n" in name:
        raise Invalid({"name": ["A name is one line of at most 200 characters."]})
    try:
        entries = load_results(content, label)
        outcomes = [outcome_of(entry, index, label) for index, entry in enumerate(entries)]
    except ResultsFileError as error:
        raise Invalid({"file": [str(error)]}) from None
    released = {row.item_id: row for row in ReleaseItem.objects.filter(release=release).order_by("pk")}
    matched: dict[str, tuple] = {}
    unknown: list[str] = []
    for entry, outcome in zip(entries, outcomes, strict=True):
        row = released.get(outcome.question_id)
        if row is None:
            unknown.append(outcome.question_id)
        elif outcome.question_id in matched:
            first = matched[outcome.question_id][1].index
            raise Invalid(
                {
                    "file": [
                        f"{label}, entry {outcome.index}: question_id {outcome.question_id} appears twice "
                        f"(first at entry {first}); which answer counts is not clear, so nothing was stored."
                    ]
                }
            )
        else:
            matched[outcome.question_id] = (row, outcome, entry)
    if not matched:
        shown = ", ".join(unknown[:3])
        raise Invalid(
            {
                "file": [
                    f"{label}: none of its {len(entries)} question ids is an item of release {release.name}"
                    + (f" (first: {shown})." if shown else ".")
                ]
            }
        )
    splits = sorted({row.split for row, _, _ in matched.values()})
    now = timezone.now()
    job = Job.objects.create(
        kind=Job.Kind.MODEL_EVAL,
        title=f"Import {name} on release {release.name}",
        status=Job.Status.SUCCEEDED,
        created_by=user if getattr(user, "pk", None) else None,
        total=len(matched),
        done=len(matched),
        started=now,
        finished=now,
    )
    evaluation = ModelEvaluation.objects.create(
        endpoint=None,
        name=name,
        job=job,
        source=ModelEvaluation.Source.IMPORT,
        release=release,
        split=splits[0] if len(splits) == 1 else "",
        file_name=file_name[:300],
        parameters={"entries": len(entries), "unknown": len(unknown), "unknown_ids": unknown[:UNKNOWN_IDS_SHOWN]},
        items=len(matched),
        created_by=job.created_by,
    )
    ModelItemResult.objects.bulk_create(
        _imported_result(evaluation, row, outcome, entry) for row, outcome, entry in matched.values()
    )
    analyze_on_commit(ModelItemResult)
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(**evaluation_totals(evaluation))
    evaluation.refresh_from_db()
    job.result = evaluation_summary(evaluation) | {"unknown": len(unknown), "unknown_ids": unknown[:UNKNOWN_IDS_SHOWN]}
    job.save(update_fields=["result"])
    return evaluation


def _imported_result(evaluation, row: ReleaseItem, outcome, entry: dict) -> ModelItemResult:
    options = entry.get("options")
    options = options if isinstance(options, list) and all(isinstance(o, str) for o in options) else []
    correct = entry.get("correct_letter")
    predicted = outcome.predicted.strip()
    error = entry.get("error")
    failed = bool(error)
    return ModelItemResult(
        evaluation=evaluation,
        release_item=row,
        pair_id=row.pair_id,
        question_id=row.item_id,
        category=row.category,
        domain=row.domain,
        options=options,
        correct_letter=correct if isinstance(correct, str) and correct in LETTERS and len(correct) == 1 else "",
        predicted_letter=predicted if len(predicted) == 1 and predicted in LETTERS else "",
        is_correct=None if failed else outcome.is_correct,
        response_text=str(entry.get("response") or entry.get("predicted_answer_text") or "")[:20000],
        failure=ModelItemResult.Failure.OTHER if failed else "",
        failure_message=str(error)[:2000] if failed else "",
    )
