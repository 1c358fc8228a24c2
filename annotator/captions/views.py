"""Caption pages: the coordinator's batches and quality signals, the annotator's caption workbench, the reviewer's
caption queue. Every view checks its role; the work itself is done by the services in annotator.captions.services.
"""

from __future__ import annotations

import re
import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db.models import Count, Prefetch, Q
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.captions import services as captions
from annotator.models import Caption, CaptionBatch, CaptionReview, CaptionSkip, CaptionTask, Pair
from subtlebench.errors import Conflict, Forbidden, Invalid, NotFound
from subtlebench.pages import (
    carried,
    error_response,
    post_only,
    redirect_refused,
    redirect_refused_form,
    refused_form,
)
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_required
from subtlebench.text import NAME_MAX, single_line

# --- Coordinator: batches, progress, per-annotator quality -------------------------------------------------


class CaptionBatchForm(forms.Form):
    title = forms.CharField(max_length=NAME_MAX, required=False, validators=[single_line])
    selection = forms.ChoiceField(
        choices=CaptionBatch.Selection.choices, initial=CaptionBatch.Selection.SAMPLE, widget=forms.RadioSelect
    )
    pair_ids = forms.CharField(
        required=False, max_length=100000, widget=forms.Textarea(attrs={"rows": 2}), label="Pair ids"
    )
    fraction = forms.FloatField(required=False, initial=0.1, min_value=0.0001, max_value=1)
    seed = forms.IntegerField(
        required=False, min_value=0, max_value=2**63 - 1, help_text="Empty: a random seed, recorded."
    )
    captions_per_item = forms.IntegerField(min_value=1, max_value=captions.MAX_CAPTIONS_PER_ITEM, initial=1)
    show_question = forms.BooleanField(required=False, label="Show the question and answer to annotators")
    allow_own_pairs = forms.BooleanField(required=False, label="Annotators may caption pairs they authored")

    def clean_pair_ids(self) -> list[int]:
        ids = []
        for token in re.split(r"[\s,;]+", self.cleaned_data["pair_ids"].strip()):
            if not token:
                continue
            if not token.isdigit():
                raise ValidationError(f"Pair ids are whole numbers separated by commas or spaces; {token!r} is not.")
            ids.append(int(token))
        return ids


def _coordinator_page(request, form: CaptionBatchForm, status: int = 200):
    batches = CaptionBatch.objects.with_progress().select_related("created_by")[:50]
    flagged = (
        Caption.objects.written()
        .exclude(flags=[])
        .select_related("author", "pair")
        .order_by("-submitted_at", "-pk")[:15]
    )
    context = {
        "form": form,
        "batches": batches,
        "stats": captions.caption_annotator_stats(),
        "flagged": flagged,
        "accepted_pairs": captions.caption_pool().count(),
        "awaiting_review": Caption.objects.awaiting_review().count(),
    }
    return render(request, "captions/home.html", context, status=status)


@role_required(COORDINATOR)
@require_GET
def captions_home(request):
    return _coordinator_page(request, refused_form(request, CaptionBatchForm))


@role_required(COORDINATOR)
@post_only("captions-home")
def caption_batch_create(request):
    form = CaptionBatchForm(request.POST)
    if form.is_valid():
        try:
            batch = captions.caption_batch_create(created_by=request.user, **form.cleaned_data)
        except Invalid as error:
            return redirect_refused_form(request, reverse("captions-home"), form, error)
        count = batch.tasks.values("pair").distinct().count()
        messages.success(request, f"Batch “{batch.title}” created: {count} pairs to caption.")
        return redirect("captions-home")
    return redirect_refused_form(request, reverse("captions-home"), form)


# --- Annotator: the queue and the workbench ----------------------------------------------------------------


@role_required(ANNOTATOR)
@require_GET
def captions_work(request):
    """The annotator's start page: resume a held task, or take the next one; their recent captions."""
    held = CaptionTask.objects.open().held_by(request.user).first()
    if held is not None:
        return redirect("caption-workbench", task_id=held.pk)
    recent = (
        Caption.objects.written()
        .filter(author=request.user)
        .select_related("pair")
        .prefetch_related(Prefetch("reviews", to_attr="review_list"))
        .order_by("-submitted_at", "-pk")[:20]
    )
    skipped = (
        CaptionSkip.objects.filter(user=request.user).select_related("task__pair").order_by("-created", "-pk")[:50]
    )
    context = {
        "available": captions.caption_tasks_open_to(request.user).count(),
        "recent": recent,
        "skipped": skipped,
    }
    return render(request, "captions/work.html", context)


@role_required(ANNOTATOR)
@post_only("captions-work")
def caption_skip_undo(request, skip_id: int):
    """Undo a caption skip from the work page: the task is offered to you again while it is open."""
    try:
        task = captions.caption_skip_undo(skip_id=skip_id, user=request.user)
    except (NotFound, Forbidden) as error:
        return error_response(request, error, back_to="captions-work")
    messages.success(request, f"Skip undone: pair {task.pair_id} is offered to you again.")
    return redirect("captions-work")


