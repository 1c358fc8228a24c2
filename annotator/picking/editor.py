"""The pair editor: one editor that makes a pair of two images A and B, whatever work item they come from (a video's
frames, a candidate pair of an image collection). A kind of work item plugs in with an `EditorSource` (its images,
its addresses, the lease a submit takes, the fields its pairs get) and gets every tool of the editor: the viewer's
modes, difference regions with the required-region rule, the question rules, drafting with a model and the draft's
record, and the one submit (`editor_submit`). The item's life cycle (its lease, its draft, the client key of a submit)
is the work queue's (annotator/authoring), through the source's work kind.

The page: templates/picking/workbench.html with the editor's partial (templates/picking/_pair_editor.html) and its
scripts (static/js/workbench.js, regions.js, drafting.js), configured by `editor_config`.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from annotator.authoring.drafts import work_draft_delete, work_draft_of
from annotator.authoring.work import WorkKind, client_key_clean, work_claim, work_submitted
from annotator.models import Category, Image, Pair, Review
from annotator.picking.drafted import model_draft_record, pair_answer_frame, workbench_drafting
from annotator.picking.guidelines import guideline_in_force
from annotator.picking.questions import (
    CATEGORY_KEYS,
    FIRST,
    SECOND,
    TEMPLATES,
    answer_position_next,
    question_validate,
    template_table,
)
from annotator.regions import (
    categories_requiring_regions,
    regions_as_frames,
    regions_check,
    regions_from_frames,
    regions_required_check,
)
from annotator.similarity.services import pair_update_similarity
from annotator.stats.services import double_review_draw
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound

# One submit counts at most this much active time (a tab left open with a key held down is not hours of work).
MAX_ACTIVE_MS = 2 * 60 * 60 * 1000
KEY_OF_ANOTHER = "This client key belongs to another annotator's pair."


@dataclass(frozen=True)
class Side:
    """One image of the editor as frame A or B. `index` names it on the page (a video's frame index; a candidate
    pair's 0 for its image 1, 1 for its image 2); `timestamp` orders the two for a temporal question."""

    index: int
    timestamp: float
    image: Image

    @property
    def image_id(self) -> int:
        return self.image.pk


class EditorSource:
    """A kind of work item the pair editor makes pairs from, around one row (`item`): a Video (VideoSource,
    annotator/picking/services.py) or a PairCandidate (CandidateSource, annotator/collections/authoring.py).

    The editor asks it what differs between kinds and nothing else: the rules of a pair are the editor's, the life
    cycle of the item its work kind's (`work`: its lease, its draft).
    """

    work: WorkKind  # the item's kind in the work queue (annotator/authoring/work.py)

    def __init__(self, item):
        self.item = item

    @property
    def kind(self) -> str:
        """The item's name on drafts (`PairDraft`, `ModelDraft`: a field of that name) and in the page's script."""
        return self.work.draft_field

    @property
    def target(self) -> dict:
        """The item as the field of a PairDraft or a ModelDraft."""
        return {self.kind: self.item}

    # --- The page ---------------------------------------------------------------------------------------------

    def page(self) -> dict:
        """What the workbench page says of the item: title, subtitle, domain and note (the bar's texts), noun (the skip
        dialog's: "video", "pair"), leave and leave_title (the button that gives it back), pairs_heading (over the
        list of its pairs), strip (whether the strip of its frames shows: two images set as A and B from the start
        need none)."""
        raise NotImplementedError

    def frames(self) -> list[dict]:
        """The images on the page's strip, in order: {i: index, t: seconds, im: image id, src, th: its thumbnail,
        name: how the page names it (optional)}."""
        raise NotImplementedError

    def urls(self) -> dict:
        """The API addresses of the page's script: draft, beacon, heartbeat, release, submit, suggestions (or ""),
        model_draft, model_answers, done (where the page goes when the item is given back)."""
        raise NotImplementedError

    def options(self) -> dict:
        """How the page's script treats the item: `timed` (its frames have times: the gap between A and B shows),
        `one_pair` (one pair is made of it: the page is done after the first submit), `leave_reason` (the release's
        reason when the annotator leaves it: None keeps it in their queue), `start` (the editor's state before any
        draft), `submit` (fields every submit sends)."""
        return {"timed": True, "one_pair": False, "leave_reason": "done", "start": {}, "submit": {}}

    def made_pairs(self) -> QuerySet:
        """The pairs made of this item (any status but draft), for the page's list."""
        raise NotImplementedError

    # --- Submitting and drafting ------------------------------------------------------------------------------

    def sides(self, index_a, index_b) -> tuple[Side, Side]:
        """Frames A and B by their indexes; Invalid (under "frames") naming what is wrong."""
        raise NotImplementedError

    def describe(self, side_a: Side, side_b: Side) -> str:
        """How a message names the two images: "frames #3 and #7", "levir_cd/train_1"."""
        raise NotImplementedError

    def default_regions(self, side_a: Side, side_b: Side) -> list[dict]:
        """The regions on frames A and B of a submit that sends none (its `regions` left out): none, unless the item
        knows them (a collection's mask)."""
        return []

    def check_holds(self, user) -> None:
        """Conflict unless the user holds the item now: models are asked only for the item one works on."""
        if not self.work.model.objects.held_by(user).filter(pk=self.item.pk).exists():
            label = self.work.label(self.item)
            raise Conflict(f"You do not hold {label}: ask for work (or reload) before asking a model.")

    def lock_lease(self, user):
        """In the submit's transaction, for a new pair: lock the item and make sure the user holds its lease (taking
        it back if it is free); a conflict otherwise. Returns the locked item."""
        return work_claim(self.work, item=self.item, user=user)

    def lock_for_edit(self):
        """In the submit's transaction, for a new version of a pair: the item, locked if its fields are read."""
        return self.item

    def check_pair(self, pair: Pair, item) -> None:
        """Invalid unless `pair` (a new version of it is being submitted) was made of this item."""
        raise NotImplementedError

    def identify(self, pair: Pair, item, first: Side, second: Side) -> list[str]:
        """Give the pair the item's fields (video, domain, source, source_id, group key); returns the source ids that
        would make it a duplicate of another pair of its category and source (both orders of two frames)."""
        raise NotImplementedError

    def authored(self, pair: Pair, item, *, new: bool) -> None:
        """After the pair is saved: what the item records of it (a candidate pair is authored once, and its lease
        ends)."""


# --- The page -------------------------------------------------------------------------------------------------


def last_rejection():
    """The reason of the pair's last rejection, as a subquery (a returned pair shows why)."""
    return Subquery(
        Review.objects.filter(pair=OuterRef("pk"), decision=Review.Decision.REJECT)
        .order_by("-created", "-pk")
        .values("reason")[:1]
    )


def last_rejection_guideline():
    """The guideline version the pair's last rejection cites (its id), as a subquery; null when it cites none."""
    return Subquery(
        Review.objects.filter(pair=OuterRef("pk"), decision=Review.Decision.REJECT)
        .order_by("-created", "-pk")
        .values("guideline_version_id")[:1]
    )


def pair_rows(source: EditorSource, frames: list[dict], user) -> list[dict]:
    """The pairs made of the item, newest first, as the page's list shows them and an edit reopens them: on the
    annotator's frames A and B (undoing the app's ordering), with their regions there."""
    index_of = {frame["im"]: frame["i"] for frame in frames}
    rows = []
    pairs = (
        source.made_pairs()
        .exclude(status=Pair.Status.DRAFT)
        .select_related("author")
        .annotate(rejection=last_rejection(), rejection_guideline=last_rejection_guideline())
        .order_by("-created", "-pk")
    )
    for pair in pairs:
        mine = pair.author_id == user.pk
        index_1, index_2 = index_of.get(pair.image_1_id), index_of.get(pair.image_2_id)
        rows.append(
            {
                "id": pair.pk,
                "status": pair.status,
                "category": pair.category,
                "version": pair.version,
                "author": pair.author.username if pair.author else "",
                "mine": mine,
                "question": pair.question,
                "answer": pair.answer,
                "distractors": pair.distractors,
                "index_1": index_1,
                "index_2": index_2,
                "index_a": index_2 if pair.swapped else index_1,
                "index_b": index_1 if pair.swapped else index_2,
                "answer_frame": pair_answer_frame(pair),
                "regions": regions_as_frames(pair.regions, swapped=pair.swapped),
                "rejection": pair.rejection or "",
                "rejection_guideline": pair.rejection_guideline,  # the cited guideline version's id, or None
                "editable": mine and pair.status in (Pair.Status.SUBMITTED, Pair.Status.REJECTED),
                "withdrawable": mine and pair.status == Pair.Status.SUBMITTED,
                "drafted_by": pair.drafted_by_id,
            }
        )
    return rows


def editor_config(source: EditorSource, *, user, lease: dict, edit: str = "") -> dict:
    """The page's configuration (the `workbench-config` JSON its scripts read), the same for every source. `lease`:
    the lease's part (held, leased_to, held_elsewhere, skip_reasons), from the page's view."""
    frames = source.frames()
    draft = work_draft_of(source.work, item=source.item, user=user)
    options = source.options()
    page = source.page()
    return {
        "kind": source.kind,
        "item": {"id": source.item.pk, "title": page["title"], "domain": page["domain"]},
        "user": user.pk,  # names this browser's copy of the draft (static/js/workbench.js)
        "urls": source.urls(),
        "frames": frames,
        "pairs": pair_rows(source, frames, user),
        "draft": draft.state,
        "draft_version": draft.version,
        **options,
        "templates": template_table(),
        "categories": list(Category.values),
        "keys": CATEGORY_KEYS,
        "regions_required": categories_requiring_regions(),
        "drafting": workbench_drafting(),  # models that draft (annotator/drafting, static/js/drafting.js)
        **lease,
        "edit": edit,
    }


# --- Submitting -----------------------------------------------------------------------------------------------


def pair_images_order(category, side_a, side_b, answer_frame, question, answer, distractors):
    """Decide image 1 and image 2 and the final answer; returns (side_1, side_2, swapped, answer, distractors)."""
    if not TEMPLATES[category].binary:
        # Texts describe the second image relative to the first: A stays first.
        return side_a, side_b, False, answer, distractors
    if category == Category.TEMPORAL:
        if side_a.timestamp == side_b.timestamp:
            raise Invalid({"frames": ["Frames A and B have the same timestamp: no image was taken later."]})
        answer_frame = "a" if side_a.timestamp > side_b.timestamp else "b"
    if answer_frame not in ("a", "b"):
        raise Invalid({"answer": ["Say which frame is the answer: A or B."]})
    position = answer_position_next(category)
    correct, other = (side_a, side_b) if answer_frame == "a" else (side_b, side_a)
    first, second = (correct, other) if position == FIRST else (other, correct)
    return first, second, first is side_b, position, [SECOND if position == FIRST else FIRST]


def pair_check_changeable(pair: Pair | None, pair_id, user, version) -> Pair:
    """The locked pair, if this user may submit a new version of it: their own, not decided, as they saw it."""
    if pair is None:
        raise NotFound(f"Pair {pair_id} does not exist.")
    if pair.author_id != user.pk:
        raise Forbidden(f"Pair {pair_id} is not one of your pairs.")
    if pair.status not in (Pair.Status.SUBMITTED, Pair.Status.REJECTED):
        raise Conflict(f"Pair {pair.pk} is {pair.status} already and can no longer be changed.")
    if version is None or int(version) != pair.version:
        raise Conflict(
            f"Pair {pair.pk} changed since you opened it (now version {pair.version}, you edited version {version}). "
            "Reload the page to see the current version."
        )
    return pair


def editor_submit(
    source: EditorSource,
    *,
    user,
    index_a,
    index_b,
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
    regions: list | None = None,
    model_draft: int | None = None,
) -> tuple[Pair, bool]:
    """Submit a new pair of frames A and B of the item (or a new version of one's own submitted or rejected pair) for
    review; (pair, created).

    The same client key twice returns the first result: a double click or a retried request makes one pair.
    `active_ms`, the editor's active time on this version, is added to the pair's. `regions`: the difference boxes on
    the annotator's frames (`{"frame": "a" | "b", x, y, w, h}` in pixels of the frame), stored on images 1 and 2
    wherever the app put A and B; left out (None), the item's own (`EditorSource.default_regions`). A category that
    requires a region (the team's setting) is refused without one. `model_draft`: the model's draft the texts started
    from (annotator/drafting): the pair records it and what the person changed. The draft the submit came from is
    deleted (one another tab saved since, after `draft_version`, is that tab's work: it stays).
    """
    client_key = client_key_clean(client_key)
    earlier = work_submitted(Pair.objects, client_key=client_key, user=user, refusal=KEY_OF_ANOTHER)
    if earlier is not None:
        return earlier, False
    side_a, side_b = source.sides(index_a, index_b)
    if category not in Category.values:
        raise Invalid({"category": [f"Pick a category (keys 1-9, 0); {category!r} is not one."]})
    first, second, swapped, answer, distractors = pair_images_order(
        category, side_a, side_b, answer_frame, question, answer, list(distractors or [])
    )
    question, answer, distractors = question_validate(
        category=category, question=question, answer=answer, distractors=distractors
    )
    if regions is None:
        regions = source.default_regions(side_a, side_b)
    regions = regions_check(regions_from_frames(regions, swapped=swapped), image_1=first.image, image_2=second.image)
    regions_required_check(category=category, regions=regions)
    try:
        with transaction.atomic():
            # The locks serialise submits of one item (or one pair): a twin request with the same key that got here
            # first has committed by now, so look for its pair again before anything else.
            if pair_id is None:
                item = source.lock_lease(user)
            else:
                locked = Pair.objects.select_for_update().filter(pk=pair_id).first()
                item = source.lock_for_edit()
            replay = work_submitted(Pair.objects, client_key=client_key, user=user, refusal=KEY_OF_ANOTHER)
            if replay is not None:
                return replay, False
            if pair_id is None:
                pair = Pair(author=user, created=timezone.now())
            else:
                pair = pair_check_changeable(locked, pair_id, user, version)
                source.check_pair(pair, item)
            source_ids = source.identify(pair, item, first, second)
            duplicate = (
                Pair.objects.filter(category=category, source=pair.source, source_id__in=source_ids)
                .exclude(pk=pair.pk)
                .exclude(status=Pair.Status.WITHDRAWN)
                .first()
            )
            if duplicate is not None:
                raise Invalid(
                    {
                        "frames": [
                            f"A {category} pair of {source.describe(side_a, side_b)} already exists "
                            f"(pair {duplicate.pk}, {duplicate.status})."
                        ]
                    }
                )
            images_changed = (pair.image_1_id, pair.image_2_id) != (first.image_id, second.image_id)
            pair.image_1, pair.image_2 = first.image, second.image
            pair.category = category
            pair.question, pair.answer, pair.distractors = question, answer, distractors
            pair.swapped = swapped
            pair.regions = regions
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
            model_draft_record(pair=pair, user=user, draft_id=model_draft, on=source.target)
            # The guideline of its category and domain in force now, kept with this version of the pair.
            pair.guideline_version = guideline_in_force(category=category, domain=pair.domain)
            pair.save()
            double_review_draw(pair=pair)
            if pair.similarity is None:
                pair_update_similarity(pair=pair)
            source.authored(pair, item, new=pair_id is None)
            work_draft_delete(source.work, item=source.item, user=user, version=draft_version)
    except IntegrityError:
        # The same key raced in from a second request: the first one won, return its pair.
        existing = work_submitted(Pair.objects, client_key=client_key, user=user, refusal=KEY_OF_ANOTHER)
        if existing is None:
            raise Invalid(
                {"frames": [f"A {category} pair of {source.describe(side_a, side_b)} was just submitted."]}
            ) from None
        return existing, False
    return pair, pair_id is None
