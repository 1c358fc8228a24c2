"""The /exports/ pages: a coordinator starts an export job, follows it, and downloads past exports."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.http import FileResponse, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotator.export.services import (
    ExportOptions,
    benchmark_export,
    export_download_url,
    export_folder_for_web,
    export_start,
    export_zip,
)
from annotator.models import Category, Domain, Job
from subtlebench.errors import Conflict, Invalid, NotFound
from subtlebench.pages import error_response
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import SHORT_TEXT_MAX, single_line

HISTORY_SIZE = 50


class ExportForm(forms.Form):
    target = forms.CharField(
        max_length=SHORT_TEXT_MAX,
        validators=[single_line],
        initial="subtlebench",
        help_text="A folder name under the export folder, or s3://bucket/prefix.",
    )
    val_fraction = forms.FloatField(initial=0.1, min_value=0, max_value=0.9)
    seed = forms.IntegerField(initial=0)
    min_similarity = forms.FloatField(required=False, min_value=0, max_value=1)
    categories = forms.MultipleChoiceField(
        choices=Category.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    domains = forms.MultipleChoiceField(choices=Domain.choices, required=False, widget=forms.CheckboxSelectMultiple)
    reproducible = forms.BooleanField(required=False, help_text="Fixed card time: byte-identical reruns.")

    def options(self) -> ExportOptions:
        data = self.cleaned_data
        target = data["target"].strip()
        out = target if target.startswith("s3://") else export_folder_for_web(target)
        return ExportOptions(
            out=out,
            val_fraction=data["val_fraction"],
            seed=data["seed"],
            min_similarity=data["min_similarity"],
            categories=tuple(data["categories"]),
            domains=tuple(data["domains"]),
            reproducible=data["reproducible"],
        )


def export_jobs():
    return Job.objects.filter(kind=Job.Kind.EXPORT).select_related("created_by").order_by("-created")


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def exports(request):
    form = ExportForm(request.POST or None)
    preview = None
    if request.method == "POST" and form.is_valid():
        try:
            options = form.options()
            if request.POST.get("action") == "preview":
                preview = benchmark_export(options=options, dry_run=True)
            else:
                export_start(options=options, user=request.user)
                return redirect("exports")
        except (Invalid, Conflict) as error:  # a target that is a path; a storage or target problem (ExportError)
            return error_response(request, error, form=form, page=lambda message: _exports_page(request, form))
    return _exports_page(request, form, preview)


def _exports_page(request, form: ExportForm, preview: dict | None = None):
    context = {
        "form": form,
        "preview": preview,
        "jobs": export_jobs()[:HISTORY_SIZE],
        "export_root": settings.EXPORT_ROOT,
    }
    return render(request, "export/exports.html", context)


@role_required(COORDINATOR)
@require_GET
def export_history(request):
    """The history table alone: the page polls it while an export runs."""
    return render(request, "export/exports.html#export-history", {"jobs": export_jobs()[:HISTORY_SIZE]})


@role_required(COORDINATOR)
@require_GET
def export_download(request, job_id: int):
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.EXPORT)
    target = (job.result or {}).get("target")
    if job.status != Job.Status.SUCCEEDED or target not in ("local", "s3"):
        raise NotFound("This export has not finished.")
    try:
        if target == "s3":
            return redirect(export_download_url(job=job))
        archive = export_zip(job=job)
    except (NotFound, Conflict) as error:  # files replaced or removed since (ExportGone, 410)
        return error_response(request, error, page=lambda message: HttpResponse(message, content_type="text/plain"))
    name = f"{job.result['out'].rstrip('/').rsplit('/', 1)[-1]}-{job.pk}.zip"
    return FileResponse(open(archive, "rb"), as_attachment=True, filename=name, content_type="application/zip")