def _lease_and_go(request):
    try:
        task = captions.caption_task_lease(user=request.user)
    except Conflict as error:
        return error_response(request, error, back_to="captions-work")
    if task is None:
        messages.info(request, "Nothing left to caption for you right now.")
        return redirect("captions-work")
    return redirect("caption-workbench", task_id=task.pk)


@role_required(ANNOTATOR)
@post_only("captions-work")
def caption_lease(request):
    return _lease_and_go(request)


def _held_task(request, task_id: int) -> CaptionTask:
    """The task, if this annotator holds its lease; Forbidden otherwise."""
    task = get_object_or_404(CaptionTask.objects.select_related("batch", "pair__image_1", "pair__image_2"), pk=task_id)
    if not task.is_held_by(request.user):
        raise Forbidden("You do not hold this caption task.")
    return task


def _workbench(request, task: CaptionTask, text: str | None = None, error: str = "", status: int = 200):
    draft = captions.caption_draft_of(task, request.user)
    refused = carried(request)  # a refused submit or skip: its text and why (Post/Redirect/Get)
    if refused is not None:
        text, error = refused["data"].get("text", text), refused["detail"]
    context = {
        "task": task,
        "pair": task.pair,
        "text": draft.text if text is None and draft else (text or ""),
        "draft_version": draft.draft_version if draft else 0,
        "client_key": request.POST.get("client_key") or uuid.uuid4().hex,
        "error": error,
        "guidelines": captions.GUIDELINES,
        "min_chars": settings.CAPTION_MIN_CHARS,
        "max_chars": settings.CAPTION_MAX_CHARS,
        # Caption tasks this annotator can still get after this one.
        "left": captions.caption_tasks_open_to(request.user).count(),
    }
    return render(request, "captions/workbench.html", context, status=status)


def task_url(task: CaptionTask) -> str:
    return reverse("caption-workbench", kwargs={"task_id": task.pk})


@role_required(ANNOTATOR)
@require_GET
def caption_workbench(request, task_id: int):
    task = get_object_or_404(CaptionTask, pk=task_id)
    if not task.is_held_by(request.user):
        messages.warning(request, "That caption task is no longer leased to you.")
        return redirect("captions-work")
    return _workbench(request, _held_task(request, task_id))


@role_required(ANNOTATOR)
@post_only("caption-workbench")
def caption_draft(request, task_id: int):
    """Autosave and heartbeat: JSON, for the workbench's script (errors in the API's shape). A `version` the draft
    was based on makes a save from a stale tab a 409 (annotator/authoring/drafts.py); without one the save writes
    over."""
    get_object_or_404(CaptionTask, pk=task_id)
    try:
        version = request.POST.get("version")
        if version is not None and not version.isdigit():
            raise Invalid({"version": ["Send the draft version as a whole number."]})
        caption = captions.caption_draft_save(
            task_id=task_id,
            user=request.user,
            text=request.POST.get("text", ""),
            version=None if version is None else int(version),
        )
    except (Invalid, Forbidden, Conflict) as error:
        return error_response(request, error)
    return JsonResponse(
        {
            "saved": caption.updated.isoformat(),
            "lease_until": caption.task.lease_expires.isoformat(),
            "version": caption.draft_version,
        }
    )


@role_required(ANNOTATOR)
@post_only("caption-workbench")
def caption_submit(request, task_id: int):
    task = get_object_or_404(CaptionTask.objects.select_related("batch", "pair__image_1", "pair__image_2"), pk=task_id)
    text = request.POST.get("text", "")
    try:
        captions.caption_submit(
            task_id=task.pk, user=request.user, text=text, client_key=request.POST.get("client_key") or None
        )
    except Conflict as error:
        return error_response(request, error, back_to="captions-work")
    except Invalid as error:
        return redirect_refused(request, task_url(task), data={"text": text}, error=error)
    messages.success(request, "Caption submitted.")
    return _lease_and_go(request)


@role_required(ANNOTATOR)
@post_only("caption-workbench")
def caption_skip(request, task_id: int):
    task = get_object_or_404(CaptionTask.objects.select_related("batch", "pair__image_1", "pair__image_2"), pk=task_id)
    try:
        captions.caption_task_skip(task_id=task.pk, user=request.user, reason=request.POST.get("reason", ""))
    except Conflict as error:
        return error_response(request, error, back_to="captions-work")
    except Invalid as error:
        return redirect_refused(request, task_url(task), data={"text": request.POST.get("text")}, error=error)
    if request.POST.get("then") == "stop":
        messages.success(request, f"Skipped pair {task.pair_id}. You hold no caption task now; undo the skip below.")
        return redirect("captions-work")
    messages.success(request, f"Skipped pair {task.pair_id} (undo it on the captions work page).")
    return _lease_and_go(request)


