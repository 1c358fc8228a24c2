"""The /exports/ pages: a coordinator starts an export job, follows it, and downloads past exports."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.export.services import (
    ExportGone,
    ExportOptions,
    ExportTargetTaken,
    benchmark_export,
    check_target,
    export_download_url,
    export_files_handed_out,
    export_folder_for_web,
    export_gone_reason,
    export_root_for_web,
    export_start,
    export_zip_jobs,
    export_zip_path,
    export_zip_source,
    export_zip_start,
)
from annotator.jobs.services import clean_idempotency_key
from annotator.models import Category, Domain, Job
from subtlebench.errors import Conflict, Invalid, NotFound
from subtlebench.pages import error_response, form_add_errors, post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import NAME_MAX, NOTE_MAX, SHORT_TEXT_MAX, single_line

HISTORY_SIZE = 50


class ExportForm(forms.Form):
    target = forms.CharField(
        max_length=SHORT_TEXT_MAX,
        validators=[single_line],
        initial="subtlebench",
        help_text="A plain name (under the export folder, or the media bucket's export prefix), or s3://bucket/prefix.",
    )
    val_fraction = forms.FloatField(initial=0.1, min_value=0, max_value=0.9)
    seed = forms.IntegerField(initial=0)
    min_similarity = forms.FloatField(required=False, min_value=0, max_value=1)
    categories = forms.MultipleChoiceField(
        choices=Category.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    domains = forms.MultipleChoiceField(choices=Domain.choices, required=False, widget=forms.CheckboxSelectMultiple)
    reproducible = forms.BooleanField(required=False, help_text="Fixed card time: byte-identical reruns.")
    max_model_accuracy = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Max model accuracy",
        help_text="Keep pairs at most this share of the models got right (pairs no model answered are kept).",
    )
    models = forms.CharField(
        required=False,
        max_length=SHORT_TEXT_MAX,
        validators=[single_line],
        label="Models",
        help_text="Endpoint names, comma-separated (empty: every endpoint with results).",
    )
    release = forms.BooleanField(
        required=False, label="Publish as a release", help_text="The next numbered version: v1, v2, ..."
    )
    release_title = forms.CharField(required=False, max_length=NAME_MAX, validators=[single_line], label="Title")
    release_notes = forms.CharField(
        required=False, max_length=NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}), label="Notes"
    )
    # A fresh key per rendered form: a double submit, or a resubmit after a lost answer, makes one job.
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)

    def options(self, replace: bool = False) -> ExportOptions:
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
            replace=replace,
            max_model_accuracy=data["max_model_accuracy"],
            models=tuple(data["models"].split(",")) if data["models"] else (),
            release=data["release"],
            release_title=data["release_title"],
            release_notes=data["release_notes"],
        )


def export_jobs():
    return Job.objects.filter(kind=Job.Kind.EXPORT).select_related("created_by").order_by("-created", "-pk")


def _preview_address(request) -> str:
    """The page's address that previews what the form sent: the form's fields (not the CSRF token) in the query."""
    query = request.POST.copy()
    query.pop("csrfmiddlewaretoken", None)
    query["action"] = "preview"
    return f"{reverse('exports')}?{query.urlencode()}"


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def exports(request):
    """Every post answers with a redirect (Post/Redirect/Get): a preview, which only reads, is the page's GET with
    the form in the query (a reload shows it again, the address can be shared); a start goes to the history; a
    target that already holds an export goes to the preview, which asks first; a refused form comes back on the
    page with what was sent and why."""
    if request.method == "POST":
        form = ExportForm(request.POST)
        if not form.is_valid():
            return redirect_refused_form(request, reverse("exports"), form)
        action = request.POST.get("action")
        if action == "preview":
            return redirect(_preview_address(request))
        try:
            # "replace" is the confirmation the page asks for when the target already holds an export.
            options = form.options(replace=action == "replace")
            key = clean_idempotency_key(form.cleaned_data["idempotency_key"])
            job = export_start(options=options, user=request.user, idempotency_key=key)
        except ExportTargetTaken:  # ask first; nothing is started or replaced without the confirmation
            return redirect(_preview_address(request))
        except (Invalid, Conflict) as error:  # a target that is a path; a storage or target problem (ExportError)
            return redirect_refused_form(request, reverse("exports"), form, error)
        messages.success(request, f"Export #{job.pk} started: it is at the top of the history.")
        return redirect("exports")
    if request.GET.get("action") != "preview":
        return _exports_page(request, refused_form(request, ExportForm))
    form = ExportForm(request.GET)
    preview = taken = None
    if form.is_valid():
        try:
            options = form.options()
            preview = benchmark_export(options=options, dry_run=True)
            check_target(options, dry_run=True)  # ask about replacing now rather than after "Start"
        except ExportTargetTaken as error:
            taken = error
        except (Invalid, Conflict) as error:
            form_add_errors(form, error)
    return _exports_page(request, form, preview, taken=taken)


def history_rows():
    """The latest export jobs, each with `gone`: why its files can no longer be downloaded, or None."""
    jobs = list(export_jobs()[:HISTORY_SIZE])
    for job in jobs:
        job.gone = export_gone_reason(job) if job.status == Job.Status.SUCCEEDED else None
    return jobs


def _exports_page(request, form: ExportForm, preview: dict | None = None, taken: ExportTargetTaken | None = None):
    context = {
        "form": form,
        "preview": preview,
        "taken": taken,
        "jobs": history_rows(),
        "export_root": export_root_for_web(),
    }
    return render(request, "export/exports.html", context)


@role_required(COORDINATOR)
@require_GET
def export_history(request):
    """The history table alone: the page polls it while an export runs."""
    return render(request, "export/exports.html#export-history", {"jobs": history_rows()})


def _finished_export(job_id: int) -> Job:
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.EXPORT)
    if job.status != Job.Status.SUCCEEDED or (job.result or {}).get("target") not in ("local", "s3"):
        raise NotFound("This export has not finished.")
    return job


def _download_problem(request, job: Job, error: Exception):
    """The page of an export that cannot be downloaded: gone (410), or a problem with its zip (409)."""
    context = {"job": job, "gone": isinstance(error, NotFound)}
    return error_response(
        request,
        error,
        page=lambda message: render(request, "export/export_gone.html", {**context, "message": message}),
    )


@role_required(COORDINATOR)
@require_GET
def export_download(request, job_id: int):
    """An S3 export: a presigned URL of its zip. A local one: its zip served as a file once a worker has built it;
    until then, the page that starts the zip job and follows its progress (polled while it runs)."""
    job = _finished_export(job_id)
    try:
        gone = export_gone_reason(job)
        if gone:
            raise ExportGone(f"{job.result['out']} no longer holds this export. {gone}")
        if job.result["target"] == "s3":
            url = export_download_url(job=job)
            where = f"s3://{job.result.get('bucket')}/{job.result.get('zip_key')}" if job.result.get("zip_key") else ""
            export_files_handed_out(job=job, user=request.user, where=where)  # wherever the browser puts them
            return redirect(url)
        export_zip_source(job)
    except (NotFound, Conflict) as error:  # files replaced or removed since (ExportGone, 410)
        return _download_problem(request, job, error)
    archive = export_zip_path(job)
    if request.GET.get("file") and archive.is_file():
        name = f"{job.result['out'].rstrip('/').rsplit('/', 1)[-1]}-{job.pk}.zip"
        export_files_handed_out(job=job, user=request.user, where=request.build_absolute_uri())
        return FileResponse(open(archive, "rb"), as_attachment=True, filename=name, content_type="application/zip")
    context = {"job": job, "zip_job": export_zip_jobs(job).first(), "built": archive.is_file()}
    if request.htmx:
        return render(request, "export/export_zip.html#export-zip", context)
    return render(request, "export/export_zip.html", context)


@role_required(COORDINATOR)
@post_only("export-download")
def export_zip_request(request, job_id: int):
    """Start the zip job of a local export, or join the one already building it; back to the download page."""
    job = _finished_export(job_id)
    try:
        export_zip_start(job=job, user=request.user)
    except (NotFound, Conflict) as error:
        return _download_problem(request, job, error)
    return redirect("export-download", job_id=job.pk)
