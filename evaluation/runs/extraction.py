"""The optional LLM extraction pass of a run (issue 28; asked for by VLMEvalKit users, open-compass/VLMEvalKit #1137
and #1552): a registered endpoint reads each unparsable reply with the question and its options and names the letter
it chose, or X for none. Its letters give a second, labelled figure, "accuracy with LLM extraction"; the headline
accuracy never changes. Text only, temperature 0 (where its profile takes one), its own token limit and effort (run
settings); each row is read once (a failed request is tried again when the run is). An extraction endpoint that is
down leaves its rows "request failed": counted wrong in the second figure, and said so on the run's page.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from annotator.llm.client import ChatClient, RequestCancelled, RequestFailed
from annotator.llm.endpoints import endpoint_client
from annotator.llm.keys import KeyUnavailable, endpoint_key
from benchmark.protocol import Item, option_of, parse_answer
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs.strategies import extraction_messages, extraction_prompt

Extraction = ModelItemResult.Extraction
# Runs from before per-run extraction settings stored none: they keep these.
EXTRACTION_PARAMETERS = {"temperature": 0, "max_tokens": 16}
TEXT_MAX = 2000


def read_letter(text: str, options: list[str]) -> tuple[str, str]:
    """(extraction outcome, letter) of the extractor's reply: a letter naming a shown option, or none."""
    letter = parse_answer(text) or ""
    if letter and option_of(options, letter) is not None:
        return Extraction.LETTER, letter
    return Extraction.NONE, ""


def _extract(
    client: ChatClient, row: ModelItemResult, item: Item | None, prompt: dict, request: dict
) -> ModelItemResult | None:
    if item is None:  # the item left the source since: nothing to show the extractor
        row.extraction, row.extraction_text = Extraction.FAILED, "the item is no longer in the run's source"
        return row
    try:
        answer = client.complete(
            extraction_messages(item, row.options, row.response_text, prompt), request, retries=None
        )
    except RequestCancelled:
        return None
    except RequestFailed as failed:
        row.extraction, row.extracted_letter, row.extraction_text = Extraction.FAILED, "", failed.message[:TEXT_MAX]
        return row
    row.extraction, row.extracted_letter = read_letter(answer.text, row.options)
    row.extraction_text = client.redact(answer.text)[:TEXT_MAX]
    return row


def extraction_pass(evaluation: ModelEvaluation, items: Iterable[Item]) -> int:
    """Read the run's unparsable replies not read yet (or whose reading failed) with its extraction endpoint; the
    number of rows read."""
    endpoint = evaluation.extraction_endpoint
    rows = list(
        ModelItemResult.objects.filter(evaluation=evaluation, parse_outcome=ModelItemResult.Parse.UNPARSABLE)
        .exclude(extraction__in=(Extraction.LETTER, Extraction.NONE))
        .order_by("pk")
    )
    if not rows or endpoint is None:
        return 0
    wanted = {row.question_id for row in rows}
    by_id = {item.question_id: item for item in items if item.question_id in wanted}
    prompt = evaluation.parameters.get("extraction_prompt") or extraction_prompt()
    request = evaluation.parameters.get("extraction_request", EXTRACTION_PARAMETERS)
    try:
        key = endpoint_key(endpoint)
    except KeyUnavailable as error:
        for row in rows:
            row.extraction, row.extraction_text = Extraction.FAILED, str(error)[:TEXT_MAX]
        ModelItemResult.objects.bulk_update(rows, ["extraction", "extraction_text"])
        return len(rows)
    client = endpoint_client(endpoint, key)
    try:
        with ThreadPoolExecutor(max_workers=endpoint.concurrency, thread_name_prefix="model-extract") as executor:
            done = [
                row
                for row in executor.map(
                    lambda row: _extract(client, row, by_id.get(row.question_id), prompt, request), rows
                )
                if row is not None
            ]
    finally:
        client.close()
    ModelItemResult.objects.bulk_update(done, ["extraction", "extracted_letter", "extraction_text"])
    return len(done)
