"""The page that starts a model evaluation run: on an export's split, a study's sample, or filtered pairs."""

from __future__ import annotations

import uuid

from django import forms
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotator.jobs.services import clean_idempotency_key
from annotator.models import Category, Domain, Job, ModelEndpoint, ModelEvaluation
from evaluation.model_runs import model_run_start
from evaluation.models import Study
from subtlebench.errors import Conflict, Invalid
from subtlebench.pages import redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required


def local_exports():
    return Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.SUCCEEDED, result__target="local").order_by(
        "-created", "-pk"
    )


class RunForm(forms.Form):
    endpoint = forms.ModelChoiceField(queryset=ModelEndpoint.objects.all(), label="Model", empty_label=None)
    source = forms.ChoiceField(choices=ModelEvaluation.Source.choices, widget=forms.RadioSelect, initial="export")
    export_job = forms.ModelChoiceField(queryset=local_exports(), required=False, label="Export")
    split = forms.ChoiceField(choices=[("test", "test"), ("val", "val")], initial="test")
    study = forms.ModelChoiceField(queryset=Study.objects.order_by("-pk"), required=False)
    categories = forms.MultipleChoiceField(
        choices=Category.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    domains = forms.MultipleChoiceField(choices=Domain.choices, required=False, widget=forms.CheckboxSelectMultiple)
    seed = forms.IntegerField(initial=0, min_value=-(2**31) + 1, max_value=2**31 - 1)
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["export_job"].label_from_instance = lambda job: f"#{job.pk} {job.result.get('out', job.title)}"


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def model_run_new(request):
    """Post/Redirect/Get: a refused form comes back on this page with what was sent and why."""
    if request.method == "GET":
        return _page(request, refused_form(request, RunForm))
    form = RunForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        fields = {"seed": data["seed"], "idempotency_key": clean_idempotency_key(data["idempotency_key"])}
        if data["source"] == ModelEvaluation.Source.EXPORT:
            fields.update(export_job=data["export_job"], split=data["split"])
            if data["export_job"] is None:
                form.add_error("export_job", "Pick the export to evaluate.")
        elif data["source"] == ModelEvaluation.Source.STUDY:
            fields["study"] = data["study"]
            if data["study"] is None:
                form.add_error("study", "Pick the study whose sample to evaluate.")
        else:
            fields["pair_filter"] = {"category": data["categories"], "domain": data["domains"]}
        if form.is_valid():
            try:
                evaluation = model_run_start(
                    endpoint=data["endpoint"], user=request.user, source=data["source"], **fields
                )
            except (Invalid, Conflict) as error:
                return redirect_refused_form(request, reverse("model-run-new"), form, error)
            return redirect("model-run-detail", run_id=evaluation.pk)
    return redirect_refused_form(request, reverse("model-run-new"), form)


def _page(request, form):
    return render(request, "modeleval/run_new.html", {"form": form, "has_endpoints": ModelEndpoint.objects.exists()})
