"""The pair-picking side of models that draft (annotator/drafting asks the models): the drafting models the workbench
offers, and what a submitted pair records of the model's draft it started from (`Pair.drafted_by`, `draft_changes`).
Kept here, with no model client, so that picking never depends on the model evaluation's code."""

from __future__ import annotations

from django.conf import settings

from annotator.models import ModelDraft, ModelEndpoint, Pair
from benchmark.drafting import draft_changes
from benchmark.taxonomy import FIRST_IMAGE, SECOND_IMAGE
from subtlebench.errors import Invalid

FIELDS = ("question", "answer", "distractors")


def drafters():
    """The endpoints that may draft, the team's default first."""
    return ModelEndpoint.objects.filter(drafts_questions=True, archived_at__isnull=True).order_by(
        "-default_drafter", "name", "pk"
    )


def background_answerers():
    return ModelEndpoint.objects.filter(answers_drafts=True, archived_at__isnull=True).order_by("name", "pk")


def model_draft_record(*, pair: Pair, user, draft_id: int | None, on: dict) -> None:
    """On submit (annotator.picking.editor.editor_submit, before the pair is saved): the draft this pair came from, and
    what the person changed of it. `on`: the item the draft must have been asked on ({"video": v} or {"candidate":
    c}). A new version of a drafted pair sent without a draft keeps its draft, measured against the new texts."""
    if draft_id is not None:
        draft = ModelDraft.objects.filter(pk=draft_id, **on).first()
        if draft is None or draft.author_id != user.pk or draft.failure:
            raise Invalid(
                {"model_draft": [f"Draft {draft_id} is not a draft of yours on these images: discard it and submit."]}
            )
        pair.drafted_by = draft
    draft = pair.drafted_by
    if draft is None:
        return
    submitted = {
        "question": pair.question,
        "answer": pair.answer,
        "distractors": list(pair.distractors),
        "answer_frame": pair_answer_frame(pair),
    }
    pair.draft_changes = draft_changes(category=pair.category, drafted=draft.texts, submitted=submitted)


def pair_answer_frame(pair: Pair) -> str:
    """Binary categories: the annotator's frame (a or b) that holds the answer, undoing the app's ordering."""
    if pair.answer not in (FIRST_IMAGE, SECOND_IMAGE):
        return ""
    answer_is_image_1 = pair.answer == FIRST_IMAGE
    return "b" if answer_is_image_1 == pair.swapped else "a"


def change_rows(changes: dict) -> list[dict]:
    """The pair's record for the pages: question, answer and distractors in that order, then the category if it
    changed after the draft; each with its change and both texts."""
    rows = []
    for name in (*FIELDS, "category"):
        entry = changes.get(name)
        if entry:
            rows.append(
                {
                    "field": name,
                    "change": entry.get("change", ""),
                    **{k: entry.get(k) for k in ("drafted", "submitted")},
                }
            )
    return rows


def workbench_drafting() -> dict:
    """What the workbench's drafting module needs (static/js/drafting.js): the drafters, the default first, and how
    many models answer in the background. Never a key or an address."""
    return {
        "drafters": [{"id": pk, "name": name} for pk, name in drafters().values_list("pk", "name")],
        "background": background_answerers().count(),
        # The browser gives up a little after the server's own deadline on the model.
        "deadline_ms": (settings.MODEL_DRAFT_TIMEOUT_SECONDS + 10) * 1000,
    }
