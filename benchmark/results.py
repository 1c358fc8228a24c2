"""The official evaluator's results file (`mc_evaluation_results.json`, the layout of its `_finalize_mc_results`):
written from a run's answers, and read back (ours or the official evaluator's) as per-question outcomes keyed by
item id."""

from __future__ import annotations

from dataclasses import dataclass

from benchmark import jsonlimits
from benchmark.protocol import option_of

RESULTS_FILE = "mc_evaluation_results.json"


def question_entry(
    *,
    question_id: str,
    question_text: str,
    options: list[str],
    correct_letter: str,
    predicted_letter: str | None,
    is_correct: bool,
    category: str,
    domain: str,
    error: str | None = None,
    response: str = "",
) -> dict:
    """One entry of `questions`: a failed request has `error` (and no cost), an answered one its reply."""
    answer = option_of(options, correct_letter) or "" if correct_letter else ""
    entry = {
        "question_id": question_id,
        "question_text": question_text,
        "options": options,
        "negatives": [option for option in options if option != answer],
        "correct_answer": answer,
        "correct_letter": correct_letter,
        "predicted_answer": predicted_letter or None,
        "predicted_answer_text": option_of(options, predicted_letter) if predicted_letter else None,
        "is_correct": bool(is_correct),
        "category": category,
        "domain": domain,
    }
    if error is not None:
        entry["error"] = error
        entry["cost"] = 0.0
    else:
        entry["response_content"] = response
    return entry


@dataclass
class QuestionCounts:
    """The counts of a results file's entries: an entry with `error` is no answer."""

    evaluated: int = 0
    answered: int = 0
    correct: int = 0

    def add(self, entry: dict) -> None:
        self.evaluated += 1
        if "error" not in entry:
            self.answered += 1
            self.correct += bool(entry["is_correct"])


def results_document(
    *,
    model: str,
    temperature,
    questions: list[dict],
    loaded: int,
    evaluation_time: str,
    max_workers: int,
    skipped: list[str],
    seed: int,
    prompt_tokens: int,
    completion_tokens: int,
    not_asked: int = 0,
    counts: QuestionCounts | None = None,
) -> dict:
    """The whole file: the run's settings and counts, then `questions` (see `question_entry`). `accuracy` is over
    the answered questions: an entry with `error` (a failed request) is no answer, counted in `failed_count`, and
    `not_asked_count` items of the run have no entry yet. `counts`: the questions' counts when `questions` stands
    in for entries written elsewhere (a streamed file)."""
    if counts is None:
        counts = QuestionCounts()
        for entry in questions:
            counts.add(entry)
    return {
        "model": model,
        "temperature": temperature,
        "repetition_penalty": 0.0,
        "total_questions_loaded": loaded,
        "total_questions_evaluated": counts.evaluated,
        "evaluation_time": evaluation_time,
        "questions": questions,
        "max_workers": max_workers,
        "skipped_items": [{"item_id": qid, "reason": "missing_image"} for qid in skipped],
        "correct_count": counts.correct,
        "answered_count": counts.answered,
        "failed_count": counts.evaluated - counts.answered,
        "not_asked_count": not_asked,
        "accuracy": counts.correct / counts.answered if counts.answered else 0,
        "total_cost_usd": 0.0,
        "cost_per_question": 0.0,
        "random_seed": seed,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
    }


class ResultsFileError(ValueError):
    """A results file that cannot be read; the message names the file (and the entry) and what is wrong."""


@dataclass(frozen=True)
class Outcome:
    """One question of a results file: its item id, whether the model was right, the letter it gave."""

    index: int  # its place in the file's list, for messages
    question_id: str
    is_correct: bool
    predicted: str


def result_entries(data, label: str) -> list:
    """The per-question entries of a parsed results file: the official `questions`, or a list, or the same under
    `results` / `per_question` / `details`, or an object keyed by question id."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "per_question", "details", "questions"):
            if isinstance(data.get(key), list):
                return data[key]
        if data and all(isinstance(v, dict) for v in data.values()):
            return [{"question_id": k, **v} for k, v in data.items()]
    raise ResultsFileError(
        f"{label}: expected a JSON list of per-question results (or an object holding one under 'results')."
    )


def load_results(content: bytes | str, label: str = "the file") -> list:
    """The per-question entries of a results file's text (see `result_entries`), not yet checked one by one."""
    try:
        data = jsonlimits.loads(content)
    except (UnicodeDecodeError, ValueError) as error:
        raise ResultsFileError(f"{label}: not valid JSON ({error}).") from None
    return result_entries(data, label)


def outcome_of(entry, index: int, label: str = "the file") -> Outcome:
    """One entry as an Outcome; it needs `question_id` and a boolean `is_correct`."""
    where = f"{label}, entry {index}"
    if not isinstance(entry, dict):
        raise ResultsFileError(f"{where}: expected an object, got {type(entry).__name__}.")
    missing = [f for f in ("question_id", "is_correct") if f not in entry]
    if missing:
        raise ResultsFileError(f"{where}: missing field {', '.join(missing)}.")
    if not isinstance(entry["is_correct"], bool):
        raise ResultsFileError(f"{where}: is_correct must be true or false, got {entry['is_correct']!r}.")
    return Outcome(
        index=index,
        question_id=str(entry["question_id"]),
        is_correct=entry["is_correct"],
        predicted=str(entry.get("predicted_answer") or ""),
    )


def read_results(content: bytes | str, label: str = "the file") -> list[Outcome]:
    """Every question of a results file, in file order."""
    return [outcome_of(entry, index, label) for index, entry in enumerate(load_results(content, label))]
