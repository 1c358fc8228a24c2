"""Pages of pair picking and review: the work queue, the workbench, the review queue and page, the overview.

Changes go through the API (`api/picking.py`), which the pages' scripts call; these views only read, except
the two form posts (ask for work, assign a video).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.db.models import OuterRef, Subquery
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from annotator.authoring.drafts import work_draft_save
from annotator.models import (
    Category,
    DoubleReview,
    GuidelineVersion,
    Pair,
    PairCandidate,
    PairDraft,
    Review,
    Video,
    VideoSkip,
)
from annotator.picking import services as picking
from annotator.picking.drafted import change_rows
from annotator.picking.editor import editor_config, last_rejection, last_rejection_guideline
from annotator.picking.guidelines import guideline_panel
from annotator.picking.questions import template_table
from annotator.regions import regions_as_frames
from benchmark import jsonlimits
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound, page_detail
from subtlebench.pages import carried, error_response, post_only, redirect_refused
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_required


def _url(name: str) -> str:
    return default_storage.url(name) if name else ""


def _candidate_of():
    """The candidate pair a pair was authored from (its workbench fixes a returned pair), or None."""
    return Subquery(PairCandidate.objects.filter(pair=OuterRef("pk")).order_by("pk").values("pk")[:1])


@role_required(ANNOTATOR)
@require_http_methods(["GET", "POST"])
def work(request):
    """GET: your lease, your returned pairs and drafts. POST: ask for work, and go to the leased video."""
    if request.method == "POST":
        try:
            video = picking.video_lease_next(user=request.user)
        except Conflict as error:
            return error_response(request, error, back_to="picking-work")
        if video is None:
            messages.warning(request, "No video is left for you: every sampled video is leased, skipped or done.")
            return redirect("picking-work")
        return redirect("picking-workbench", video_id=video.pk)
    held = Video.objects.held_by(request.user).first()
    # What a coordinator gave this annotator: offered before anything else when they ask for work.
    assigned = picking.videos_open_to(request.user).filter(assigned_to=request.user)[:20]
    returned = (
        Pair.objects.filter(author=request.user, status=Pair.Status.REJECTED)
        .select_related("video")
        .annotate(
            rejection=last_rejection(), rejection_guideline=last_rejection_guideline(), candidate_id=_candidate_of()
        )
        .order_by("-decided_at", "-pk")[:50]
    )
    drafts = (
        PairDraft.objects.filter(author=request.user, video__isnull=False)
        .select_related("video")
        .order_by("-updated", "-pk")[:20]
    )
    mine = Pair.objects.filter(author=request.user).exclude(status=Pair.Status.DRAFT)
    counts = {status: mine.filter(status=status).count() for status in ("submitted", "accepted", "rejected")}
    waiting = mine.filter(status=Pair.Status.SUBMITTED).select_related("video").order_by("-submitted_at", "-pk")[:50]
    skipped = VideoSkip.objects.filter(user=request.user).select_related("video").order_by("-created", "-pk")[:50]
    context = {
        "held": held,
        "assigned": assigned,
        "returned": returned,
        "drafts": drafts,
        "counts": counts,
        "waiting": waiting,
        "skipped": skipped,
    }
    return render(request, "picking/work.html", context)


@role_required(ANNOTATOR, COORDINATOR)
@post_only("picking-work")
def skip_undo(request, skip_id: int):
    """Undo a skip from the work page: the video is offered to you again."""
    try:
        video = picking.video_skip_undo(skip_id=skip_id, user=request.user)
    except (NotFound, Forbidden) as error:
        return error_response(request, error, back_to="picking-work")
    messages.success(request, f"Skip undone: video {video.yt8m_id} is offered to you again.")
    return redirect("picking-work")


@role_required(ANNOTATOR)
@post_only("picking-work")
def pair_withdraw(request, pair_id: int):
    """Withdraw one of your submitted pairs before it is reviewed (the work page's button)."""
    pair = get_object_or_404(Pair, pk=pair_id)
    try:
        picking.pair_withdraw(pair=pair, user=request.user)
    except (Forbidden, Conflict) as error:
        return error_response(request, error, back_to="picking-work")
    messages.success(request, f"Pair {pair.pk} withdrawn: it will not be reviewed, and its frames are free again.")
    return redirect("picking-work")


@role_required(REVIEWER, COORDINATOR)
@post_only("picking-review-pair")
def pair_reopen(request, pair_id: int):
    """Reopen the decision on a pair (the review page's form): it goes back to the review queue."""
    pair = get_object_or_404(Pair, pk=pair_id)
    try:
        picking.pair_reopen(pair=pair, by=request.user, reason=request.POST.get("reason", ""))
    except (Invalid, Forbidden, Conflict) as error:
        messages.error(request, page_detail(error))
        return redirect("picking-review-pair", pair_id=pair.pk)
    messages.success(request, f"Pair {pair.pk} reopened: it is waiting for review again.")
    return redirect("picking-review-pair", pair_id=pair.pk)


@role_required(ANNOTATOR)
@require_GET
def workbench(request, video_id: int):
    """The pair editor on one video; a constant number of queries whatever the number of frames."""
    video = get_object_or_404(Video.objects.select_related("lease_holder"), pk=video_id)
    now = timezone.now()
    # Looking is always allowed; working on this video is not while the annotator holds another (one at a time):
    # the page says which, links back to it, and sends no heartbeat (the API would answer 409).
    elsewhere = Video.objects.held_by(request.user, now).exclude(pk=video.pk).first()
    holder = video.holder_now(now)
    now_held = holder is not None and holder.pk == request.user.pk
    lease = {
        "held": now_held,
        "leased_to": holder.username if holder is not None and not now_held else "",
        "held_elsewhere": {"id": elsewhere.pk, "title": elsewhere.yt8m_id} if elsewhere else None,
        "skip_reasons": [{"value": value, "label": label} for value, label in VideoSkip.Reason.choices],
    }
    source = picking.VideoSource(video)
    config = editor_config(source, user=request.user, lease=lease, edit=request.GET.get("pair", ""))
    context = {"page": source.page(), "config": config, "held_elsewhere": elsewhere, "suggestions": True}
    return render(request, "picking/workbench.html", context)


@role_required(ANNOTATOR)
@post_only("picking-workbench")
def draft_beacon(request, video_id: int):
    """The workbench's last save as its page goes away (`navigator.sendBeacon` on pagehide): a form post, since a
    beacon sets no headers (the CSRF token is in the body), with the state as JSON and the draft version it was
    based on. The same compare-and-set as the draft API: a beacon based on an older version writes nothing (409)."""
    video = get_object_or_404(Video, pk=video_id)
    try:
        version = request.POST.get("version", "")
        if version and not version.isdigit():
            raise Invalid({"version": ["Send the draft version as a whole number."]})
        try:
            state = jsonlimits.loads(request.POST.get("state", ""))
        except ValueError:
            raise Invalid({"state": ["The draft must be a JSON object."]}) from None
        picking.video_draft_check(video=video, user=request.user)
        saved = work_draft_save(
            picking.VIDEOS, item=video, user=request.user, state=state, version=int(version) if version else None
        )
    except (Invalid, Conflict) as error:
        return error_response(request, error)
    return JsonResponse({"version": saved.version, "updated": saved.updated.isoformat()})


@role_required(REVIEWER)
@require_GET
def review_queue(request):
    """Submitted pairs waiting for a decision, oldest first; never your own."""
    waiting = Pair.objects.reviewable_by(request.user)
    pairs = waiting.select_related("author", "video").order_by("submitted_at", "id")[:200]
    decided = (
        Review.objects.filter(reviewer=request.user)
        .select_related("pair", "pair__author")
        .order_by("-created", "-pk")[:20]
    )
    second = DoubleReview.objects.waiting_for(request.user).count()
    return render(
        request,
        "picking/review_queue.html",
        {"pairs": pairs, "waiting": waiting.count(), "decided": decided, "second_reviews": second},
    )


@role_required(REVIEWER)
@require_GET
def review_pair(request, pair_id: int):
    """One pair, both images with flicker and zoom, the question and options, similarity; y / n / e."""
    pair = get_object_or_404(
        Pair.objects.select_related(
            "author",
            "video",
            "image_1",
            "image_2",
            "image_1__frame",
            "image_2__frame",
            "drafted_by",
            "guideline_version__guideline",
        ).with_model_score(),
        pk=pair_id,
    )
    frame_1 = getattr(pair.image_1, "frame", None)
    frame_2 = getattr(pair.image_2, "frame", None)
    # A pair drawn for a blind second review that this user may give: its status and history would tell them the
    # first decision, so the page shows neither and points to the second review (annotator/stats).
    blind = DoubleReview.objects.waiting_for(request.user).filter(pair=pair).first()
    reviews = [] if blind else list(pair.reviews.select_related("reviewer", "guideline_version__guideline"))
    waiting = Pair.objects.reviewable_by(request.user).count()
    config = {
        "pair": {
            "id": pair.pk,
            "version": pair.version,
            "status": "" if blind else pair.status,
            "category": pair.category,
            "question": pair.question,
            "answer": pair.answer,
            "distractors": pair.distractors,
            "image_1": pair.image_1_id,
            "image_2": pair.image_2_id,
            "similarity": pair.similarity,
            "similarity_status": pair.similarity_status,
            "problem": pair.similarity_problem() or "",
            "later": picking.pair_later_image(pair),
            # Image 1 and 2 are the viewer's a and b here.
            "regions": regions_as_frames(pair.regions, swapped=False),
        },
        "own": pair.author_id == request.user.pk,
        "templates": template_table(),
    }
    decision = next((r for r in reviews if r.decision != Review.Decision.REOPEN), None)
    may_reopen = (
        not blind
        and pair.status in (Pair.Status.ACCEPTED, Pair.Status.REJECTED)
        and (has_role(request.user, COORDINATOR) or (decision is not None and decision.reviewer_id == request.user.pk))
    )
    return render(
        request,
        "picking/review.html",
        {
            "pair": pair,
            "frame_1": frame_1,
            "frame_2": frame_2,
            "gap": abs(frame_2.timestamp - frame_1.timestamp) if frame_1 and frame_2 else None,
            "reviews": reviews,
            "blind": blind,
            "may_reopen": may_reopen,
            "waiting": waiting,
            "may_decide": pair.status == Pair.Status.SUBMITTED and not config["own"] and not blind,
            "config": config,
            "image_1_url": _url(pair.image_1.file.name),
            "image_2_url": _url(pair.image_2.file.name),
            "categories": Category.choices,
            "draft_rows": change_rows(pair.draft_changes),  # models that draft: templates/drafting/_pair_record.html
            # The guideline the pair was submitted under (else the one in force), and what a rejection may cite.
            "guideline": guideline_panel(category=pair.category, domain=pair.domain, version=pair.guideline_version),
            "citable": GuidelineVersion.objects.filter(
                guideline__category=pair.category, guideline__domain__in=(pair.domain, "")
            )
            .select_related("guideline")
            .order_by("guideline__domain", "-number", "pk"),
        },
    )


@role_required(COORDINATOR)
@require_GET
def overview(request):
    """Progress against the targets, category x domain, annotators, videos left, and who holds what. A refused
    assignment comes back here (Post/Redirect/Get) with what was typed and why, shown beside its form."""
    annotators = get_user_model().objects.filter(groups__name=ANNOTATOR, is_active=True).order_by("username", "pk")
    holdings = picking.holdings()
    context = {
        "figures": picking.overview_figures(),
        "annotators": annotators,
        "holdings": holdings,
        "held": picking.holding_counts(holdings),
        "assignable": picking.assignable_videos(),
        "assign_refused": carried(request),
        "picker_limit": picking.ASSIGN_PICKER_LIMIT,
    }
    return render(request, "picking/overview.html", context)


@role_required(COORDINATOR)
@post_only("picking-overview")
def overview_assign(request):
    """Assign a video (by YouTube-8M id, typed or picked) to an annotator chosen from the list, or clear it with
    "nobody". A refusal goes back to the form, not to the top of the page."""
    yt8m_id = request.POST.get("video", "").strip()
    raw = request.POST.get("user", "").strip()
    video = Video.objects.filter(yt8m_id=yt8m_id).first() if yt8m_id else None
    annotators = get_user_model().objects.filter(groups__name=ANNOTATOR, is_active=True)
    user = annotators.filter(pk=int(raw)).first() if raw.isdigit() else None
    if not yt8m_id:
        problem = "Type or pick the YouTube-8M id of the video to assign."
    elif video is None:
        problem = f"No video has the YouTube-8M id {yt8m_id!r}: pick one from the list."
    elif raw and user is None:
        problem = "Choose an annotator from the list."
    else:
        try:
            picking.video_assign(video=video, user=user, by=request.user, confirmed=False)
        except picking.ReassignUnconfirmed as error:
            link = reverse("video-detail", args=[video.pk])
            problem = f"{error.detail} Reassign it from the video's page ({link}), which asks for that."
            return redirect_refused(
                request, reverse("picking-overview"), data={"video": yt8m_id, "user": raw}, error=problem
            )
        who = user.username if user else "nobody"
        messages.success(request, f"Video {video.yt8m_id} is assigned to {who}.")
        return redirect("picking-overview")
    # The page shows the reason beside the form, whose field takes the focus (autofocus): the browser scrolls to it.
    return redirect_refused(request, reverse("picking-overview"), data={"video": yt8m_id, "user": raw}, error=problem)
