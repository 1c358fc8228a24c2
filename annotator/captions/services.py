"""Difference captions: batches of accepted pairs to caption, leased caption tasks, drafts, submit, review,
the caption the export uses, and the quality signals (short, duplicate, near-duplicate) shown to coordinators.
"""

from __future__ import annotations

import math
import random
import re
import secrets

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotator.authoring.drafts import DraftChanged
from annotator.authoring.work import (
    WorkKind,
    work_claim,
    work_end_lease,
    work_open_to,
    work_release,
    work_skip,
    work_skip_undo,
    work_submitted,
    work_take_next,
)
from annotator.conversations.services import comment_rejection
from annotator.models import Caption, CaptionBatch, CaptionReview, CaptionSkip, CaptionTask, Pair
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound
from subtlebench.roles import COORDINATOR, has_role

MAX_CAPTIONS_PER_ITEM = 10
KEY_OF_ANOTHER = "This client key belongs to another caption."

GUIDELINES = (
    "Describe the second image relative to the first.",
    "Name the object and say how it changed (colour, position, state, number, ...).",
    "One to three sentences; only what you can see.",
)

WORD = re.compile(r"[^\W_]+")  # letters and digits, any script
# Words nearly every caption uses: leaving them out of the token sets keeps the near-duplicate candidate
# filter selective and the Jaccard score about the content.
STOPWORDS = frozenset(
    "a an and are as at be by first for from has have image images in is it its of on second than that the "
    "there this to was were with".split()
)


class CaptionConflict(Conflict):
    """The task or caption moved on: leased to someone else, already done or reviewed."""


# --- Text features and quality signals ---------------------------------------------------------------------


def caption_text_features(text: str, threshold: float | None = None) -> tuple[str, list[str], list[str]]:
    """(normalized text, sorted distinct content tokens, prefix tokens) of a caption.

    The prefix is the classic prefix filter for a Jaccard threshold t: two token sets with Jaccard >= t share at
    least one token among their first |x| - ceil(t|x|) + 1 tokens under one global order (here: alphabetical).
    A GIN index on the prefixes turns "who could be a near duplicate" into one indexed overlap query.
    """
    threshold = settings.CAPTION_NEAR_DUPLICATE_JACCARD if threshold is None else threshold
    words = WORD.findall(text.lower())
    # Tokens are stored in varchar(100) array elements; a longer "word" is noise, cut rather than refused.
    tokens = sorted({word[:100] for word in words if word not in STOPWORDS})
    keep = len(tokens) - math.ceil(threshold * len(tokens) - 1e-9) + 1 if tokens else 0
    return " ".join(words), tokens, tokens[:keep]


def jaccard(a: list[str] | set[str], b: list[str] | set[str]) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a or b else 1.0


def caption_quality_flags(caption: Caption) -> tuple[list[str], dict]:
    """The quality flags of a caption against every other written caption, and which caption each points to.

    Duplicates are exact (normalized) matches with a caption of a different pair, by anyone; near duplicates
    are another annotator's caption of a different pair with token Jaccard >= the threshold. The comparison is
    bounded: an indexed prefix overlap and a size window pick candidates, at most CAPTION_NEAR_DUPLICATE_SCAN
    of them (the most recent) are scored in Python.
    """
    flags: list[str] = []
    detail: dict = {}
    if len(caption.normalized.split()) < settings.CAPTION_SHORT_WORDS:
        flags.append(Caption.Flag.SHORT)
    others = Caption.objects.written().exclude(pk=caption.pk).exclude(pair_id=caption.pair_id)
    duplicate = others.filter(normalized=caption.normalized).order_by("pk").values_list("pk", flat=True).first()
    if caption.normalized and duplicate:
        flags.append(Caption.Flag.DUPLICATE)
        detail[Caption.Flag.DUPLICATE] = {"caption": duplicate}
        return flags, detail
    if not caption.prefix_tokens:
        return flags, detail
    threshold = settings.CAPTION_NEAR_DUPLICATE_JACCARD
    size = len(caption.tokens)
    candidates = (
        others.exclude(author_id=caption.author_id)
        .filter(
            prefix_tokens__overlap=caption.prefix_tokens,
            tokens__len__gte=math.ceil(threshold * size - 1e-9),
            tokens__len__lte=math.floor(size / threshold + 1e-9),
        )
        .order_by("-pk")
        .values_list("pk", "tokens")[: settings.CAPTION_NEAR_DUPLICATE_SCAN]
    )
    best = max(((jaccard(caption.tokens, tokens), pk) for pk, tokens in candidates), default=None)
    if best and best[0] >= threshold:
        flags.append(Caption.Flag.NEAR_DUPLICATE)
        detail[Caption.Flag.NEAR_DUPLICATE] = {"caption": best[1], "jaccard": round(best[0], 3)}
    return flags, detail


