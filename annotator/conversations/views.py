"""The conversation partials (htmx): one item's thread with its form, the workbench's panel of the annotator's
threads on the item open there, and the home page's list of new comments. Every partial checks access itself."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotator.conversations import services
from annotator.models import Caption, CaptionTask, DoubleReview, Pair, PairCandidate
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound, error_status, page_detail
from subtlebench.pages import error_response, post_only
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, role_required

TALK_ROLES = (ANNOTATOR, REVIEWER, COORDINATOR)


def _kind_and_id(pair_id: int | None, caption_id: int | None) -> tuple[str, int]:
    return ("pair", pair_id) if pair_id is not None else ("caption", caption_id)


def _thread_item(request, kind: str, item_id: int):
    """The pair or caption whose thread this user may read; a blind second review hides the first decision's."""
    item = services.item_load(kind, item_id)
    services.thread_check(item, request.user)
    if isinstance(item, Pair) and DoubleReview.objects.waiting_for(request.user).filter(pair=item).exists():
        raise Forbidden("This pair waits for your blind second review: its conversation shows after your decision.")
    return item


def _thread(request, item, *, error: str = "", status: int = 200) -> HttpResponse:
    context = {**services.thread_context(item, request.user), "error": error}
    return render(request, "conversations/_thread.html", context, status=status)


@role_required(*TALK_ROLES)
@require_GET
def thread(request, pair_id: int | None = None, caption_id: int | None = None):
    try:
        item = _thread_item(request, *_kind_and_id(pair_id, caption_id))
    except (NotFound, Forbidden) as error:
        return error_response(request, error)
    return _thread(request, item)


@role_required(*TALK_ROLES)
@post_only("home")
def thread_post(request, pair_id: int | None = None, caption_id: int | None = None):
    """Post a comment, or (step=fixed, the author of a rejected item) send the item back to review."""
    try:
        item = _thread_item(request, *_kind_and_id(pair_id, caption_id))
    except (NotFound, Forbidden) as error:
        return error_response(request, error)
    body = request.POST.get("body", "")
    try:
        if request.POST.get("step") == "fixed":
            services.item_fixed(item=item, user=request.user, body=body)
        else:
            services.comment_post(item=item, author=request.user, body=body)
    except (Invalid, Conflict, Forbidden) as error:
        return _thread(request, item, error=page_detail(error), status=error_status(error))
    item.refresh_from_db()
    return _thread(request, item)


@role_required(*TALK_ROLES)
@post_only("home")
def comment_resolve(request, comment_id: int):
    try:
        comment = services.comment_resolve(
            comment_id=comment_id, user=request.user, resolved=request.POST.get("resolved", "1") == "1"
        )
    except (NotFound, Forbidden) as error:
        return error_response(request, error)
    return _thread(request, comment.pair or comment.caption)


@role_required(ANNOTATOR)
@require_GET
def workbench_panel(request, video_id: int | None = None, candidate_id: int | None = None, task_id: int | None = None):
    """The workbench's panel: the threads on this user's pairs of the video or candidate (or their captions of the
    caption task's pair), those with a comment or a rejection, newest first; hidden when there is none."""
    if video_id is not None:
        items = Pair.objects.filter(video_id=video_id)
    elif candidate_id is not None:
        items = Pair.objects.filter(candidates=get_object_or_404(PairCandidate, pk=candidate_id))
    else:
        items = Caption.objects.filter(pair_id=get_object_or_404(CaptionTask, pk=task_id).pair_id)
    items = items.filter(author=request.user, comments__isnull=False).distinct().order_by("-pk")[:5]
    threads = [services.thread_context(item, request.user) for item in items]
    return render(request, "conversations/_panel.html", {"threads": threads})


@login_required
@require_GET
def unread(request):
    """The home page's "N new comments" list."""
    return render(request, "conversations/_unread.html", {"unread": services.unread_comments_for(request.user)})
