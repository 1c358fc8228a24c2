"""Pair picking services: video leases, drafts, submitting pairs from frames, review decisions, the overview.

The HTML views, the API and the demo data all call these functions.
"""

from __future__ import annotations

import mimetypes

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, TruncHour
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
from annotator.conversations.services import comment_rejection
from annotator.models import (
    Category,
    DoubleReview,
    Frame,
    Pair,
    PairCandidate,
    PairDraft,
    Review,
    Video,
    VideoHandover,
    VideoSkip,
)
from annotator.models.picking import next_draft_version
from annotator.models.videos import PICKED_INDEX_BASE
from annotator.picking.editor import EditorSource, Side, editor_submit
from annotator.picking.guidelines import guideline_citable
from annotator.picking.questions import FIRST, SECOND, question_validate
from annotator.regions import regions_check, regions_required_check
from subtlebench.errors import Conflict, Forbidden, Invalid
from subtlebench.roles import COORDINATOR, has_role

# --- The video queue ------------------------------------------------------------------------------------------
# Videos are one kind of work item (annotator/authoring/work.py): one per annotator at a time, expiry in every query.


def by_fewest_accepted_pairs(videos):
    accepted = (
        Pair.objects.filter(video=OuterRef("pk"), status=Pair.Status.ACCEPTED)
        .order_by()
        .values("video")
        .annotate(n=Count("id"))
        .values("n")
    )
    return videos.annotate(accepted_pairs=Coalesce(Subquery(accepted, output_field=IntegerField()), Value(0))).order_by(
        "accepted_pairs", "id"
    )


class VideoWork(WorkKind):
    """Sampled videos, to pick pairs of frames from."""

    model = Video
    noun = "video"
    finish_hint = "release it or finish it first"
    skip_model, skip_field = VideoSkip, "video"
    skip_reasons, skip_for_everyone = VideoSkip.Reason, VideoSkip.FOR_EVERYONE
    draft_field = "video"

    def label(self, item) -> str:
        return f"video {item.yt8m_id}"

    def in_queue(self, user):
        """Sampled videos, not archived, not assigned to someone else. An archived video's holder may finish it (their
        lease stands); nobody takes it anew."""
        sampled = Video.objects.filter(status=Video.Status.SAMPLED, archived_at__isnull=True)
        return sampled.filter(Q(assigned_to__isnull=True) | Q(assigned_to=user))

    def queues(self, items, user):
        """Assigned to the user; no accepted pair yet; the rest. The second one is the common case and avoids
        counting pairs for every video (an anti-join instead)."""
        without_accepted = ~Exists(Pair.objects.filter(video=OuterRef("pk"), status=Pair.Status.ACCEPTED))
        return [
            by_fewest_accepted_pairs(items.filter(assigned_to=user)),
            items.filter(assigned_to__isnull=True).filter(without_accepted).order_by("id"),
            by_fewest_accepted_pairs(items.filter(assigned_to__isnull=True)),
        ]

    def refusal(self, item, user) -> str:
        if item.status != Video.Status.SAMPLED:
            return f"Video {item.yt8m_id} is {item.status}, not sampled: it has no frames to pick from."
        if item.assigned_to_id not in (None, user.pk):
            return (
                f"Video {item.yt8m_id} is assigned to another annotator. "
                "Your draft is saved; ask for work to get a video."
            )
        return ""

    def unready(self, item) -> str:
        """Storage must still have every frame file (one listing per folder). A video that lost some is marked
        missing, so no query offers it again, until import_videos or `manage.py repair` samples it again."""
        missing = item.missing_files()
        if not missing:
            return ""
        item.mark_missing(missing)
        return (
            f"Video {item.yt8m_id} has lost frame files from storage: it is out of the queue until it is sampled again."
        )


VIDEOS = VideoWork()


def videos_open_to(user, now=None):
    """Sampled videos this user may lease now: not held by anyone, not assigned to someone else, not skipped."""
    return work_open_to(VIDEOS, user, now)


def video_lease_next(*, user) -> Video | None:
    """Lease one video to the user (the one they hold, if any): the one whose lease they let run out, then those
    assigned to them, then those with the fewest accepted pairs; None when no video is left for them."""
    return work_take_next(VIDEOS, user=user)


