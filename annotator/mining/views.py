"""The /mining/ page: a coordinator mines subtle pairs across a collection or every video (a job on the similarity
worker), and sees the latest mining jobs; the candidates are in the data manager's Candidates table."""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotator.jobs.services import clean_idempotency_key
from annotator.mining.services import VIDEOS, mining_start
from annotator.models import Collection, Job, PairCandidate
from subtlebench.errors import Invalid
from subtlebench.pages import redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required

RECENT_JOBS = 10


class MiningForm(forms.Form):
    scope = forms.ChoiceField(choices=[])
    k = forms.IntegerField(label="At most per image", min_value=0, initial=2, help_text="0: no limit")
    same_source = forms.BooleanField(label="Same source", required=False)
    same_label = forms.BooleanField(label="Same class", required=False)
    across_videos_only = forms.BooleanField(label="Across videos only", required=False)
    min_gap = forms.FloatField(label="Min. gap in one video (s)", min_value=0, required=False)
    threshold = forms.FloatField(min_value=0, max_value=1, required=False)
    ceiling = forms.FloatField(min_value=0, max_value=1.0001, required=False)
    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        collections = (
            Collection.objects.filter(archived_at__isnull=True).order_by("name", "pk").values_list("pk", "name")
        )
        self.fields["scope"].choices = [(VIDEOS, "All videos")] + [
            (str(pk), f"Collection {name}") for pk, name in collections
        ]
        self.fields["threshold"].widget.attrs["placeholder"] = settings.SIMILARITY_THRESHOLD
        self.fields["ceiling"].widget.attrs["placeholder"] = settings.NEAR_DUPLICATE_CEILING
        for name in ("threshold", "ceiling", "min_gap"):
            self.fields[name].widget.attrs["step"] = "any"
        if not self.is_bound:
            self.initial.setdefault("idempotency_key", uuid.uuid4().hex)


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def mining_page(request):
    if request.method == "POST":
        form = MiningForm(request.POST)
        if not form.is_valid():
            return redirect_refused_form(request, reverse("mining"), form)
        data = dict(form.cleaned_data)
        key = clean_idempotency_key(data.pop("idempotency_key"))
        try:
            job = mining_start(user=request.user, key=key, **data)
        except Invalid as error:
            return redirect_refused_form(request, reverse("mining"), form, error)
        messages.success(request, f"Mining job #{job.pk} started on the similarity worker.")
        return redirect("job-detail", job_id=job.pk)
    jobs = Job.objects.filter(kind=Job.Kind.MINE).select_related("created_by").order_by("-created", "-pk")
    counts = {
        "open": PairCandidate.objects.filter(
            origin=PairCandidate.Origin.MINED, status=PairCandidate.Status.OPEN
        ).count(),
        "all": PairCandidate.objects.filter(origin=PairCandidate.Origin.MINED).count(),
    }
    context = {
        "form": refused_form(request, MiningForm),
        "jobs": list(jobs[:RECENT_JOBS]),
        "counts": counts,
        "threshold": settings.SIMILARITY_THRESHOLD,
        "ceiling": settings.NEAR_DUPLICATE_CEILING,
    }
    return render(request, "mining/mining.html", context)
