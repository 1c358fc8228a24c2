"""The description task and its LLM judge, circular evaluation, and a run's accuracy with intervals (issue 28).

A description run asks the model, for each captioned item of a release's split, to describe the difference between
the two images (benchmark.description), then asks the judge endpoint whether that description matches the item's
human caption: the judge's yes is a right answer, its no a wrong one; a failed request of either is no answer (the
item is asked again, as any failed item is). A circular run asks each multiple-choice item once per rotation of its
options (benchmark.circular), with the run's strategy, and counts it right only when right every time; a reply that
names no shown option is a wrong answer in its rotation, so the item stays in the denominator, as the official
evaluator (and a plain run here) scores an unparsable reply.

Both are steps of `services._answer`, run in the run's worker threads: nothing here touches the database while
asking. The judge shares the model client's watchdog, so a cancelled run cuts the judge's requests off too.
"""

from __future__ import annotations

import copy
import json
import time
from contextlib import nullcontext
from dataclasses import dataclass
from fractions import Fraction

from PIL import UnidentifiedImageError

from annotator.llm.client import ChatClient, RequestCancelled, RequestFailed
from annotator.llm.endpoints import endpoint_client
from annotator.llm.keys import KeyUnavailable, endpoint_key
from annotator.llm.profiles import clean_request, endpoint_profile
from annotator.models import (
    Category,
    Domain,
    ModelEndpoint,
    Release,
    ReleaseItem,
)
from benchmark.circular import circular_correct, rotations
from benchmark.description import (
    DEFAULT_DESCRIPTION_PROMPT,
    JudgePromptError,
    captioned,
    description_messages,
    free_form_document,
    judge_messages,
    judge_prompt_of,
    parse_verdict,
)
from benchmark.intervals import Scored, accuracy_interval, micro_mean
from benchmark.protocol import DEFAULT_PROMPT, Item, letter
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs.answering import parse_reply
from evaluation.runs.strategies import STRATEGIES, answer_messages, describe_messages
from subtlebench.errors import Invalid

Failure = ModelItemResult.Failure
Parse = ModelItemResult.Parse
DESCRIPTION = "description"
MULTIPLE_CHOICE = "multiple_choice"
TASKS = (MULTIPLE_CHOICE, DESCRIPTION)
# The judge grades; it does not create: no sampling, a short reply (a reasoning model's judge gets no limit by
# default: its reasoning counts against it). Its endpoint's profile writes the request as for any other.
JUDGE_REQUEST = {"temperature": 0, "max_tokens": 256}


# --- Settings of a run ------------------------------------------------------------------------------------------


def clean_run_settings(
    *,
    task: str,
    judge: ModelEndpoint | None,
    judge_prompt,
    circular: bool,
    source: str,
    release: Release | None,
    judge_max_tokens: int | None = None,
    judge_effort: str | None = None,
    extraction: bool = False,
) -> dict:
    """The task's fields of a new run, checked: a description run is on a release (its captions are the released
    ones) and names its judge, whose request settings (token limit, effort) are checked against its profile and
    returned as `judge_request`; circular evaluation is for multiple-choice runs without an extraction pass (that pass
    reads one reply against one order of the options; a circular item has one per rotation)."""
    task = task or MULTIPLE_CHOICE
    if task not in TASKS:
        raise Invalid({"task": [f"The task is {' or '.join(TASKS)}, not {task!r}."]})
    if task == MULTIPLE_CHOICE:
        if judge is not None or judge_prompt or judge_max_tokens is not None or judge_effort:
            raise Invalid({"judge": ["A judge grades descriptions: only a description run has one."]})
        if circular and extraction:
            raise Invalid(
                {
                    "extraction_endpoint": [
                        "LLM extraction reads one reply per item; a circular run has one per rotation of the options: "
                        "choose one of the two."
                    ]
                }
            )
        return {"task": task, "circular": bool(circular)}
    if circular:
        raise Invalid({"circular": ["Circular evaluation rotates options: a description run has none."]})
    if source != ModelEvaluation.Source.RELEASE or release is None:
        raise Invalid({"source": ["A description run is on a release's split: its captions are the released ones."]})
    if judge is None:
        raise Invalid({"judge": ["Name the judge: the endpoint that compares each description with the caption."]})
    try:
        prompt = judge_prompt_of(judge_prompt)
    except JudgePromptError as error:
        raise Invalid({"judge_prompt": [str(error)]}) from None
    profile = endpoint_profile(judge)
    request = clean_request(
        profile,
        judge.name,
        max_tokens=judge_max_tokens,
        effort=judge_effort,
        default_temperature=JUDGE_REQUEST["temperature"],
        default_max_tokens=0 if profile.effort else JUDGE_REQUEST["max_tokens"],
        prefix="judge_",
    )
    return {
        "task": task,
        "judge": judge,
        "judge_prompt": prompt.as_dict(),
        "prompt": dict(DEFAULT_DESCRIPTION_PROMPT),
        "judge_request": request,
    }