def video_heartbeat(*, video: Video, user) -> Video:
    """Extend the user's lease; take the video (back) if it is free and the user holds no other video.
    LeaseReassigned when a coordinator gave it to someone else while this user held it."""
    try:
        return work_heartbeat(VIDEOS, item=video, user=user)
    except Conflict:
        video.refresh_from_db()
        reason = video_reassigned_from(video, user)
        if reason:
            raise LeaseReassigned(reason) from None
        raise


def video_release(
    *, video: Video, user, reason: str | None = VideoSkip.Reason.DONE, note: str = ""
) -> VideoSkip | None:
    """Give the video back with a reason; the user is not offered it again (nobody is if it is bad). Only the lease
    holder or a coordinator may. With reason None the lease just ends and the video stays in the user's queue."""
    if reason is None:
        work_release(VIDEOS, item=video, user=user)
        return None
    return work_skip(VIDEOS, item=video, user=user, reason=reason, note=note)


def video_skip_undo(*, skip_id: int, user) -> Video:
    """Take back a skip (or a "done"): the video is offered to its skipper again."""
    return work_skip_undo(VIDEOS, skip_id=skip_id, user=user)


class LeaseReassigned(Conflict):
    """A coordinator gave the video this user held to someone else: their page shows it and stops saving."""

    @property
    def errors(self) -> dict[str, list[str]]:
        return {"lease": ["reassigned"]}


class ReassignUnconfirmed(Conflict):
    """The video is held by someone else: the coordinator confirms first (`confirmed=True`)."""


