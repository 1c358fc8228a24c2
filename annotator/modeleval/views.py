"""The /models/ pages: the endpoints and runs, register an endpoint, a run's progress, its results file.
(The page that starts a run lives in evaluation/model_views.py: it offers studies as a source.)"""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.modeleval.services import endpoint_create, evaluation_summary, results_file
from annotator.models import ModelEndpoint, ModelEvaluation, ModelItemResult
from subtlebench.errors import Conflict, Invalid
from subtlebench.pages import redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import NAME_MAX, single_line

RUNS_SHOWN = 50
FAILURES_SHOWN = 50


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, validators=[single_line])
    base_url = forms.CharField(
        max_length=500, label="Base URL", help_text="OpenAI-compatible, e.g. http://gpu-host:8000/v1"
    )
    model_id = forms.CharField(max_length=NAME_MAX, validators=[single_line], label="Model id")
    api_key_env = forms.CharField(
        max_length=100,
        required=False,
        label="API key variable",
        help_text="The name of the environment variable that holds the key in the worker (never the key).",
    )
    concurrency = forms.IntegerField(min_value=1, max_value=256, initial=8)
    timeout_s = forms.IntegerField(min_value=1, max_value=3600, initial=120, label="Timeout (s)")


def runs():
    return ModelEvaluation.objects.select_related("endpoint", "job", "created_by").order_by("-created", "-pk")


@role_required(COORDINATOR)
@require_GET
def model_list(request):
    endpoints = ModelEndpoint.objects.annotate(runs=Count("evaluations")).order_by("name")
    return render(request, "modeleval/list.html", {"endpoints": endpoints, "runs": runs()[:RUNS_SHOWN]})


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def model_endpoint_new(request):
    """Post/Redirect/Get: a refused form comes back on this page with what was sent and why."""
    if request.method == "GET":
        return render(request, "modeleval/endpoint_new.html", {"form": refused_form(request, EndpointForm)})
    form = EndpointForm(request.POST)
    if not form.is_valid():
        return redirect_refused_form(request, reverse("model-endpoint-new"), form)
    try:
        endpoint = endpoint_create(user=request.user, **form.cleaned_data)
    except (Invalid, Conflict) as error:
        return redirect_refused_form(request, reverse("model-endpoint-new"), form, error)
    messages.success(request, f"Model {endpoint.name} registered.")
    return redirect("model-list")


def _detail_context(evaluation: ModelEvaluation) -> dict:
    job = evaluation.job
    summary = job.result if not job.is_active and job.result.get("per_category") is not None else None
    summary = summary or evaluation_summary(evaluation)
    failures = evaluation.results.exclude(failure="").order_by("-pk")[:FAILURES_SHOWN]
    labels = dict(ModelItemResult.Failure.choices)
    return {
        "evaluation": evaluation,
        "job": job,
        "summary": summary,
        "categories": sorted(summary["per_category"].items()),  # JSON columns do not keep the order of keys
        "failure_counts": [
            (labels.get(kind, kind).lower(), count) for kind, count in sorted(summary["failures"].items())
        ],
        "failures": failures,
    }


@role_required(COORDINATOR)
@require_GET
def model_run_detail(request, run_id: int):
    evaluation = get_object_or_404(ModelEvaluation.objects.select_related("endpoint", "job"), pk=run_id)
    template = "modeleval/run_detail.html"
    if request.headers.get("HX-Request"):
        template += "#run-status"
    return render(request, template, _detail_context(evaluation))


@role_required(COORDINATOR)
@require_GET
def model_run_results(request, run_id: int):
    """The run's results in the official results file's format (mc_evaluation_results.json)."""
    evaluation = get_object_or_404(ModelEvaluation.objects.select_related("endpoint", "job"), pk=run_id)
    body = json.dumps(results_file(evaluation), indent=2, ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="mc_evaluation_results_{evaluation.pk}.json"'
    return response
