"""Demo captions for `seed_demo`: one batch over the accepted pairs with captions in every state. Safe to re-run."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from annotator.captions import services as captions
from annotator.models import CaptionBatch, CaptionReview, Pair

DEMO_BATCH_TITLE = "Demo captions"

# The first accepted demo pairs are street scenes seen by a panning or advancing camera.
DEMO_TEXTS = [
    "The camera has moved to the right: the houses sit further left in the second image and a new one appears.",
    "The view has shifted right, so the house on the left edge is cut off and more of the street shows on the right.",
    "The second image is a little blurrier.",
    "The camera moved forward: the houses look larger and the pavement fills more of the second image.",
    "The scene is seen from a little further right in the second image; the left-most house left the frame.",
]


def seed_demo_captions(stdout=None) -> CaptionBatch | None:
    """A two-captions-per-item batch over up to six accepted pairs, leaving captions accepted (one chosen, one
    not), rejected, submitted and draft. Does nothing when the batch exists or there are no accepted pairs."""
    names = ("annotator1", "annotator2", "reviewer", "coordinator")
    users = {user.username: user for user in get_user_model().objects.filter(username__in=names)}
    writers = [users.get("annotator1"), users.get("annotator2")]
    reviewer = users.get("reviewer") or users.get("coordinator")
    pair_ids = list(Pair.objects.accepted().order_by("pk").values_list("pk", flat=True)[:6])
    if CaptionBatch.objects.filter(title=DEMO_BATCH_TITLE).exists() or not pair_ids or None in writers or not reviewer:
        return None
    coordinator = users.get("coordinator") or reviewer
    batch = captions.caption_batch_create(
        created_by=coordinator,
        title=DEMO_BATCH_TITLE,
        selection=CaptionBatch.Selection.LIST,
        pair_ids=pair_ids,
        captions_per_item=2,
        allow_own_pairs=True,
    )
    first, second = writers
    texts = iter(DEMO_TEXTS)
    # annotator1 and annotator2 caption the first pair; then each takes one more (annotator1's the second pair).
    written = []
    for writer in (first, second, first, second):
        task = captions.caption_task_lease(user=writer)
        if task is None:
            break
        written.append(captions.caption_submit(task_id=task.pk, user=writer, text=next(texts)))
    decisions = [CaptionReview.Decision.ACCEPT, CaptionReview.Decision.ACCEPT, CaptionReview.Decision.REJECT]
    for caption, decision in zip(written, decisions, strict=False):
        reason = "Says only that it is blurrier: name what is blurred." if decision == "reject" else ""
        captions.caption_review(caption_id=caption.pk, reviewer=reviewer, decision=decision, reason=reason)
    # The fourth stays submitted (awaiting review); annotator1 leaves a draft on the next task.
    task = captions.caption_task_lease(user=first)
    if task is not None:
        captions.caption_draft_save(task_id=task.pk, user=first, text=next(texts)[:40])
    if stdout is not None:
        stdout.write(f"Demo captions: batch {batch.pk} over {len(pair_ids)} pairs.")
    return batch
