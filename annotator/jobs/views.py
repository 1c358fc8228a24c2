"""The jobs page: every long job (import, similarity, export) with a live progress bar; cancel and retry."""

from __future__ import annotations

from collections import defaultdict

from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from annotator.jobs.services import job_cancel, job_retry, job_units_with_problems, jobs_waiting
from annotator.jobs.summary import is_waiting, job_paused, job_summary, job_waiting
from annotator.models import BulkAction, EmbeddingModel, Job, JobTask
from annotator.models.similarity import NO_ACTIVE_MODEL
from subtlebench.errors import Conflict
from subtlebench.pages import error_response, post_only
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_required
from subtlebench.security import job_without_server_paths

JOBS_PER_PAGE = 50


def bulk_undo_state(job: Job):
    """A bulk job's undo (templates/datamanager/_undo.html): its BulkAction and how many items it changed."""
    if job.kind != Job.Kind.BULK:
        return None
    action = BulkAction.objects.filter(job=job).select_related("undone_by").first()
    if action is not None:
        action.changed = action.changes.count()
    return action


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def job_list(request):
    jobs = Job.objects.visible_to(request.user).select_related("created_by").with_pauses()
    kind = request.GET.get("kind", "")
    if kind in Job.Kind.values:
        jobs = jobs.filter(kind=kind)
    jobs = list(jobs[:JOBS_PER_PAGE])
    coordinator = has_role(request.user, COORDINATOR)
    units = defaultdict(list)  # of the jobs that wait, read in one query
    for unit in JobTask.objects.filter(job__in=[job for job in jobs if is_waiting(job)]).order_by(
        "job", "created", "pk"
    ):
        units[unit.job_id].append(unit)
    for job in jobs:  # in words: what each did, or what an active one that has not moved waits for
        if not coordinator:
            job_without_server_paths(job)
        job.summary = job_summary(job)
        job.waiting_for = job_paused(job) or job_waiting(job, units=units[job.pk])
    kinds = [(value, label) for value, label in Job.Kind.choices if has_role(request.user, *Job.KIND_ROLES[value])]
    context = {"jobs": jobs, "kind": kind, "kinds": kinds, "any_active": any(j.is_active for j in jobs)}
    if request.htmx:
        return render(request, "jobs/list.html#job-rows", context)
    # What templates/similarity/_model.html shows (similarity.services.embedding_model_context; the jobs package
    # sits below similarity, so it reads the row itself).
    model = {"embedding_model": EmbeddingModel.objects.current(), "no_embedding_model": NO_ACTIVE_MODEL}
    return render(request, "jobs/list.html", {**context, **model, "waiting": jobs_waiting()})


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def job_detail(request, job_id):
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("created_by"), pk=job_id)
    if not has_role(request.user, COORDINATOR):
        job_without_server_paths(job)
    context = {
        "job": job,
        "summary": job_summary(job),
        "waiting_for": job_paused(job) or job_waiting(job),
        "units": job_units_with_problems(job),
        "can_manage": has_role(request.user, COORDINATOR),
        "bulk": bulk_undo_state(job),
    }
    if request.htmx:
        return render(request, "jobs/detail.html#job-status", context)
    return render(request, "jobs/detail.html", context)


@role_required(COORDINATOR)
@post_only("job-detail")
def job_cancel_view(request, job_id):
    job = get_object_or_404(Job, pk=job_id)
    try:
        job_cancel(job=job, user=request.user)
    except Conflict as error:
        return error_response(request, error, back_to=f"/jobs/{job.pk}/")
    return redirect(f"/jobs/{job.pk}/")


@role_required(COORDINATOR)
@post_only("job-detail")
def job_retry_view(request, job_id):
    job = get_object_or_404(Job, pk=job_id)
    try:
        again = job_retry(job=job, user=request.user)
    except Conflict as error:
        return error_response(request, error, back_to=f"/jobs/{job.pk}/")
    return redirect(f"/jobs/{again.pk}/")