@dataclass
class CaptionedItem(Item):
    """An item of a description run: the item with its human caption."""

    caption: str = ""


# --- Asking --------------------------------------------------------------------------------------------------


def open_judge(evaluation: ModelEvaluation, client: ChatClient) -> ChatClient | None:
    """The judge's client of a description run (None otherwise), checked as the model's is: RequestFailed when it
    is down or does not serve its model. It shares `client`'s watchdog, so cancelling the run cancels it too."""
    if evaluation.task != DESCRIPTION:
        return None
    judge = evaluation.judge
    try:
        key = endpoint_key(judge)
    except KeyUnavailable as error:
        raise RequestFailed(Failure.OTHER, f"judge {judge.name}: {error}") from None
    judge_client = endpoint_client(judge, key)
    judge_client.watchdog = client.watchdog
    try:
        judge_client.check_model(judge.name)
    except RequestFailed as failed:
        raise RequestFailed(failed.kind, f"the judge {judge.name}: {failed.message}", failed.attempts) from None
    return judge_client


def _images(read, evaluation, item, result) -> tuple[bytes, bytes] | None:
    try:
        return read(evaluation, item.image_1), read(evaluation, item.image_2)
    except OSError as error:
        result.failure, result.failure_message = Failure.OTHER, f"cannot read an image of the item ({error})"
        return None


def _add_usage(result: ModelItemResult, answer) -> None:
    result.prompt_tokens += answer.prompt_tokens
    result.completion_tokens += answer.completion_tokens
    result.reasoning_tokens += answer.reasoning_tokens
    if answer.reasoning_text:
        result.reasoning_text = "\n\n".join(text for text in (result.reasoning_text, answer.reasoning_text) if text)
    result.latency_ms += answer.latency_ms
    result.attempts = max(result.attempts, answer.attempts)


