"""The pair-authoring queue: candidate pairs (two images of a collection, or mined) leased one at a time, opened in
the comparison workbench, and authored into a Pair. The services the pages, the API and the tests call.

Candidates are one kind of work item (CANDIDATES, annotator/authoring/work.py: one per annotator, expiry in every
query); a draft is a PairDraft on the candidate; a skip is a CandidateSkip (undone from the work page). Submitting
makes a submitted Pair with the candidate's domain, source, source_id, group_key and regions, and marks the
candidate authored.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotator.authoring.work import (
    WorkKind,
    work_claim,
    work_end_lease,
    work_heartbeat,
    work_open_to,
    work_release,
    work_skip,
    work_skip_undo,
    work_take_next,
)
from annotator.models import CandidateSkip, Category, Image, Pair, PairCandidate, PairDraft
from annotator.picking.questions import question_validate
from annotator.picking.services import MAX_ACTIVE_MS, pair_check_changeable, pair_images_order
from annotator.regions import regions_swapped
from annotator.similarity.services import pair_update_similarity
from annotator.stats.services import double_review_draw
from subtlebench.errors import Invalid


class CandidateWork(WorkKind):
    """Open candidate pairs, oldest first, to author into pairs."""

    model = PairCandidate
    noun = "candidate pair"
    skip_model, skip_field = CandidateSkip, "candidate"
    skip_reasons, skip_for_everyone = CandidateSkip.Reason, CandidateSkip.FOR_EVERYONE
    draft_field = "candidate"

    def label(self, item) -> str:
        return f"candidate pair {item.title}"

    def in_queue(self, user):
        return PairCandidate.objects.open()

    def queues(self, items, user):
        return [items.order_by("created", "pk")]

    def refusal(self, item, user) -> str:
        if item.status != PairCandidate.Status.OPEN:
            return f"Candidate pair {item.title} is {item.status}: it is out of the queue."
        return ""


CANDIDATES = CandidateWork()


def candidates_open_to(user, now=None):
    """Open candidates this user may lease now: nobody holds them, and the user (or anyone, for bad images) did not
    skip them."""
    return work_open_to(CANDIDATES, user, now)


def candidate_counts(user) -> dict:
    """For the work page: how many candidates wait for this user, and how many wait in all."""
    return {"open_to_you": candidates_open_to(user).count(), "open": PairCandidate.objects.open().count()}


def candidate_work_context(user) -> dict:
    """The work page's part on candidate pairs (templates/collections/_work_candidates.html)."""
    drafts = PairDraft.objects.filter(author=user, candidate__isnull=False).select_related("candidate")
    skips = CandidateSkip.objects.filter(user=user).select_related("candidate")
    return {
        "candidate_held": PairCandidate.objects.held_by(user).first(),
        "candidate_counts": candidate_counts(user),
        "candidate_drafts": drafts.order_by("-updated", "-pk")[:20],
        "candidate_skips": skips.order_by("-created", "-pk")[:50],
    }


def candidate_lease_next(*, user) -> PairCandidate | None:
    """Lease the next candidate (oldest first), or the one the user holds; None when none is left for them."""
    return work_take_next(CANDIDATES, user=user)


def candidate_heartbeat(*, candidate: PairCandidate, user) -> PairCandidate:
    return work_heartbeat(CANDIDATES, item=candidate, user=user)


def candidate_release(
    *, candidate: PairCandidate, user, reason: str | None = None, note: str = ""
) -> CandidateSkip | None:
    """End the user's lease; with a reason, skip it too (the user is not offered it again; nobody is, for bad
    images). Only the holder or a coordinator may skip it."""
    if reason is None:
        work_release(CANDIDATES, item=candidate, user=user)
        return None
    return work_skip(CANDIDATES, item=candidate, user=user, reason=reason, note=note)


def candidate_skip_undo(*, skip_id: int, user) -> PairCandidate:
    """Take back a skip: the candidate is offered to its skipper (and everyone) again. The skipper or a coordinator."""
    return work_skip_undo(CANDIDATES, skip_id=skip_id, user=user)


# --- Submitting -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One image of the candidate as the workbench's frame A or B: index 0 is image 1, index 1 image 2. The
    'timestamp' orders them for a temporal question: a change-detection pair's B is the later image."""

    index: int
    timestamp: float
    image: Image

    @property
    def image_id(self) -> int:
        return self.image.pk


def sides(candidate: PairCandidate) -> dict[int, Side]:
    return {0: Side(0, 0.0, candidate.image_1), 1: Side(1, 1.0, candidate.image_2)}