def _set_features(caption: Caption) -> None:
    caption.normalized, caption.tokens, caption.prefix_tokens = caption_text_features(caption.text)


# --- Batches -----------------------------------------------------------------------------------------------


def stratified_sample(ids_by_category: dict[str, list[int]], fraction: float, seed: int) -> list[int]:
    """A random `fraction` of each category's ids (at least one per non-empty category), reproducible by seed.

    Each category draws from its own generator seeded with (seed, category), so adding pairs of one category
    does not change the sample of another.
    """
    chosen: list[int] = []
    for category in sorted(ids_by_category):
        ids = sorted(ids_by_category[category])
        if not ids:
            continue
        count = min(len(ids), max(1, round(fraction * len(ids))))
        chosen.extend(sorted(random.Random(f"{seed}:{category}").sample(ids, count)))
    return chosen


def caption_pool():
    """The accepted pairs a batch of all or a sample draws from: the benchmark's, never an experiment's (a sweep kept
    apart is captioned only by naming its pairs)."""
    return Pair.objects.accepted().outside_experiments()


def caption_batch_create(
    *,
    created_by,
    title: str,
    selection: str,
    pair_ids: list[int] | None = None,
    fraction: float | None = None,
    seed: int | None = None,
    captions_per_item: int = 1,
    show_question: bool = False,
    allow_own_pairs: bool = False,
) -> CaptionBatch:
    """A caption batch over accepted pairs (all, a list, or a stratified sample) with its caption tasks. All and the
    sample are of the benchmark's accepted pairs (`caption_pool`); a list may name an experiment's too."""
    if not 1 <= captions_per_item <= MAX_CAPTIONS_PER_ITEM:
        raise Invalid({"captions_per_item": f"Captions per item must be between 1 and {MAX_CAPTIONS_PER_ITEM}."})
    accepted = Pair.objects.accepted()
    if selection == CaptionBatch.Selection.ALL:
        ids = list(caption_pool().order_by("pk").values_list("pk", flat=True))
        fraction = seed = None
    elif selection == CaptionBatch.Selection.LIST:
        wanted = sorted(set(pair_ids or []))
        if not wanted:
            raise Invalid({"pair_ids": "List at least one pair id."})
        ids = list(accepted.filter(pk__in=wanted).order_by("pk").values_list("pk", flat=True))
        missing = sorted(set(wanted) - set(ids))
        if missing:
            shown = ", ".join(map(str, missing[:20])) + (" ..." if len(missing) > 20 else "")
            raise Invalid({"pair_ids": f"Not accepted pairs (or no such pair): {shown}."})
        fraction = seed = None
    elif selection == CaptionBatch.Selection.SAMPLE:
        if fraction is None or not 0 < fraction <= 1:
            raise Invalid({"fraction": "The fraction must be above 0 and at most 1 (e.g. 0.1 for 10%)."})
        seed = secrets.randbelow(2**31) if seed is None else seed
        ids_by_category: dict[str, list[int]] = {}
        for pk, category in caption_pool().values_list("pk", "category"):
            ids_by_category.setdefault(category, []).append(pk)
        ids = stratified_sample(ids_by_category, fraction, seed)
    else:
        raise Invalid({"selection": f"Unknown selection {selection!r}: use all, list or sample."})
    if not ids:
        raise Invalid("There are no accepted pairs to caption yet.")
    with transaction.atomic():
        batch = CaptionBatch.objects.create(
            title=title.strip() or f"Captions {timezone.now():%Y-%m-%d %H:%M}",
            selection=selection,
            fraction=fraction,
            seed=seed,
            captions_per_item=captions_per_item,
            show_question=show_question,
            allow_own_pairs=allow_own_pairs,
            created_by=created_by,
        )
        CaptionTask.objects.bulk_create(
            CaptionTask(batch=batch, pair_id=pk, slot=slot) for pk in ids for slot in range(1, captions_per_item + 1)
        )
    return batch


