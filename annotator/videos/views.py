"""Coordinator pages for videos: the list with its upload form, and one video's facts and frame grid."""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotator.jobs.services import clean_idempotency_key
from annotator.models import Domain, Video
from annotator.similarity.services import embedding_model_context
from annotator.videos.services import videos_upload
from subtlebench.pages import post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required

VIDEOS_PER_PAGE = 100


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        return [super(MultipleFileField, self).clean(item, initial) for item in files if item] or super().clean(None)


class UploadForm(forms.Form):
    files = MultipleFileField(label="Video files", help_text="One or more; each file name becomes its yt8m_id.")
    every = forms.FloatField(
        label="Every (s)", required=False, min_value=0.01, max_value=3600, help_text="Default: 1 s."
    )
    frames = forms.IntegerField(label="Or frames", required=False, min_value=1, max_value=10000)
    domain = forms.ChoiceField(choices=[(Domain.NATURAL, "natural"), (Domain.GAMING, "gaming")])
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


@role_required(COORDINATOR)
@require_GET
def video_detail(request, video_id):
    video = get_object_or_404(Video, pk=video_id)
    frames = video.frames.select_related("image").order_by("index")
    return render(request, "videos/detail.html", {"video": video, "frames": frames})