def describe_and_judge(client: ChatClient, judge: ChatClient, evaluation, item, result, parameters, read):
    """The description of one item and the judge's verdict on it (in a worker thread). None: cancelled."""
    result.options, result.correct_letter = [], ""
    images = _images(read, evaluation, item, result)
    if images is None:
        return result
    result.prompt_tokens = result.completion_tokens = result.latency_ms = result.reasoning_tokens = 0
    started = time.monotonic()
    try:
        answer = client.complete(description_messages(*images, evaluation.prompt), parameters)
    except RequestCancelled:
        return None
    except RequestFailed as failed:
        result.failure, result.failure_message, result.attempts = failed.kind, failed.message, failed.attempts
        result.latency_ms = int(1000 * (time.monotonic() - started))
        return result
    _add_usage(result, answer)
    result.reasoning_text = client.redact(result.reasoning_text)[:20000]
    description = client.redact(answer.text).strip()[:20000]
    result.response_text = description
    if not description:
        result.failure, result.failure_message = Failure.MALFORMED, "the model's reply is empty"
        return result
    prompt = judge_prompt_of(evaluation.judge_prompt)
    try:
        request = evaluation.parameters.get("judge_request", JUDGE_REQUEST)
        verdict = judge.complete(judge_messages(item.caption, description, prompt), request)
    except RequestCancelled:
        return None
    except RequestFailed as failed:
        result.failure, result.attempts = failed.kind, failed.attempts
        result.failure_message = f"judge {evaluation.judge.name}: {failed.message}"
        return result
    result.judge_text = judge.redact(verdict.text)[:20000]
    result.latency_ms += verdict.latency_ms
    matches = parse_verdict(verdict.text)
    if matches is None:
        shown = judge.redact(" ".join(verdict.text.split()))[:120]
        result.failure = Failure.MALFORMED
        result.failure_message = f"judge {evaluation.judge.name}: no verdict (yes or no) in its reply: {shown!r}"
        return result
    result.is_correct = matches
    return result


def circular_answer(
    client: ChatClient, evaluation, item: Item, result, prompt, parameters, read, regions=None, slots=None
):
    """One multiple-choice item asked once per rotation of its options (in a worker thread), with the images and
    texts of the run's strategy (a two-stage run describes once, then answers each rotation): right only when right
    in every rotation. A reply the official parser cannot read as a shown option is that rotation's wrong answer,
    as a plain run scores it: the item is answered (wrong), its parse outcome unparsable, its letter in `rotations`
    "" (the marker of a rotation without a letter). A failed request in any rotation fails the item (it is asked
    again). None: cancelled."""
    chosen = STRATEGIES[evaluation.strategy]
    try:
        images = chosen.images(read(evaluation, item.image_1), read(evaluation, item.image_2), regions or [])
    except (OSError, UnidentifiedImageError, ValueError) as error:
        result.failure, result.failure_message = Failure.OTHER, f"cannot read an image of the item ({error})"
        return result
    # The run's stored texts (evaluation.runs.runsettings); a text a stored prompt lacks is ours.
    prompt = {"system": DEFAULT_PROMPT.system, "user": DEFAULT_PROMPT.user, **(prompt or {})}
    result.prompt_tokens = result.completion_tokens = result.latency_ms = result.reasoning_tokens = 0
    letters, flags, replies, unparsable, first_letter = [], [], [], False, ""
    with slots or nullcontext():
        try:
            described = ""
            if chosen.two_stage:
                answer = client.complete(describe_messages(item, images, prompt), parameters)
                _add_usage(result, answer)
                described = answer.text
                result.first_response = client.redact(described)[:20000]
            for number, (options, correct) in enumerate(rotations(item.options, item.correct_index)):
                shown = copy.copy(item)
                shown.options, shown.correct_index = options, correct
                try:
                    answer = client.complete(answer_messages(shown, images, prompt, described), parameters)
                except RequestFailed as failed:
                    result.failure, result.attempts = failed.kind, failed.attempts
                    result.failure_message = f"rotation {number}: {failed.message}"
                    return result
                _add_usage(result, answer)
                replies.append(client.redact(answer.text))
                outcome, predicted = parse_reply(answer.text, options)
                if number == 0:
                    first_letter = predicted  # as a plain run keeps it, even a letter past the options
                unparsable |= outcome == Parse.UNPARSABLE
                letters.append(predicted if outcome == Parse.PARSED else "")
                flags.append(outcome == Parse.PARSED and predicted == letter(correct))
        except RequestCancelled:
            return None
        except RequestFailed as failed:  # the two-stage description
            result.failure, result.attempts = failed.kind, failed.attempts
            result.failure_message = f"description: {failed.message}"
            return result
    result.reasoning_text = client.redact(result.reasoning_text)[:20000]
    result.rotations = letters
    result.predicted_letter = first_letter
    result.parse_outcome = Parse.UNPARSABLE if unparsable else Parse.PARSED
    result.is_correct = circular_correct(flags)
    result.response_text = "\n\n".join(f"[rotation {n}]\n{text}" for n, text in enumerate(replies))[:20000]
    return result


