"""The /synthetic/ pages: define a sweep and follow its job; a sweep's pairs, its experiment release, and its heatmap
(every model run and study on its pairs, with thresholds), downloadable as SVG, PNG and CSV. For coordinators."""

from __future__ import annotations

import uuid

from django import forms
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotator.jobs.services import clean_idempotency_key
from annotator.models import Sweep
from annotator.synthetic.generator import CHOICES, DEFAULTS, FAMILIES
from annotator.synthetic.services import (
    sweep_create,
    sweep_publish,
)
from subtlebench.errors import Conflict, Invalid
from subtlebench.pages import post_only, redirect_refused, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import NAME_MAX

TARGETS = [0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95]
NUMERIC = sorted({name for family in DEFAULTS for name in DEFAULTS[family] if (family, name) not in CHOICES})


class SweepForm(forms.Form):
    title = forms.CharField(max_length=NAME_MAX, required=False)
    family = forms.ChoiceField(choices=[(f, f) for f in FAMILIES], initial="quantity")
    factor_1 = forms.ChoiceField(choices=[(n, n) for n in NUMERIC], initial="object_count", label="Factor")
    levels_1 = forms.CharField(initial="2 4 8 16 32", label="Levels", help_text="Numbers, separated by spaces.")
    factor_2 = forms.ChoiceField(
        choices=[("", "none"), *((n, n) for n in NUMERIC)], required=False, label="Second factor"
    )
    levels_2 = forms.CharField(required=False, label="Its levels")
    fixed = forms.CharField(
        required=False,
        label="Fixed factors",
        help_text="name=value, separated by spaces (e.g. object_size=30 change=brightness); the rest take defaults.",
    )
    items_per_cell = forms.IntegerField(initial=20, min_value=1, max_value=500)
    seed = forms.IntegerField(initial=0, min_value=0, max_value=2**31 - 1)
    size = forms.IntegerField(initial=512, min_value=64, max_value=2048, label="Image size (px)")
    landing = forms.ChoiceField(choices=Sweep.Landing.choices, initial=Sweep.Landing.REVIEW, label="Pairs land")
    experiment = forms.BooleanField(
        required=False, initial=True, label="Keep apart as an experiment (out of the benchmark's exports)"
    )
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)

    def clean_fixed(self) -> dict:
        fixed = {}
        for token in self.cleaned_data["fixed"].split():
            name, sep, value = token.partition("=")
            if not sep or not name:
                raise forms.ValidationError(f"{token!r}: write name=value.")
            try:
                number = float(value)
                fixed[name] = int(number) if number.is_integer() else number
            except ValueError:
                fixed[name] = value
        return fixed


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def sweep_list(request):
    """The sweeps and the form that defines one (Post/Redirect/Get: a refused form comes back with why)."""
    if request.method == "POST":
        form = SweepForm(request.POST)
        if not form.is_valid():
            return redirect_refused_form(request, reverse("sweep-list"), form)
        data = form.cleaned_data
        axes = [{"factor": data["factor_1"], "levels": data["levels_1"]}]
        if data["factor_2"]:
            axes.append({"factor": data["factor_2"], "levels": data["levels_2"]})
        try:
            sweep = sweep_create(
                user=request.user,
                family=data["family"],
                axes=axes,
                factors=data["fixed"],
                items_per_cell=data["items_per_cell"],
                seed=data["seed"],
                size=data["size"],
                landing=data["landing"],
                experiment=data["experiment"],
                title=data["title"],
                key=clean_idempotency_key(data["idempotency_key"]),
            )
        except Invalid as error:
            return redirect_refused_form(request, reverse("sweep-list"), form, error)
        return redirect("sweep-detail", sweep_id=sweep.pk)
    sweeps = Sweep.objects.select_related("job", "created_by").annotate(made=Count("items")).order_by("-created", "-pk")
    context = {"sweeps": sweeps, "form": refused_form(request, SweepForm), "defaults": DEFAULTS}
    return render(request, "synthetic/list.html", context)


@role_required(COORDINATOR)
@post_only("sweep-detail")
def sweep_publish_view(request, sweep_id: int):
    sweep = get_object_or_404(Sweep.objects.select_related("job"), pk=sweep_id)
    to = reverse("sweep-detail", args=[sweep.pk])
    try:
        job = sweep_publish(sweep=sweep, user=request.user, key=clean_idempotency_key(request.POST.get("key")))
    except (Invalid, Conflict) as error:
        return redirect_refused(request, to, data={}, error=error)
    return redirect("job-detail", job_id=job.pk)