@role_required(ANNOTATOR)
@post_only("caption-workbench")
def caption_release(request, task_id: int):
    """Stop and release: the task goes back to the queue, the annotator to the work page (their skips, with undo)."""
    task = get_object_or_404(CaptionTask, pk=task_id)
    try:
        captions.caption_task_release(task_id=task.pk, user=request.user, text=request.POST.get("text"))
    except Conflict as error:  # not held (a second click, or the lease went to someone else)
        return error_response(request, error, back_to="captions-work")
    except Invalid as error:  # a draft over the length limit: nothing released, the page says why
        return redirect_refused(request, task_url(task), data={"text": request.POST.get("text")}, error=error)
    messages.success(request, f"Released pair {task.pair_id}: you hold no caption task now. Your draft is kept.")
    return redirect("captions-work")


# --- Reviewer: the caption queue and the exported caption --------------------------------------------------


@role_required(REVIEWER)
@require_GET
def captions_review(request):
    caption = captions.caption_next_for_review(request.user)
    siblings = []
    similar = {}
    if caption is not None:
        siblings = list(
            Caption.objects.written().filter(pair=caption.pair).exclude(pk=caption.pk).select_related("author")
        )
        similar_ids = [detail["caption"] for detail in caption.flag_detail.values()]
        similar = {c.pk: c for c in Caption.objects.filter(pk__in=similar_ids).select_related("author")}
    several = (
        Pair.objects.annotate(n_accepted=Count("captions", filter=Q(captions__status=Caption.Status.ACCEPTED)))
        .filter(n_accepted__gte=2)
        .prefetch_related(
            Prefetch(
                "captions",
                queryset=Caption.objects.filter(status=Caption.Status.ACCEPTED).select_related("author"),
                to_attr="accepted_captions",
            )
        )
        .order_by("-pk")[:20]
    )
    context = {
        "caption": caption,
        "pair": caption.pair if caption else None,
        "siblings": siblings,
        "flag_notes": [
            (Caption.Flag(flag).label, similar.get(caption.flag_detail.get(flag, {}).get("caption")))
            for flag in caption.flags
        ]
        if caption
        else [],
        "waiting": Caption.objects.reviewable_by(request.user).count(),
        "several": several,
        "decided": _decided_captions(request.user),
    }
    return render(request, "captions/review.html", context)


def _decided_captions(user) -> list[CaptionReview]:
    """The last decisions this reviewer may reopen: their own (a coordinator: anyone's) on captions still decided."""
    reviews = CaptionReview.objects.exclude(decision=CaptionReview.Decision.REOPEN).filter(
        caption__status__in=(Caption.Status.ACCEPTED, Caption.Status.REJECTED)
    )
    if not has_role(user, COORDINATOR):
        reviews = reviews.filter(reviewer=user)
    latest = {}
    for review in reviews.select_related("caption", "reviewer").order_by("-created", "-pk")[:40]:
        latest.setdefault(review.caption_id, review)
    return list(latest.values())[:10]


@role_required(REVIEWER)
@post_only("captions-review")
def caption_review(request, caption_id: int):
    get_object_or_404(Caption, pk=caption_id)
    try:
        caption = captions.caption_review(
            caption_id=caption_id,
            reviewer=request.user,
            decision=request.POST.get("decision", ""),
            reason=request.POST.get("reason", ""),
            text=request.POST.get("text"),
        )
    except (Invalid, Conflict) as error:
        return error_response(request, error, back_to="captions-review")
    chosen = " and chosen for the export" if caption.chosen else ""
    messages.success(request, f"Caption {caption.pk} {caption.status}{chosen}.")
    return redirect("captions-review")


@role_required(REVIEWER, COORDINATOR)
@post_only("captions-review")
def caption_reopen(request, caption_id: int):
    """Reopen the decision on a caption (the caption review page's form): it waits for review again."""
    get_object_or_404(Caption, pk=caption_id)
    try:
        caption = captions.caption_reopen(caption_id=caption_id, by=request.user, reason=request.POST.get("reason", ""))
    except (Invalid, Forbidden, Conflict) as error:
        return error_response(request, error, back_to="captions-review")
    messages.success(request, f"Caption {caption.pk} reopened: it is waiting for review again.")
    return redirect("captions-review")


@role_required(REVIEWER)
@post_only("captions-review")
def caption_choose(request, caption_id: int):
    get_object_or_404(Caption, pk=caption_id)
    try:
        caption = captions.caption_choose(caption_id=caption_id, reviewer=request.user)
    except (Invalid, Conflict) as error:
        return error_response(request, error, back_to="captions-review")
    messages.success(request, f"Caption {caption.pk} is now the one the export uses for pair {caption.pair_id}.")
    return redirect("captions-review")
