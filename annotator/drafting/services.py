"""Models that draft, people who decide: a registered model drafts the question, answer and distractors for the pair
editor's frames A and B, whatever their source (a video's frames, a collection's candidate pair: an `EditorSource`,
annotator/picking/editor.py); the annotator edits or discards it; the pair records the draft and what was changed;
models marked for it answer the question being written, so the annotator sees "k of n models wrong" before submitting.

Every request to a model goes from the server (API keys stay server-side), through the model evaluation's client
(annotator/llm/client.py), within MODEL_DRAFT_TIMEOUT_SECONDS, and only for the item the annotator holds.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import default_storage
from django.db import transaction

from annotator.llm.client import ChatClient, RequestFailed
from annotator.llm.endpoints import EndpointUnusable, endpoint_api_key, endpoint_client, request_parameters
from annotator.llm.protocol import configured_prompt
from annotator.models import Category, ModelDraft, ModelEndpoint
from annotator.picking.drafted import background_answerers, drafters
from annotator.picking.editor import EditorSource, Side
from annotator.picking.questions import TEMPLATES
from benchmark.drafting import (
    DEFAULT_DRAFT_PROMPT,
    DraftPrompt,
    DraftPromptError,
    DraftReplyError,
    load_draft_prompt,
    parse_draft,
)
from benchmark.protocol import Item, messages_for, option_of, parse_answer, shuffle_options
from benchmark.taxonomy import FIRST_IMAGE, SECOND_IMAGE
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound, Unavailable
from subtlebench.roles import COORDINATOR, has_role


def configured_draft_prompt() -> DraftPrompt:
    """Our drafting prompt, or the texts of MODEL_DRAFT_PROMPT_FILE (JSON: {"system": ..., "user": ...})."""
    path = getattr(settings, "MODEL_DRAFT_PROMPT_FILE", "")
    if not path:
        return DEFAULT_DRAFT_PROMPT
    try:
        return load_draft_prompt(str(path))
    except DraftPromptError as error:
        raise ImproperlyConfigured(f"MODEL_DRAFT_PROMPT_FILE {error}") from error


# --- Settings per endpoint ----------------------------------------------------------------------------------------


@transaction.atomic
def drafting_settings_update(*, user, drafting: list[int], default: int | None, background: list[int]) -> None:
    """A coordinator sets which endpoints may draft, which one is the team's default drafter, and which answer the
    workbench's questions in the background (all off by default)."""
    if not has_role(user, COORDINATOR):
        raise Forbidden("Only a coordinator can choose the models that draft.")
    known = set(ModelEndpoint.objects.select_for_update().values_list("pk", flat=True))
    unknown = sorted((set(drafting) | set(background) | ({default} if default else set())) - known)
    if unknown:
        raise Invalid({"endpoints": [f"No model endpoint has the id {', '.join(map(str, unknown))}."]})
    if default is not None and default not in drafting:
        raise Invalid({"default": ["The default drafter must be one of the models that may draft."]})
    ModelEndpoint.objects.update(drafts_questions=False, default_drafter=False, answers_drafts=False)
    ModelEndpoint.objects.filter(pk__in=drafting).update(drafts_questions=True)
    ModelEndpoint.objects.filter(pk__in=background).update(answers_drafts=True)
    if default is not None:
        ModelEndpoint.objects.filter(pk=default).update(default_drafter=True)


# --- Drafting -----------------------------------------------------------------------------------------------------


def _image_bytes(side: Side) -> bytes:
    with default_storage.open(side.image.file.name, "rb") as handle:
        return handle.read()


def _client(endpoint: ModelEndpoint) -> ChatClient:
    try:
        key = endpoint_api_key(endpoint)
    except EndpointUnusable as failed:
        raise Unavailable(f"{endpoint.name}: {failed}") from None
    return endpoint_client(endpoint, key, timeout=min(endpoint.timeout_s, settings.MODEL_DRAFT_TIMEOUT_SECONDS))


