"""Coordinator pages for videos: the list with its upload form, and one video's facts and frame grid."""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.jobs.services import clean_idempotency_key
from annotator.models import Domain, Pair, PairDraft, Video
from annotator.picking import services as picking
from annotator.similarity.services import embedding_model_context, video_embedding_counts
from annotator.videos.services import video_resample, video_resample_problems, videos_upload
from subtlebench.errors import Conflict, Invalid
from subtlebench.pages import error_response, post_only, redirect_refused_form, refused_form
from subtlebench.roles import ANNOTATOR, COORDINATOR, role_required

VIDEOS_PER_PAGE = 100


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        """Every file chosen, empty ones too: the upload names an empty file on its job and imports the rest."""
        files = [item for item in (data if isinstance(data, list | tuple) else [data]) if item is not None]
        if not files:
            raise forms.ValidationError("Choose one or more video files.", code="required")
        return files


class UploadForm(forms.Form):
    files = MultipleFileField(label="Video files", help_text="One or more; each file name becomes its yt8m_id.")
    every = forms.FloatField(
        label="Every (s)", required=False, min_value=0.01, max_value=3600, help_text="Default: 1 s."
    )
    frames = forms.IntegerField(label="Or frames", required=False, min_value=1, max_value=10000)
    domain = forms.ChoiceField(choices=Domain.choices, initial=Domain.NATURAL)
    # A fresh key per rendered form: a double submit, or a resubmit after a lost answer, makes one job.
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)

    def clean(self):
        data = super().clean()
        if data.get("every") is not None and data.get("frames") is not None:
            raise forms.ValidationError("Give either seconds between frames or a number of frames, not both.")
        return data


def video_list_context(request, form: UploadForm) -> dict:
    status = request.GET.get("status", "")
    videos = Video.objects.order_by("-created", "-pk")
    if status in Video.Status.values:
        videos = videos.filter(status=status)
    else:
        status = ""
    counts = dict(Video.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    page = Paginator(videos, VIDEOS_PER_PAGE).get_page(request.GET.get("page"))
    return {
        "page": page,
        "status": status,
        "statuses": [(value, counts.get(value, 0)) for value in Video.Status.values],
        "total": sum(counts.values()),
        "form": form,
        "max_upload": settings.MAX_UPLOAD_BYTES,
        **embedding_model_context(),
    }


@role_required(COORDINATOR)
@require_GET
def video_list(request):
    return render(request, "videos/list.html", video_list_context(request, refused_form(request, UploadForm)))


@role_required(COORDINATOR)
@post_only("video-list")
def video_upload(request):
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return redirect_refused_form(request, reverse("video-list"), form)
    job = videos_upload(
        files=form.cleaned_data["files"],
        every=form.cleaned_data["every"],
        count=form.cleaned_data["frames"],
        domain=form.cleaned_data["domain"],
        created_by=request.user,
        idempotency_key=clean_idempotency_key(form.cleaned_data["idempotency_key"]),
    )
    return redirect(f"/jobs/{job.pk}/")


class ResampleForm(forms.Form):
    every = forms.FloatField(label="Every (s)", required=False, min_value=0.01, max_value=3600)
    frames = forms.IntegerField(label="Or frames", required=False, min_value=1, max_value=10000)
    confirm = forms.BooleanField(required=False, label="Replace the current frames")
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)

    def clean(self):
        data = super().clean()
        if data.get("every") is not None and data.get("frames") is not None:
            raise forms.ValidationError("Give either seconds between frames or a number of frames, not both.")
        return data


def annotators():
    """The people a video can be given to, by name."""
    return get_user_model().objects.filter(groups__name=ANNOTATOR, is_active=True).order_by("username").distinct()


def video_detail_context(video: Video, resample_form: ResampleForm | None = None) -> dict:
    frames = video.frames.select_related("image").order_by("index")
    pairs = list(
        Pair.objects.filter(video=video)
        .exclude(status=Pair.Status.DRAFT)
        .select_related("author", "image_1__frame", "image_2__frame")
        .order_by("-created", "-pk")
    )
    by_status = {status: 0 for status in Pair.Status.values if status != Pair.Status.DRAFT}
    for pair in pairs:
        by_status[pair.status] += 1
    drafts = list(PairDraft.objects.filter(video=video).select_related("author").order_by("-updated", "-pk"))
    return {
        "video": video,
        "frames": frames,
        "pairs": pairs,
        "by_status": list(by_status.items()),
        "holder": video.holder_now(),
        "skips": video.skips.select_related("user").order_by("-created", "-pk"),
        "drafts": drafts,
        "embeddings": video_embedding_counts(video=video),
        "annotators": annotators(),
        "resample_form": resample_form or ResampleForm(),
        "resample_problems": video_resample_problems(video=video, every=None, count=None, ignore_parameters=True),
    }


@role_required(COORDINATOR)
@require_GET
def video_detail(request, video_id):
    """What a coordinator needs about one video: frames, pairs by status, who holds it, embeddings, skips, and the
    actions (assign, re-sample, open the workbench)."""
    video = get_object_or_404(Video.objects.select_related("lease_holder", "assigned_to"), pk=video_id)
    return render(request, "videos/detail.html", video_detail_context(video, refused_form(request, ResampleForm)))


@role_required(COORDINATOR)
@post_only("video-detail")
def video_assign_view(request, video_id):
    """Give the video to an annotator chosen by name from the list (empty: nobody)."""
    video = get_object_or_404(Video, pk=video_id)
    raw = request.POST.get("user", "").strip()
    user = None
    if raw:
        user = annotators().filter(pk=int(raw)).first() if raw.isdigit() else None
        if user is None:
            messages.error(request, "Assign: choose an annotator from the list.")
            return redirect("video-detail", video_id=video.pk)
    try:
        picking.video_assign(video=video, user=user, by=request.user, confirmed=request.POST.get("confirm") == "1")
    except picking.ReassignUnconfirmed as error:
        video = Video.objects.select_related("lease_holder", "assigned_to").get(pk=video.pk)
        context = video_detail_context(video)
        context["reassign"] = {"user": user, "question": error.detail.removeprefix("Confirm first: ")}
        return render(request, "videos/detail.html", context, status=409)
    messages.success(request, f"Video {video.yt8m_id} is assigned to {user.username if user else 'nobody'}.")
    return redirect("video-detail", video_id=video.pk)


@role_required(COORDINATOR)
@post_only("video-detail")
def video_resample_view(request, video_id):
    """Re-sample the video (an import job of one unit), once confirmed; refused while pairs use its frames."""
    video = get_object_or_404(Video.objects.select_related("lease_holder", "assigned_to"), pk=video_id)
    form = ResampleForm(request.POST)
    if not form.is_valid():
        return redirect_refused_form(request, reverse("video-detail", args=[video.pk]), form)
    try:
        job = video_resample(
            video=video,
            every=form.cleaned_data["every"],
            count=form.cleaned_data["frames"],
            confirmed=form.cleaned_data["confirm"],
            created_by=request.user,
            idempotency_key=clean_idempotency_key(form.cleaned_data["idempotency_key"]),
        )
    except (Invalid, Conflict) as error:
        return error_response(request, error, back_to=f"/videos/{video.pk}/")
    messages.success(request, f"Re-sampling {video.yt8m_id}: job {job.pk}.")
    return redirect(f"/jobs/{job.pk}/")
