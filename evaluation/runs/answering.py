"""One item asked by a run's strategy (issue 28): its images made (evaluation.runs.strategies), one request or
two (two-stage), and the reply's parse outcome.

A reply is "parsed" when the official parser (`benchmark.protocol.parse_answer`, the ResponseParser of
krafton-ai/VLM-SubtleBench) reads a letter that names a shown option; otherwise it is "unparsable" and scored wrong,
as the official evaluator scores it (its `predicted_index == correct_index` is false for "" and for a letter beyond
the options), so the headline accuracy stays comparable with published numbers. It is an answer, not a failure:
never asked again. The optional LLM extraction pass reads it later (evaluation.runs.extraction).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext

from PIL import UnidentifiedImageError

from annotator.llm.client import ChatClient, RequestCancelled, RequestFailed
from annotator.models import Pair, ReleaseItem
from annotator.regions import regions_swapped
from benchmark.protocol import LETTERS, Item, option_of, parse_answer
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs.strategies import STRATEGIES, answer_messages, describe_messages

Failure = ModelItemResult.Failure
Parse = ModelItemResult.Parse
RESPONSE_MAX = 20000


def item_regions(evaluation: ModelEvaluation, items: list[Item]) -> dict[str, list[dict]]:
    """The stored difference regions of each item, by item id, numbered as the item shows its images (a release item
    whose images were swapped has its regions' images swapped too); only for a strategy that draws them (an oracle:
    `highlight_oracle`), empty for every other."""
    if not STRATEGIES[evaluation.strategy].uses_regions:
        return {}
    if evaluation.release_id:
        rows = ReleaseItem.objects.filter(release_id=evaluation.release_id, split=evaluation.split).order_by("pk")
        regions = {}
        for item_id, swapped, boxes in rows.values_list("item_id", "swapped", "pair__regions"):
            regions[item_id] = regions_swapped(boxes) if swapped else list(boxes or [])
        return regions
    by_pair = dict(
        Pair.objects.filter(pk__in={item.pair_id for item in items if item.pair_id})
        .order_by("pk")
        .values_list("pk", "regions")
    )
    return {item.question_id: by_pair.get(item.pair_id) or [] for item in items if item.pair_id}


WITHOUT_REGIONS_SHOWN = 20


def note_items_without_regions(evaluation: ModelEvaluation, items: list[Item], regions: dict[str, list[dict]]) -> None:
    """A run of an oracle strategy (one that draws the stored regions) sends an item without stored regions with no
    box, never boxes computed in their place: store with the run how many such items it has, and the first
    WITHOUT_REGIONS_SHOWN of their ids, for its summary, page and results file."""
    if not STRATEGIES[evaluation.strategy].uses_regions:
        return
    missing = [item.question_id for item in items if not regions.get(item.question_id)]
    evaluation.parameters = {
        **evaluation.parameters,
        "without_regions": len(missing),
        "without_regions_ids": missing[:WITHOUT_REGIONS_SHOWN],
    }
    ModelEvaluation.objects.filter(pk=evaluation.pk).update(parameters=evaluation.parameters)


def parse_reply(text: str, options: list[str]) -> tuple[str, str]:
    """(parse outcome, predicted letter) of a reply: the letter is kept when the parser read one, even one beyond
    the options (the official results file keeps it too)."""
    predicted = parse_answer(text) or ""
    if predicted and option_of(options, predicted) is not None:
        return Parse.PARSED, predicted
    return Parse.UNPARSABLE, predicted if len(predicted) == 1 and predicted in LETTERS else ""


def answer_item(
    client: ChatClient,
    result: ModelItemResult,
    item: Item,
    strategy: str,
    prompt: dict,
    parameters: dict,
    regions: list[dict],
    read: Callable[[str], bytes],
    slots: threading.Semaphore | None = None,
) -> ModelItemResult | None:
    """Fill `result` with the model's answer to the item (in a worker thread; no database here). None: the run was
    cancelled meanwhile. The images are made first; the requests then wait for one of the endpoint's `slots` (at
    most `concurrency` requests in flight)."""
    chosen = STRATEGIES[strategy]
    try:
        images = chosen.images(read(item.image_1), read(item.image_2), regions)
    except (OSError, UnidentifiedImageError, ValueError) as error:
        result.failure, result.failure_message = Failure.OTHER, f"cannot read an image of the item ({error})"
        return result
    # The first request's messages (base64 of the images) are made before taking a slot too.
    first = describe_messages(item, images, prompt) if chosen.two_stage else answer_messages(item, images, prompt)
    with slots or nullcontext():
        return _ask(client, result, item, chosen.two_stage, images, first, prompt, parameters)


def _ask(client, result, item, two_stage: bool, images, messages, prompt, parameters) -> ModelItemResult | None:
    started = time.monotonic()
    try:
        if two_stage:
            described = client.complete(messages, parameters)
            result.first_response = client.redact(described.text)[:RESPONSE_MAX]
            result.prompt_tokens, result.completion_tokens = described.prompt_tokens, described.completion_tokens
            result.reasoning_tokens = described.reasoning_tokens
            result.reasoning_text = described.reasoning_text
            messages = answer_messages(item, images, prompt, described.text)
        answer = client.complete(messages, parameters)
    except RequestCancelled:
        return None
    except RequestFailed as failed:
        result.failure, result.failure_message, result.attempts = failed.kind, failed.message, failed.attempts
        result.latency_ms = int(1000 * (time.monotonic() - started))
        return result
    result.response_text = client.redact(answer.text)[:RESPONSE_MAX]
    result.prompt_tokens += answer.prompt_tokens
    result.completion_tokens += answer.completion_tokens
    # The reasoning is stored and counted apart; only the answer's content is parsed.
    result.reasoning_tokens += answer.reasoning_tokens
    reasoning = "\n\n".join(text for text in (result.reasoning_text, answer.reasoning_text) if text)
    result.reasoning_text = client.redact(reasoning)[:RESPONSE_MAX]
    result.latency_ms = int(1000 * (time.monotonic() - started))
    result.attempts = answer.attempts
    result.parse_outcome, result.predicted_letter = parse_reply(answer.text, item.options)
    result.is_correct = result.parse_outcome == Parse.PARSED and result.predicted_letter == item.correct_letter
    return result