def _age(moment, now) -> str:
    minutes = max(0, int((now - moment).total_seconds() // 60))
    if minutes < 1:
        return "less than a minute"
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def video_reassign_question(video: Video, user, now=None) -> str:
    """What the coordinator confirms before giving a video someone holds to `user`: the holder and the age of their
    draft. '' when nobody else holds it (nothing to ask)."""
    now = now or timezone.now()
    holder = video.holder_now(now)
    if holder is None or (user is not None and holder.pk == user.pk) or user is None:
        return ""
    draft = PairDraft.objects.filter(video=video, author=holder).first()
    saved = f"their draft was saved {_age(draft.updated, now)} ago" if draft else "they have no saved draft"
    return (
        f"{holder.username} holds video {video.yt8m_id} (for {_age(video.lease_since or now, now)}); {saved}. "
        f"Reassigning ends their lease at once: their page says so and stops saving, and their draft goes with the "
        f"video to {user.username}."
    )


def video_assign(*, video: Video, user, by, confirmed: bool = True) -> Video:
    """A coordinator gives a video to one annotator: only they are offered it, before anything else.

    Someone else's lease on it ends, once the coordinator confirmed: a page or API call passes `confirmed` as the
    person said it (False until they did: ReassignUnconfirmed then, naming the holder and the age of their draft);
    a caller with a confirmation of its own (the data manager's bulk action) leaves the default. The holder's next
    heartbeat or save answers LeaseReassigned, and their draft is copied to the new assignee, who opens it (unless
    they have a draft of their own there). The annotator keeps the video they hold now, if any: the assigned one is
    what they get when they next ask for work.
    """
    with transaction.atomic():
        locked = Video.objects.select_for_update().get(pk=video.pk)
        now = timezone.now()
        question = video_reassign_question(locked, user, now)
        if question and not confirmed:
            raise ReassignUnconfirmed(f"Confirm first: {question}")
        holder = locked.holder_now(now)
        locked.assigned_to = user
        locked.assigned_at = now if user is not None else None
        locked.save(update_fields=["assigned_to", "assigned_at", "updated"])
        if user is not None and locked.lease_holder_id != user.pk:
            if holder is not None:
                _video_hand_over(locked, holder=holder, to=user, by=by, now=now)
            work_end_lease(VIDEOS, item=locked)
        return locked


def _video_hand_over(video: Video, *, holder, to, by, now) -> VideoHandover:
    draft = PairDraft.objects.filter(video=video, author=holder).first()
    if draft is not None and draft.state and not PairDraft.objects.filter(video=video, author=to).exists():
        PairDraft.objects.create(video=video, author=to, state=draft.state, version=next_draft_version(0))
    return VideoHandover.objects.create(
        video=video, from_user=holder, to_user=to, by=by, draft_saved=draft.updated if draft else None, created=now
    )


def video_reassigned_from(video: Video, user) -> str:
    """Why this user's work on the video stopped, if a coordinator gave it to someone else while they held it and
    it is not theirs again since; ''."""
    if video.assigned_to_id in (None, user.pk) or video.is_held_by(user):
        return ""
    handover = VideoHandover.objects.filter(video=video).select_related("to_user", "by").first()
    if handover is None or handover.from_user_id != user.pk:
        return ""
    by = handover.by.username if handover.by else "a coordinator"
    to = handover.to_user.username if handover.to_user else "someone else"
    return (
        f"{by} gave video {video.yt8m_id} to {to} at {timezone.localtime(handover.created):%H:%M}: your lease is gone "
        f"and this page no longer saves. Your draft went with the video to {to}."
    )


def video_draft_check(*, video: Video, user) -> None:
    """A draft save of a video given away from this user is refused (the page stops saving)."""
    reason = video_reassigned_from(video, user)
    if reason:
        raise LeaseReassigned(reason)


# --- Submitting -----------------------------------------------------------------------------------------------


def video_frame_pair(video: Video, index_a, index_b) -> tuple[Frame, Frame]:
    """Frames A and B of the video by their indexes: two different frames it has."""
    try:
        index_a, index_b = int(index_a), int(index_b)
    except (TypeError, ValueError):
        raise Invalid({"frames": ["Pick frame A and frame B (keys a and b)."]})
    if index_a == index_b:
        raise Invalid({"frames": [f"Frames A and B are the same frame (#{index_a}): pick two frames."]})
    found = {
        f.index: f for f in Frame.objects.filter(video=video, index__in=(index_a, index_b)).select_related("image")
    }
    missing = [str(i) for i in (index_a, index_b) if i not in found]
    if missing:
        raise Invalid({"frames": [f"Video {video.yt8m_id} has no frame #{', #'.join(missing)}."]})
    return found[index_a], found[index_b]


class VideoSource(EditorSource):
    """A video in the pair editor: frames A and B are two of its sampled frames, by index; its pairs' source is
    yt8m, their source id the video and the two frames' indexes."""

    work = VIDEOS

    def page(self) -> dict:
        video = self.item
        return {
            "title": video.yt8m_id,
            "subtitle": video.title,
            "domain": video.domain,
            "note": "",
            "noun": "video",
            "leave": "Done with video",
            "leave_title": "Give the video back: you are done with it",
            "pairs_heading": "Pairs on this video",
            "strip": True,
        }

    def frames(self) -> list[dict]:
        # One query whatever the number of frames; picked frames (taken at any time from the source) in time order
        # among the sampled ones.
        rows = []
        for index, timestamp, pts, picked, image_id, file, thumb in (
            Frame.objects.filter(video=self.item)
            .order_by("timestamp", "index")
            .values_list("index", "timestamp", "pts", "picked", "image_id", "image__file", "image__thumbnail")
        ):
            row = {"i": index, "t": round(timestamp, 3), "im": image_id, "src": _url(file), "th": _url(thumb or file)}
            if picked:
                row["picked"], row["pts"] = True, pts
            rows.append(row)
        return rows

    def urls(self) -> dict:
        base = f"/api/videos/{self.item.pk}"
        return {
            "draft": f"{base}/draft/",
            "beacon": reverse("picking-draft-beacon", args=[self.item.pk]),
            "heartbeat": f"{base}/heartbeat/",
            "release": f"{base}/release/",
            "submit": "/api/pairs/submit/",
            "suggestions": f"{base}/suggestions/?limit=20",
            "model_draft": f"{base}/model-draft/",
            "model_answers": f"{base}/model-draft/answers/",
            "done": "/work/",
        }

    def options(self) -> dict:
        video = self.item
        # The timeline of the whole source video (static/js/timeline.js): play, scrub, take any frame as A or B.
        timeline = None
        if video.source and video.duration:
            timeline = {
                "duration": video.duration,
                "fps": video.fps or 25.0,
                "type": mimetypes.guess_type(video.source)[0] or "video/mp4",
                "source": reverse("picking-video-source", args=[video.pk]),
                "frame_at": reverse("picking-frame-at", args=[video.pk]),
                "pick": reverse("picking-frame-pick", args=[video.pk]),
            }
        return {**super().options(), "submit": {"video": video.pk}, "timeline": timeline}

    def made_pairs(self):
        return Pair.objects.filter(video=self.item)

    def sides(self, index_a, index_b) -> tuple[Side, Side]:
        frames = video_frame_pair(self.item, index_a, index_b)
        return tuple(Side(frame.index, frame.timestamp, frame.image) for frame in frames)

    def describe(self, side_a: Side, side_b: Side) -> str:
        return f"frames {_frame_name(side_a)} and {_frame_name(side_b)}"

    def check_pair(self, pair: Pair, item) -> None:
        if pair.video_id != self.item.pk:
            raise Invalid({"pair": [f"Pair {pair.pk} belongs to another video: edit it on its own workbench."]})

    def identify(self, pair: Pair, item, first: Side, second: Side) -> list[str]:
        video = self.item
        pair.video, pair.domain, pair.source = video, video.domain, "yt8m"
        source_ids = [f"{video.yt8m_id}_{x.index}_{y.index}" for x, y in ((first, second), (second, first))]
        pair.source_id = source_ids[0]
        return source_ids


def _url(name: str) -> str:
    return default_storage.url(name) if name else ""


def _frame_name(side: Side) -> str:
    """A sampled frame by its index, a picked one by its time (its index says nothing to a person)."""
    return f"at {side.timestamp:.3f} s" if side.index >= PICKED_INDEX_BASE else f"#{side.index}"


def pair_submit(*, user, video: Video, **fields) -> tuple[Pair, bool]:
    """Submit a pair of two frames of a video (or a new version of one's own pair of it): `editor_submit`."""
    return editor_submit(VideoSource(video), user=user, **fields)


# --- Review ---------------------------------------------------------------------------------------------------


def pair_review(
    *,
    pair: Pair,
    reviewer,
    decision: str,
    version,
    reason: str = "",
    corrections: dict | None = None,
    guideline_version: int | None = None,
) -> Review:
    """Accept, reject (with a reason: the pair goes back to its author) or correct-and-accept a submitted pair. A
    rejection may cite a guideline (`guideline_version`, the id of one of the pair's category's versions)."""
    if decision not in Review.Decision.values or decision == Review.Decision.REOPEN:
        raise Invalid({"decision": [f"Unknown decision {decision!r}: accept, reject or correct."]})
    reason = (reason or "").strip()
    with transaction.atomic():
        locked = Pair.objects.select_for_update().get(pk=pair.pk)
        if locked.author_id == reviewer.pk:
            raise Forbidden("You cannot review your own pair.")
        if locked.status != Pair.Status.SUBMITTED:
            blind = DoubleReview.objects.waiting_for(reviewer).filter(pair=locked).first()
            if blind is not None:  # say nothing of the first decision: this reviewer's second review is blind
                raise Conflict(
                    f"Pair {locked.pk} was decided already; it waits for your blind second review at "
                    f"/review/second/{blind.pk}/."
                )
            last = locked.reviews.select_related("reviewer").first()
            by = f" by {last.reviewer.username}" if last else ""
            raise Conflict(f"Pair {locked.pk} is {locked.status} already{by}.")
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise Invalid({"version": ["Send the version of the pair you reviewed."]})
        if version != locked.version:
            raise Conflict(
                f"The author changed pair {locked.pk} while you were reviewing it (now version {locked.version}, "
                f"you saw version {version}). Reload to review the current version."
            )
        changes: dict = {}
        cited = None
        if decision == Review.Decision.REJECT:
            if not reason:
                raise Invalid({"reason": ["Say why the pair is rejected: the author reads it."]})
            cited = guideline_citable(pair=locked, version_id=guideline_version)
            locked.status = Pair.Status.REJECTED
            comment_rejection(item=locked, reviewer=reviewer, reason=reason)
        else:
            if decision == Review.Decision.CORRECT:
                changes = _corrections(locked, corrections or {})
            problem = locked.similarity_problem()
            if problem:
                raise Invalid(problem)
            if changes:
                locked.version += 1
            locked.status = Pair.Status.ACCEPTED
        locked.decided_at = timezone.now()
        locked.save()
        return Review.objects.create(
            pair=locked,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            changes=changes,
            guideline_version=cited,
            created=timezone.now(),
        )


def pair_later_image(pair: Pair) -> str:
    """FIRST or SECOND: which image of a pair of video frames was taken later, or '' when the frames do not say
    (an imported pair, or two frames at one time). A temporal pair's answer follows from it."""
    frames = {f.image_id: f.timestamp for f in Frame.objects.filter(image__in=(pair.image_1_id, pair.image_2_id))}
    first, second = frames.get(pair.image_1_id), frames.get(pair.image_2_id)
    if first is None or second is None or first == second:
        return ""
    return SECOND if second > first else FIRST


def pair_reopen(*, pair: Pair, by, reason: str) -> Review:
    """Take back the decision on an accepted or rejected pair: it goes back to the review queue as it is.

    Back to the queue rather than to the author: the decision is what is in doubt, not the author's work (a
    rejected pair the author should change stays theirs to fix: it is already returned to them). The reviewer who
    made the decision or a coordinator may, with a reason; the history keeps a `reopen` review row (who, when,
    why) after the decision it takes back.
    """
    reason = (reason or "").strip()
    if not reason:
        raise Invalid({"reason": ["Say why the decision is reopened: it stays in the pair's history."]})
    with transaction.atomic():
        locked = Pair.objects.select_for_update().get(pk=pair.pk)
        if locked.status not in (Pair.Status.ACCEPTED, Pair.Status.REJECTED):
            raise Conflict(f"Pair {locked.pk} is {locked.status}: only an accepted or rejected pair can be reopened.")
        decision = locked.reviews.exclude(decision=Review.Decision.REOPEN).select_related("reviewer").first()
        if not has_role(by, COORDINATOR) and (decision is None or decision.reviewer_id != by.pk):
            who = f" by {decision.reviewer.username}" if decision else ""
            raise Forbidden(
                f"Pair {locked.pk} was decided{who}: only that reviewer or a coordinator can reopen the decision."
            )
        if locked.author_id == by.pk and not has_role(by, COORDINATOR):
            raise Forbidden("You cannot reopen the decision on your own pair.")
        locked.status = Pair.Status.SUBMITTED
        locked.decided_at = None
        locked.save(update_fields=["status", "decided_at", "updated"])
        return Review.objects.create(
            pair=locked, reviewer=by, decision=Review.Decision.REOPEN, reason=reason, created=timezone.now()
        )


def pair_withdraw(*, pair: Pair, user) -> Pair:
    """The author takes back a submitted pair nobody has decided yet. The record stays (withdrawn: never reviewed,
    exported or sampled); its frames are free for another pair of the category."""
    with transaction.atomic():
        locked = Pair.objects.select_for_update().get(pk=pair.pk)
        if locked.author_id != user.pk:
            raise Forbidden(f"Pair {locked.pk} is not one of your pairs: only its author can withdraw it.")
        if locked.status != Pair.Status.SUBMITTED:
            raise Conflict(
                f"Pair {locked.pk} is {locked.status}: only a submitted pair waiting for review can be withdrawn."
            )
        locked.status = Pair.Status.WITHDRAWN
        locked.decided_at = timezone.now()
        locked.save(update_fields=["status", "decided_at", "updated"])
        return locked


def _corrections(pair: Pair, corrections: dict) -> dict:
    """What the editor can change, with the editor's rules: the category, question, answer and distractors (for a
    first/second-image category the answer says which image; a temporal one follows from the timestamps), and the
    difference regions (on images 1 and 2, checked against their sizes)."""
    category = corrections.get("category") or pair.category
    proposed = {
        "question": corrections.get("question", pair.question),
        "answer": corrections.get("answer", pair.answer),
        "distractors": corrections.get("distractors", pair.distractors),
    }
    if category == Category.TEMPORAL and pair_later_image(pair):
        later = pair_later_image(pair)
        proposed.update(answer=later, distractors=[SECOND if later == FIRST else FIRST])
    question, answer, distractors = question_validate(category=category, **proposed)
    changes = {}
    if category != pair.category:
        changes["category"] = {"old": pair.category, "new": category}
        pair.category = category
    regions = pair.regions
    if "regions" in corrections:
        regions = regions_check(corrections["regions"], image_1=pair.image_1, image_2=pair.image_2)
    regions_required_check(category=category, regions=regions)
    fields = (("question", question), ("answer", answer), ("distractors", distractors), ("regions", regions))
    for name, new in fields:
        old = getattr(pair, name)
        if old != new:
            changes[name] = {"old": old, "new": new}
            setattr(pair, name, new)
    if not changes:
        raise Invalid({"corrections": ["Nothing was corrected: accept the pair instead."]})
    return changes


# --- Overview -------------------------------------------------------------------------------------------------


def model_success_by_category() -> dict[str, dict]:
    """How often models already get each category's pairs in the benchmark right: over each model's latest answer
    per pair (failed requests not counted), `correct` of `answers`, on `pairs` pairs, `unsolved` of them no model got
    right. Where models already succeed, new pairs add little to the benchmark."""
    figures = {c: {"answers": 0, "correct": 0, "pairs": 0, "unsolved": 0, "accuracy": None} for c in Category.values}
    # Only pairs with a scored answer at all (a hashed semi-join): the others have no answer to count, and the
    # per-pair subqueries of `with_model_score` run on the answered pairs only.
    results = Pair._meta.get_field("model_results").related_model.objects.filter(is_correct__isnull=False)
    answered = Pair.objects.in_benchmark().filter(pk__in=results.values("pair"))
    scored = answered.with_model_score().filter(model_answered__gt=0).order_by()
    for category, correct, answered in scored.values_list("category", "model_correct", "model_answered"):
        cell = figures[category]
        cell["answers"] += answered
        cell["correct"] += correct
        cell["pairs"] += 1
        cell["unsolved"] += correct == 0
    for cell in figures.values():
        if cell["answers"]:
            cell["accuracy"] = round(100 * cell["correct"] / cell["answers"])
    return figures


def overview_figures() -> dict:
    """The coordinator's figures: per category against the target, category x domain, annotators, videos left.

    Every pair figure is of the benchmark's pairs: `in_benchmark` counts the pairs an export would contain (the
    target's progress and the grid), `held_back` the accepted ones it would not yet (similarity missing, stale or
    below the bar), and the rest are the benchmark's work in review. Experiments are counted apart (`experiments`),
    in full on their sweeps' pages."""
    target = settings.PAIRS_PER_CATEGORY_TARGET
    by_category = {c: {"in_benchmark": 0, "held_back": 0, "submitted": 0, "rejected": 0} for c in Category.values}
    cells: dict[tuple[str, str], int] = {}
    people: dict[int, dict] = {}
    # Every pair figure in one GROUP BY of the pairs past the draft and not withdrawn: per category, domain, status
    # and author, how many, how many of them are an experiment's and how many are in the benchmark (the same
    # definitions, as subqueries). The benchmark's work is each count less its experiments' pairs.
    apart = Q(pk__in=Pair.objects.experiments().values("pk"))
    counted = Q(status=Pair.Status.ACCEPTED, pk__in=Pair.objects.in_benchmark().values("pk"))
    experiments = 0
    accepted: dict[str, int] = dict.fromkeys(Category.values, 0)
    for category, domain, status, author, username, n, in_experiments, in_benchmark in (
        Pair.objects.exclude(status__in=(Pair.Status.DRAFT, Pair.Status.WITHDRAWN))
        .order_by()
        .values_list("category", "domain", "status", "author", "author__username")
        .annotate(n=Count("id"), in_experiments=Count("id", filter=apart), in_benchmark=Count("id", filter=counted))
    ):
        experiments += in_experiments
        if in_benchmark:
            by_category[category]["in_benchmark"] += in_benchmark
            cells[(category, domain)] = cells.get((category, domain), 0) + in_benchmark
        if status == Pair.Status.ACCEPTED:
            accepted[category] += n - in_experiments
        else:
            by_category[category][status] = by_category[category].get(status, 0) + n - in_experiments
        if author is not None and n > in_experiments:
            person = people.setdefault(
                author, {"username": username, "pairs": 0, "accepted": 0, "rejected": 0, "hours": 0}
            )
            person["pairs"] += n - in_experiments
    for category, n in accepted.items():
        by_category[category]["held_back"] = n - by_category[category]["in_benchmark"]
    benchmark = Pair.objects.outside_experiments()
    model_success = model_success_by_category()
    categories = [
        {
            "name": c,
            **counts,
            "target": target,
            "percent": min(100, round(100 * counts["in_benchmark"] / target)) if target else 100,
            "models": model_success[c],
        }
        for c, counts in by_category.items()
    ]
    domains = sorted({domain for _, domain in cells})
    grid = [{"category": c, "counts": [cells.get((c, d), 0) for d in domains]} for c in Category.values]

    for author, decision, n in (
        Review.objects.exclude(decision=Review.Decision.REOPEN)
        .exclude(pair__sweep_item__sweep__experiment=True)  # the benchmark's pairs (`outside_experiments`)
        .order_by()
        .values_list("pair__author", "decision")
        .annotate(n=Count("id"))
    ):
        if author in people:
            key = "rejected" if decision == Review.Decision.REJECT else "accepted"
            people[author][key] += n
    # Active hours: clock hours in which the annotator submitted at least one pair (one row per author and hour: a
    # hash of the pairs, no sort of them).
    for author, _ in (
        benchmark.filter(author__isnull=False, submitted_at__isnull=False)
        .exclude(status=Pair.Status.WITHDRAWN)
        .annotate(hour=TruncHour("submitted_at"))
        .order_by()
        .values_list("author", "hour")
        .distinct()
    ):
        if author in people:
            people[author]["hours"] += 1
    for person in people.values():
        decided = person["accepted"] + person["rejected"]
        person["acceptance"] = round(100 * person["accepted"] / decided) if decided else None
        person["per_hour"] = round(person["pairs"] / person["hours"], 1) if person["hours"] else None
    flagged = VideoSkip.objects.filter(video=OuterRef("pk"), reason__in=VideoSkip.FOR_EVERYONE)
    with_accepted = Pair.objects.filter(video=OuterRef("pk"), status=Pair.Status.ACCEPTED)
    sampled = Video.objects.filter(status=Video.Status.SAMPLED)
    videos = sampled.aggregate(
        sampled=Count("id"),
        untouched=Count("id", filter=~Q(Exists(with_accepted)) & ~Q(Exists(flagged))),
        flagged=Count("id", filter=Q(Exists(flagged))),
        leased=Count("id", filter=Video.objects.held_q()),
    )
    # Image collections (issue 27): the candidate pairs waiting for a question, beside the videos left.
    candidates = PairCandidate.objects.aggregate(
        open=Count("id", filter=Q(status=PairCandidate.Status.OPEN)),
        held=Count("id", filter=Q(status=PairCandidate.Status.OPEN) & PairCandidate.objects.held_q()),
        authored=Count("id", filter=Q(status=PairCandidate.Status.AUTHORED)),
    )
    return {
        "candidates": candidates,
        "categories": categories,
        "domains": domains,
        "grid": grid,
        "people": sorted(people.values(), key=lambda p: p["username"]),
        "videos": videos,
        "target": target,
        "totals": {
            key: sum(row[key] for row in categories) for key in ("in_benchmark", "held_back", "submitted", "rejected")
        },
        "experiments": experiments,
    }


def holdings(now=None) -> list[dict]:
    """Who holds what now: every held video and caption task (with since when) and every assigned video, by
    person. Two queries."""
    from annotator.models import CaptionTask

    now = now or timezone.now()
    people: dict[str, dict] = {}

    def person(username: str) -> dict:
        return people.setdefault(username, {"username": username, "leases": [], "assigned": []})

    videos = (
        Video.objects.filter(Video.objects.held_q(now) | Q(assigned_to__isnull=False))
        .select_related("lease_holder", "assigned_to")
        .order_by("yt8m_id")
    )
    for video in videos:
        if not video.is_free(now):
            since = video.lease_since or video.lease_heartbeat
            person(video.lease_holder.username)["leases"].append({"what": "video", "video": video, "since": since})
        if video.assigned_to_id:
            person(video.assigned_to.username)["assigned"].append({"video": video, "since": video.assigned_at})
    for task in CaptionTask.objects.held(now).select_related("lease_holder", "pair__video").order_by("pk"):
        since = task.lease_since or task.lease_heartbeat
        person(task.lease_holder.username)["leases"].append({"what": "caption", "task": task, "since": since})
    return sorted(people.values(), key=lambda p: p["username"])


# How many videos can be offered in the overview's assignment picker: a typed id beyond them still works.
ASSIGN_PICKER_LIMIT = 1000


def assignable_videos():
    """The videos the overview's picker offers to assign: sampled ones not flagged bad for everyone, by id."""
    flagged = VideoSkip.objects.filter(video=OuterRef("pk"), reason__in=VideoSkip.FOR_EVERYONE)
    return (
        Video.objects.filter(status=Video.Status.SAMPLED, archived_at__isnull=True)
        .exclude(Exists(flagged))
        .select_related("assigned_to")
        .order_by("yt8m_id", "pk")[:ASSIGN_PICKER_LIMIT]
    )


def holding_counts(people: list[dict]) -> dict:
    """The leases "who holds what" lists, counted by kind: the overview's "Held now" card is the same rows."""
    leases = [lease for p in people for lease in p["leases"]]
    videos = sum(1 for lease in leases if lease["what"] == "video")
    return {"all": len(leases), "videos": videos, "captions": len(leases) - videos}
