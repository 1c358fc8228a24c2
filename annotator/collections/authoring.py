"""The pair-authoring queue: candidate pairs (two images of a collection, or mined) leased one at a time, opened in
the comparison workbench, and authored into a Pair. The services the pages, the API and the tests call.

Candidates are one kind of work item (CANDIDATES, annotator/authoring/work.py: one per annotator, expiry in every
query); a draft is a PairDraft on the candidate; a skip is a CandidateSkip (undone from the work page). A candidate
plugs into the pair editor (annotator/picking/editor.py) as a `CandidateSource`: submitting makes a submitted Pair
with the candidate's domain, source, source_id and group_key and the regions drawn on it, and marks the candidate
authored.
"""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.urls import reverse
from django.utils import timezone

from annotator.authoring.work import (
    WorkKind,
    work_end_lease,
    work_heartbeat,
    work_open_to,
    work_release,
    work_skip,
    work_skip_undo,
    work_take_next,
)
from annotator.models import CandidateSkip, ImageEdit, Pair, PairCandidate, PairDraft
from annotator.picking.editor import EditorSource, Side, editor_submit
from annotator.regions import regions_as_frames
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
        """Open candidates, none of an archived collection (mined ones have no collection)."""
        return PairCandidate.objects.open().exclude(collection__archived_at__isnull=False)

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


class CandidateSource(EditorSource):
    """A candidate pair in the pair editor: frames A and B are its two images, 0 (image 1) and 1 (image 2), set from
    the start, with the candidate's own regions (its mask's) on them; one pair is authored of it. A change-detection
    pair's image 2 is the later one: it is the later frame of a temporal question."""

    work = CANDIDATES

    def _edit(self):
        """The model's edit this candidate was made of, or None."""
        return ImageEdit.objects.filter(candidate=self.item).first()

    def page(self) -> dict:
        candidate = self.item
        edit = self._edit()
        note = f"candidate pair · {candidate.get_origin_display()}"
        return {
            "title": candidate.title,
            "subtitle": str(candidate.collection or ""),
            "domain": candidate.domain,
            "note": f"{note} · asked: {edit.instruction}" if edit else note,
            "noun": "pair",
            "leave": "Leave",
            "leave_title": "Give the pair back to the queue, untouched",
            "pairs_heading": "Pair from this candidate",
            "strip": False,
        }

    def _sides(self) -> dict[int, Side]:
        candidate = self.item
        return {0: Side(0, 0.0, candidate.image_1), 1: Side(1, 1.0, candidate.image_2)}

    def frames(self) -> list[dict]:
        return [
            {
                "i": side.index,
                "t": side.timestamp,
                "im": side.image_id,
                "src": default_storage.url(side.image.file.name),
                "th": default_storage.url(side.image.thumbnail.name or side.image.file.name),
                "name": side.image.original_name,
            }
            for side in self._sides().values()
        ]

    def urls(self) -> dict:
        base = f"/api/candidates/{self.item.pk}"
        return {
            "draft": f"{base}/draft/",
            "beacon": reverse("candidate-draft-beacon", args=[self.item.pk]),
            "heartbeat": f"{base}/heartbeat/",
            "release": f"{base}/release/",
            "submit": f"{base}/submit/",
            "suggestions": "",
            "model_draft": f"{base}/model-draft/",
            "model_answers": f"{base}/model-draft/answers/",
            "done": "/work/",
        }

    def options(self) -> dict:
        start = {"a": 0, "b": 1, "cursor": 1, "category": self.item.category}
        start["regions"] = regions_as_frames(self.item.regions, swapped=False)  # image 1 is A, image 2 is B
        edit = self._edit()
        if edit is not None:  # a model's edit: the template's question and answer are the draft to start from
            start.update(question=edit.question, answer=edit.answer)
        return {"timed": False, "one_pair": True, "leave_reason": None, "start": start, "submit": {}}

    def made_pairs(self):
        return Pair.objects.filter(pk=self.item.pair_id) if self.item.pair_id else Pair.objects.none()

    def sides(self, index_a, index_b) -> tuple[Side, Side]:
        by_index = self._sides()
        try:
            side_a, side_b = by_index[int(index_a)], by_index[int(index_b)]
        except (KeyError, TypeError, ValueError):
            raise Invalid({"frames": ["A candidate pair has two images: A is 0, B is 1."]}) from None
        if side_a is side_b:
            raise Invalid({"frames": ["A and B are the same image: set A and B to the two images."]})
        return side_a, side_b

    def describe(self, side_a: Side, side_b: Side) -> str:
        return self.item.title

    def default_regions(self, side_a: Side, side_b: Side) -> list[dict]:
        # The candidate's regions are on its images 1 and 2 (sides 0 and 1): on whichever of A and B shows them.
        slot_of = {side_a.index: "a", side_b.index: "b"}
        return [
            {"frame": slot_of[region["image"] - 1], **{k: v for k, v in region.items() if k != "image"}}
            for region in self.item.regions
        ]

    def lock_for_edit(self) -> PairCandidate:
        return PairCandidate.objects.select_for_update().get(pk=self.item.pk)

    def check_pair(self, pair: Pair, item) -> None:
        if item.pair_id != pair.pk:
            raise Invalid({"pair": [f"Pair {pair.pk} was not authored from this candidate pair."]})

    def identify(self, pair: Pair, item, first: Side, second: Side) -> list[str]:
        pair.domain, pair.source = item.domain, item.source
        pair.source_id, pair.group_key = item.source_id, item.group_key
        # Two pairs of one category from one labelled pair are one item twice; a pair without an id is its own.
        return [item.source_id] if item.source_id else []

    def authored(self, pair: Pair, item, *, new: bool) -> None:
        if new:
            PairCandidate.objects.filter(pk=item.pk).update(
                status=PairCandidate.Status.AUTHORED, pair=pair, updated=timezone.now()
            )
            work_end_lease(CANDIDATES, item=item)


def candidate_submit(*, user, candidate: PairCandidate, index_a=0, index_b=1, **fields) -> tuple[Pair, bool]:
    """Author the candidate into a submitted Pair (or a new version of one's own pair from it): `editor_submit`. The
    pair takes the candidate's domain, source, source_id and group key; its regions are the ones sent (on A and B),
    or, left out, the candidate's own; the candidate is authored and its lease ends."""
    return editor_submit(CandidateSource(candidate), user=user, index_a=index_a, index_b=index_b, **fields)