# --- The caption queue -------------------------------------------------------------------------------------


class CaptionTaskWork(WorkKind):
    """Open caption tasks on accepted pairs, oldest first; a caption's draft is the caption row itself."""

    model = CaptionTask
    noun = "caption task"
    finish_hint = "submit or skip it first"
    conflict = CaptionConflict
    skip_model, skip_field = CaptionSkip, "task"
    skip_takes_the_lease = True  # a skip drops the draft: it is the holder's step, as a save is

    def in_queue(self, user):
        return CaptionTask.objects.to_caption_by(user)

    def refusal(self, item, user) -> str:
        if item.status != CaptionTask.Status.OPEN:
            return "This caption task is already done: take the next one from the queue."
        return ""


CAPTION_TASKS = CaptionTaskWork()


def caption_tasks_open_to(user, now=None):
    """Open tasks nobody holds, on pairs this user may caption and has not captioned or skipped."""
    return work_open_to(CAPTION_TASKS, user, now)


def caption_task_lease(*, user) -> CaptionTask | None:
    """The caption task this user holds (its lease renewed), else the next free one, else None."""
    return work_take_next(CAPTION_TASKS, user=user)


def caption_draft_of(task: CaptionTask, user) -> Caption | None:
    return Caption.objects.filter(task=task, author=user, status=Caption.Status.DRAFT).order_by("-pk").first()


@transaction.atomic
def caption_draft_save(*, task_id: int, user, text: str, version: int | None = None) -> Caption:
    """Autosave: store the draft text and renew the lease (the autosave doubles as the heartbeat).

    `version` is the draft version the text was based on (0: none yet): if another tab of this annotator saved
    since, nothing is written (`DraftChanged`, 409). Without one (an older client) the last save wins.
    """
    if len(text) > 4 * settings.CAPTION_MAX_CHARS:
        raise Invalid({"text": f"The draft is over {4 * settings.CAPTION_MAX_CHARS} characters long."})
    task = CaptionTask.objects.select_for_update().get(pk=task_id)  # also serialises two tabs' saves
    task = work_claim(CAPTION_TASKS, item=task, user=user)  # the lease renewed on it
    caption = caption_draft_of(task, user) or Caption(task=task, pair_id=task.pair_id, author=user)
    if version is not None and version != caption.draft_version:
        if caption.pk and caption.text == text:
            return caption  # the same text twice (a pagehide save after the reloaded page's): nothing to refuse
        raise DraftChanged(current=caption.draft_version, sent=version)
    caption.text = text
    caption.bump_draft_version()
    caption.save()
    return caption


@transaction.atomic
def caption_submit(*, task_id: int, user, text: str, client_key: str | None = None) -> Caption:
    """Submit the caption of a leased task; the same client key returns the first submission unchanged."""
    task = CaptionTask.objects.select_for_update().get(pk=task_id)
    # Checked after the task lock: a concurrent submit with the same key has committed by now.
    existing = work_submitted(Caption.objects, client_key=client_key, user=user, refusal=KEY_OF_ANOTHER)
    if existing is not None:
        if existing.task_id != task.pk:
            raise Invalid({"client_key": [KEY_OF_ANOTHER]})
        return existing
    now = timezone.now()
    task = work_claim(CAPTION_TASKS, item=task, user=user)
    problem = Caption.length_problem(text)
    if problem:
        raise Invalid({"text": problem})
    caption = caption_draft_of(task, user) or Caption(task=task, pair_id=task.pair_id, author=user)
    caption.text = text.strip()
    caption.status = Caption.Status.SUBMITTED
    caption.client_key = client_key or None
    caption.submitted_at = now
    _set_features(caption)
    caption.save()
    caption.flags, caption.flag_detail = caption_quality_flags(caption)
    caption.save(update_fields=["flags", "flag_detail"])
    task.status = CaptionTask.Status.DONE
    task.caption = caption
    task.save(update_fields=["status", "caption"])
    work_end_lease(CAPTION_TASKS, item=task)
    return caption