# --- Accuracy with intervals -----------------------------------------------------------------------------------


def _cell(flags: list[tuple[bool, str]]) -> dict:
    """Accuracy of (right, cluster) answers with its 95% cluster-robust interval (benchmark.intervals)."""
    n = len(flags)
    correct = sum(flag for flag, _ in flags)
    mean = micro_mean(Scored(Fraction(int(flag)), cluster) for flag, cluster in flags)
    interval = accuracy_interval(mean, answers=n) if mean else None
    return {
        "correct": correct,
        "n": n,
        "accuracy": correct / n if n else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
        "clusters": mean.clusters if mean else 0,
    }


def accuracy_table(evaluation: ModelEvaluation) -> dict:
    """The run's accuracy over its answered items, overall, per category and per domain, each with its 95%
    interval; items of one video (the release item's cluster) count as one cluster, an item before releases as
    its own."""
    rows = (
        ModelItemResult.objects.filter(evaluation=evaluation, is_correct__isnull=False)
        .order_by("pk")
        .values_list("is_correct", "category", "domain", "question_id", "release_item__cluster")
    )
    every, categories, domains = [], {}, {}
    for correct, category, domain, question_id, cluster in rows:
        answer = (correct, cluster or f"item:{question_id}")
        every.append(answer)
        categories.setdefault(category, []).append(answer)
        domains.setdefault(domain, []).append(answer)
    return {
        "overall": _cell(every),
        "categories": {c: _cell(categories[c]) for c in Category.values if c in categories},
        "domains": {d: _cell(domains[d]) for d in Domain.values if d in domains},
    }


def accuracy_rows(table: dict) -> list[dict]:
    """The table as rows for a page: overall, then each category, then each domain."""
    rows = [{"group": "overall", "name": "all answered items", **table["overall"]}]
    rows += [{"group": "category", "name": name, **cell} for name, cell in table["categories"].items()]
    rows += [{"group": "domain", "name": name, **cell} for name, cell in table["domains"].items()]
    return rows


# --- The results file ------------------------------------------------------------------------------------------


def description_results_file(evaluation: ModelEvaluation) -> dict:
    """A description run as the official free-form results layout, each result with the judge's verdict and reply;
    the accuracy per category and domain with intervals beside it."""
    captions = {
        item_id: captioned(json.loads(line))
        for item_id, line in ReleaseItem.objects.filter(release_id=evaluation.release_id)
        .order_by("pk")
        .values_list("item_id", "line")
    }
    results = []
    for row in ModelItemResult.objects.filter(evaluation=evaluation).order_by("pk").iterator(chunk_size=2000):
        entry = {
            "base_name": row.question_id,
            "caption": captions.get(row.question_id),
            "differences": row.response_text,
            "content": row.response_text,
            "judge_response": row.judge_text,
            "judge_match": row.is_correct,
            "category": row.category,
            "domain": row.domain,
        }
        if row.failure:
            entry["error"] = f"{row.failure}: {row.failure_message}"
        results.append(entry)
    table = accuracy_table(evaluation)
    endpoint, judge = evaluation.endpoint, evaluation.judge
    return free_form_document(
        model=endpoint.model_id if endpoint else evaluation.model_name,
        judge=judge.model_id if judge else "",
        prompt=evaluation.prompt,
        judge_prompt=evaluation.judge_prompt,
        results=results,
        total_pairs=evaluation.items,
        correct_count=table["overall"]["correct"],
        answered_count=table["overall"]["n"],
        accuracy=table["overall"]["accuracy"],
        accuracy_intervals=table,
        failed_count=sum(1 for row in results if "error" in row),
    )