def _drafter(endpoint_id: int | None) -> ModelEndpoint:
    if endpoint_id is None:
        endpoint = drafters().first()
        if endpoint is None:
            raise Conflict("No model may draft questions: a coordinator chooses them on the Models page.")
        return endpoint
    endpoint = drafters().filter(pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound(f"No model with the id {endpoint_id} may draft questions.")
    return endpoint


def model_draft_request(*, user, source: EditorSource, category: str, index_a, index_b, endpoint_id=None) -> ModelDraft:
    """Ask a drafting model (the team's default, or `endpoint_id`) for the question, answer and distractors of frames A
    and B of the source's item (sent as the first and second image) in this category, for the item the user holds.
    The draft is stored whatever the reply; a reply that gives no usable draft, or no reply, raises Unavailable with
    why, after the row is stored."""
    if category not in Category.values:
        raise Invalid({"category": [f"Pick a category before asking for a draft; {category!r} is not one."]})
    source.check_holds(user)
    frame_a, frame_b = source.sides(index_a, index_b)
    endpoint = _drafter(endpoint_id)
    prompt = configured_draft_prompt()
    parameters = request_parameters()
    messages = prompt.messages(category, _image_bytes(frame_a), _image_bytes(frame_b))
    draft = ModelDraft(
        author=user,
        **source.target,
        endpoint=endpoint,
        endpoint_name=endpoint.name,
        model_id=endpoint.model_id,
        category=category,
        index_a=frame_a.index,
        index_b=frame_b.index,
        prompt={"system": prompt.system, "user": prompt.user_text(category)},
        parameters=parameters,
    )
    client = _client(endpoint)
    started = time.monotonic()
    try:
        reply = client.complete(messages, parameters, retries=0)
    except RequestFailed as failed:
        draft.failure = f"{endpoint.name}: {failed.message}"
    else:
        draft.response_text = client.redact(reply.text)[:20000]
        draft.prompt_tokens, draft.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        try:
            parsed = parse_draft(reply.text, category)
        except DraftReplyError as error:
            draft.failure = f"{endpoint.name}: {client.redact(str(error))}"
        else:
            draft.question, draft.answer = parsed.question, parsed.answer
            draft.distractors, draft.answer_frame = parsed.distractors, parsed.answer_frame
    finally:
        client.close()
    draft.latency_ms = int(1000 * (time.monotonic() - started))
    draft.failure = draft.failure[: ModelDraft._meta.get_field("failure").max_length]
    draft.save()
    if draft.failure:
        raise Unavailable(f"No draft: {draft.failure}")
    return draft


# --- Background answers ---------------------------------------------------------------------------------------------


def _answer_item(*, category, frame_a, frame_b, question, answer, distractors, answer_frame) -> Item:
    """The question as the annotator has it now, as a multiple-choice item with A as the first image."""
    question = " ".join((question or "").split())
    if not question:
        raise Invalid({"question": ["Write the question first."]})
    if TEMPLATES[category].binary:
        if category == Category.TEMPORAL:
            if frame_a.timestamp == frame_b.timestamp:
                raise Invalid({"frames": ["Frames A and B have the same timestamp: no image was taken later."]})
            answer_frame = "a" if frame_a.timestamp > frame_b.timestamp else "b"
        if answer_frame not in ("a", "b"):
            raise Invalid({"answer_frame": ["Say which frame is the answer: A or B."]})
        answer = FIRST_IMAGE if answer_frame == "a" else SECOND_IMAGE
        distractors = [SECOND_IMAGE if answer == FIRST_IMAGE else FIRST_IMAGE]
    else:
        answer = " ".join((answer or "").split())
        distractors = [" ".join(d.split()) for d in distractors or [] if d and d.strip()]
        if not answer or not distractors:
            raise Invalid({"answer": ["Write the answer and at least one distractor first."]})
    return Item(
        question_id="draft",
        question=question,
        answer=answer,
        distractors=distractors[:4],
        category=category,
        domain="",
        image_1="",
        image_2="",
    )


def _ask(endpoint: ModelEndpoint, key: str, item: Item, messages, parameters) -> dict:
    """One model's answer to the item (in a thread: no database here)."""
    row = {"id": endpoint.pk, "name": endpoint.name, "verdict": "failed", "chose": "", "message": ""}
    client = endpoint_client(endpoint, key, timeout=min(endpoint.timeout_s, settings.MODEL_DRAFT_TIMEOUT_SECONDS))
    try:
        reply = client.complete(messages, parameters, retries=0)
    except RequestFailed as failed:
        row["message"] = failed.message
        return row
    finally:
        client.close()
    letter = parse_answer(reply.text)
    chosen = option_of(item.options, letter) if letter else None
    if chosen is None:
        row["message"] = "no answer letter in its reply"
        return row
    row["verdict"] = "right" if letter == item.correct_letter else "wrong"
    row["chose"] = chosen
    return row


def draft_answers(
    *,
    user,
    source: EditorSource,
    category: str,
    index_a,
    index_b,
    question: str,
    answer="",
    distractors=(),
    answer_frame="",
) -> dict:
    """Ask every endpoint that answers drafts in the background the question as it stands (the evaluation's protocol
    and prompt, the options shuffled with seed 0): {"asked": n, "answered": m, "wrong": k, "failed": f, "models":
    [{name, verdict, chose, message}]}. A failed request is no answer, neither right nor wrong."""
    if category not in Category.values:
        raise Invalid({"category": [f"Pick a category first; {category!r} is not one."]})
    source.check_holds(user)
    endpoints = list(background_answerers())
    if not endpoints:
        return {"asked": 0, "answered": 0, "wrong": 0, "failed": 0, "models": []}
    frame_a, frame_b = source.sides(index_a, index_b)
    item = _answer_item(
        category=category,
        frame_a=frame_a,
        frame_b=frame_b,
        question=question,
        answer=answer,
        distractors=list(distractors),
        answer_frame=answer_frame,
    )
    shuffle_options([item], 0)
    messages = messages_for(item, _image_bytes(frame_a), _image_bytes(frame_b), configured_prompt())
    parameters = request_parameters()
    keys, rows = {}, []
    for endpoint in endpoints:
        try:
            keys[endpoint.pk] = endpoint_api_key(endpoint)
        except EndpointUnusable as failed:
            rows.append(
                {"id": endpoint.pk, "name": endpoint.name, "verdict": "failed", "chose": "", "message": str(failed)}
            )
    asked = [endpoint for endpoint in endpoints if endpoint.pk in keys]
    if asked:
        with ThreadPoolExecutor(max_workers=len(asked)) as pool:
            rows += list(pool.map(lambda e: _ask(e, keys[e.pk], item, messages, parameters), asked))
    rows.sort(key=lambda row: (row["name"], row["id"]))
    answered = sum(row["verdict"] != "failed" for row in rows)
    wrong = sum(row["verdict"] == "wrong" for row in rows)
    return {"asked": len(rows), "answered": answered, "wrong": wrong, "failed": len(rows) - answered, "models": rows}