@transaction.atomic
def caption_task_skip(*, task_id: int, user, reason: str) -> CaptionSkip:
    """Pass on a task with a reason: the lease ends, the draft goes, the task is not offered to this user again."""
    task = CaptionTask.objects.get(pk=task_id)
    skip = work_skip(CAPTION_TASKS, item=task, user=user, reason=reason)
    Caption.objects.filter(task=task, author=user, status=Caption.Status.DRAFT).delete()
    return skip


@transaction.atomic
def caption_task_release(*, task_id: int, user, text: str | None = None) -> CaptionTask:
    """Stop for now: the lease ends and the task is open to anyone again. This user's draft is kept, with `text`
    (what the page holds, perhaps newer than its last autosave) when it is given and the task is still theirs.
    A task this user does not hold (another's, or given back already) is refused (Conflict) and left as it is."""
    task = CaptionTask.objects.select_for_update().get(pk=task_id)
    if text and task.status == CaptionTask.Status.OPEN and task.lease_holder_id == user.pk:
        caption_draft_save(task_id=task.pk, user=user, text=text)
    return work_release(CAPTION_TASKS, item=task, user=user)


def caption_skip_undo(*, skip_id: int, user) -> CaptionTask:
    """Take back a skip: the task is offered to its skipper again (if it is still open)."""
    return work_skip_undo(CAPTION_TASKS, skip_id=skip_id, user=user)


# --- Review and the exported caption -----------------------------------------------------------------------


def caption_next_for_review(reviewer) -> Caption | None:
    return (
        Caption.objects.reviewable_by(reviewer)
        .select_related("pair__image_1", "pair__image_2", "author")
        .order_by("submitted_at", "pk")
        .first()
    )


@transaction.atomic
def caption_review(*, caption_id: int, reviewer, decision: str, reason: str = "", text: str | None = None) -> Caption:
    """Accept, reject (with a reason) or edit and accept a submitted caption; never one's own.

    The first accepted caption of a pair becomes the chosen one (the export's `caption`); a rejection reopens
    the caption task so the slot gets another caption.
    """
    caption = Caption.objects.select_for_update().get(pk=caption_id)
    if caption.author_id == reviewer.pk:
        raise Forbidden("You cannot review your own caption.")
    if caption.status != Caption.Status.SUBMITTED:
        raise CaptionConflict(f"This caption was already reviewed: it is {caption.status}.")
    now = timezone.now()
    review = CaptionReview(caption=caption, reviewer=reviewer, decision=decision, reason=reason.strip())
    if decision == CaptionReview.Decision.REJECT:
        if not review.reason:
            raise Invalid({"reason": "Say why the caption is rejected, so its author can learn from it."})
        caption.status = Caption.Status.REJECTED
        comment_rejection(item=caption, reviewer=reviewer, reason=review.reason)
        if caption.task_id:
            CaptionTask.objects.filter(pk=caption.task_id, caption=caption).update(
                status=CaptionTask.Status.OPEN, caption=None
            )
    elif decision in (CaptionReview.Decision.ACCEPT, CaptionReview.Decision.EDIT):
        if decision == CaptionReview.Decision.EDIT:
            problem = Caption.length_problem(text or "")
            if problem:
                raise Invalid({"text": problem})
            review.original_text = caption.text
            caption.text = text.strip()
            # The flags stay those of the submitted text (they measure the annotator); the features follow the
            # new text so later captions are compared with what the export will hold.
            _set_features(caption)
        caption.status = Caption.Status.ACCEPTED
        # Lock the pair so two reviewers accepting captions of one pair at once choose exactly one.
        Pair.objects.select_for_update().filter(pk=caption.pair_id).first()
        caption.chosen = not Caption.objects.exported().filter(pair_id=caption.pair_id).exists()
    else:
        raise Invalid({"decision": f"Unknown decision {decision!r}: use accept, reject or edit."})
    caption.decided_at = now
    caption.save()
    review.save()
    return caption