def candidate_submit(
    *,
    user,
    candidate: PairCandidate,
    index_a=0,
    index_b=1,
    category: str,
    question: str,
    answer: str = "",
    distractors: list | None = None,
    answer_frame: str = "",
    client_key: str,
    pair_id: int | None = None,
    version: int | None = None,
    draft_version: int | None = None,
    active_ms: int | None = None,
) -> tuple[Pair, bool]:
    """Author the candidate into a submitted Pair (or a new version of one's own pair from it); (pair, created).

    The same client key twice returns the first result. The pair takes the candidate's domain, source, source_id,
    group key and regions (traded with the images when a first/second-image answer puts image 2 first); the
    candidate is authored and its lease ends.
    """
    client_key = str(client_key or "").strip()
    if not 8 <= len(client_key) <= 64:
        raise Invalid({"client_key": ["Send a client key of 8 to 64 characters with each submit."]})
    existing = Pair.objects.filter(client_key=client_key).first()
    if existing is not None:
        if existing.author_id != user.pk:
            raise Invalid({"client_key": ["This client key belongs to another annotator's pair."]})
        return existing, False
    by_index = sides(candidate)
    try:
        side_a, side_b = by_index[int(index_a)], by_index[int(index_b)]
    except (KeyError, TypeError, ValueError):
        raise Invalid({"frames": ["A candidate pair has two images: A is 0, B is 1."]}) from None
    if side_a is side_b:
        raise Invalid({"frames": ["A and B are the same image: set A and B to the two images."]})
    if category not in Category.values:
        raise Invalid({"category": [f"Pick a category (keys 1-9, 0); {category!r} is not one."]})
    first, second, swapped, answer, distractors = pair_images_order(
        category, side_a, side_b, answer_frame, question, answer, list(distractors or [])
    )
    question, answer, distractors = question_validate(
        category=category, question=question, answer=answer, distractors=distractors
    )
    # The regions follow the images: the candidate's image 1 may be the pair's image 2.
    regions = candidate.regions if first.index == 0 else regions_swapped(candidate.regions)
    try:
        with transaction.atomic():
            if pair_id is None:
                locked = work_claim(CANDIDATES, item=candidate, user=user)
            else:
                locked_pair = Pair.objects.select_for_update().filter(pk=pair_id).first()
                locked = PairCandidate.objects.select_for_update().get(pk=candidate.pk)
            replay = Pair.objects.filter(client_key=client_key).first()
            if replay is not None:
                if replay.author_id != user.pk:
                    raise Invalid({"client_key": ["This client key belongs to another annotator's pair."]})
                return replay, False
            if pair_id is None:
                pair = Pair(author=user, created=timezone.now())
            else:
                pair = pair_check_changeable(locked_pair, pair_id, user, version)
                if locked.pair_id != pair.pk:
                    raise Invalid({"pair": [f"Pair {pair.pk} was not authored from this candidate pair."]})
            duplicate = (
                Pair.objects.filter(category=category, source=locked.source, source_id=locked.source_id)
                .exclude(pk=pair.pk)
                .exclude(status=Pair.Status.WITHDRAWN)
                .first()
            )
            if duplicate is not None and locked.source_id:
                raise Invalid(
                    {"frames": [f"A {category} pair of {locked.title} already exists (pair {duplicate.pk})."]}
                )
            images_changed = (pair.image_1_id, pair.image_2_id) != (first.image_id, second.image_id)
            pair.image_1, pair.image_2 = first.image, second.image
            pair.category, pair.domain = category, locked.domain
            pair.source, pair.source_id, pair.group_key = locked.source, locked.source_id, locked.group_key
            pair.regions = regions
            pair.question, pair.answer, pair.distractors = question, answer, distractors
            pair.swapped = swapped
            pair.status = Pair.Status.SUBMITTED
            pair.submitted_at = timezone.now()
            pair.decided_at = None
            pair.client_key = client_key
            if images_changed:
                pair.similarity, pair.similarity_model = None, ""
            if pair.pk:
                pair.version += 1
            if active_ms is not None:
                pair.active_ms = (pair.active_ms or 0) + min(max(int(active_ms), 0), MAX_ACTIVE_MS)
            pair.save()
            double_review_draw(pair=pair)
            if pair.similarity is None:
                pair_update_similarity(pair=pair)
            if pair_id is None:
                PairCandidate.objects.filter(pk=locked.pk).update(
                    status=PairCandidate.Status.AUTHORED, pair=pair, updated=timezone.now()
                )
                work_end_lease(CANDIDATES, item=locked)
            drafts = PairDraft.objects.filter(author=user, candidate=locked)
            if draft_version is not None:
                drafts = drafts.filter(version=draft_version)
            drafts.delete()
    except IntegrityError:
        existing = Pair.objects.filter(client_key=client_key, author=user).first()
        if existing is None:
            raise Invalid({"frames": ["This candidate pair was just submitted."]})
        return existing, False
    return pair, pair_id is None