@transaction.atomic
def caption_reopen(*, caption_id: int, by, reason: str) -> Caption:
    """Take back the decision on an accepted or rejected caption: it waits for review again, as it is.

    The reviewer who decided or a coordinator may, with a reason (kept as a `reopen` review row). An accepted
    caption the export used stops being the chosen one (another accepted caption of the pair takes its place, if
    any). A rejected caption reopened its task for another caption: it takes its slot back only if nobody has
    written one for it since; otherwise it is reopened without a slot and, if accepted, adds one caption.
    """
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": "Say why the decision is reopened: it stays in the caption's history."})
    caption = Caption.objects.select_for_update().filter(pk=caption_id).first()
    if caption is None:
        raise NotFound(f"Caption {caption_id} does not exist.")
    if caption.status not in (Caption.Status.ACCEPTED, Caption.Status.REJECTED):
        raise CaptionConflict(f"Caption {caption.pk} is {caption.status}: only a decided caption can be reopened.")
    decision = caption.reviews.exclude(decision=CaptionReview.Decision.REOPEN).select_related("reviewer").first()
    if not has_role(by, COORDINATOR) and (decision is None or decision.reviewer_id != by.pk):
        who = f" by {decision.reviewer.username}" if decision else ""
        raise Forbidden(
            f"Caption {caption.pk} was decided{who}: only that reviewer or a coordinator can reopen the decision."
        )
    Pair.objects.select_for_update().filter(pk=caption.pair_id).first()  # the chosen caption changes under it
    if caption.status == Caption.Status.REJECTED and caption.task_id:
        CaptionTask.objects.filter(pk=caption.task_id, status=CaptionTask.Status.OPEN, caption__isnull=True).free(
            timezone.now()
        ).update(status=CaptionTask.Status.DONE, caption=caption)
    was_chosen = caption.chosen
    caption.status, caption.chosen, caption.decided_at = Caption.Status.SUBMITTED, False, None
    caption.save()
    if was_chosen:
        other = Caption.objects.filter(pair_id=caption.pair_id, status=Caption.Status.ACCEPTED).order_by("pk").first()
        if other is not None:
            other.chosen = True
            other.save(update_fields=["chosen", "updated"])
    CaptionReview.objects.create(caption=caption, reviewer=by, decision=CaptionReview.Decision.REOPEN, reason=reason)
    return caption


@transaction.atomic
def caption_choose(*, caption_id: int, reviewer) -> Caption:
    """Make this accepted caption the one the export uses for its pair; the others stay stored."""
    caption = Caption.objects.select_related("pair").get(pk=caption_id)
    Pair.objects.select_for_update().filter(pk=caption.pair_id).first()
    caption.refresh_from_db()
    if caption.author_id == reviewer.pk:
        raise Forbidden("You cannot choose your own caption for the export.")
    if caption.status != Caption.Status.ACCEPTED:
        raise Invalid("Only an accepted caption can be the one the export uses.")
    # Unset the old choice first: the one-chosen-per-pair constraint is checked per statement.
    Caption.objects.filter(pair_id=caption.pair_id, chosen=True).exclude(pk=caption.pk).update(chosen=False)
    if not caption.chosen:
        caption.chosen = True
        caption.save(update_fields=["chosen", "updated"])
    return caption


# --- What the coordinator sees -----------------------------------------------------------------------------


def caption_annotator_stats() -> list[dict]:
    """Per annotator: written, accepted, rejected and awaiting captions, flag counts and the flag rate."""
    status = Caption.Status
    rows = (
        Caption.objects.written()
        .values("author__username")
        .annotate(
            written=Count("pk"),
            accepted=Count("pk", filter=Q(status=status.ACCEPTED)),
            rejected=Count("pk", filter=Q(status=status.REJECTED)),
            awaiting=Count("pk", filter=Q(status=status.SUBMITTED)),
            flagged=Count("pk", filter=~Q(flags=[])),
            short=Count("pk", filter=Q(flags__contains=[Caption.Flag.SHORT])),
            duplicate=Count("pk", filter=Q(flags__contains=[Caption.Flag.DUPLICATE])),
            near_duplicate=Count("pk", filter=Q(flags__contains=[Caption.Flag.NEAR_DUPLICATE])),
        )
        .order_by("author__username")
    )
    return [
        {**row, "username": row.pop("author__username"), "flag_rate": row["flagged"] / row["written"]} for row in rows
    ]
