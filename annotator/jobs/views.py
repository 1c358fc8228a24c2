"""The jobs page: every long job (import, similarity, export) with a live progress bar."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotator.models import Job
from annotator.similarity.services import embedding_model_context
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, has_role, role_required
from subtlebench.security import job_without_server_paths

JOBS_PER_PAGE = 50


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def job_list(request):
    jobs = Job.objects.visible_to(request.user).select_related("created_by")
    kind = request.GET.get("kind", "")
    if kind in Job.Kind.values:
        jobs = jobs.filter(kind=kind)
    jobs = list(jobs[:JOBS_PER_PAGE])
    kinds = [(value, label) for value, label in Job.Kind.choices if has_role(request.user, *Job.KIND_ROLES[value])]
    context = {"jobs": jobs, "kind": kind, "kinds": kinds, "any_active": any(j.is_active for j in jobs)}
    if request.htmx:
        return render(request, "jobs/list.html#job-rows", context)
    return render(request, "jobs/list.html", {**context, **embedding_model_context()})


@role_required(ANNOTATOR, REVIEWER, COORDINATOR)
@require_GET
def job_detail(request, job_id):
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("created_by"), pk=job_id)
    if not has_role(request.user, COORDINATOR):
        job_without_server_paths(job)
    if request.htmx:
        return render(request, "jobs/detail.html#job-status", {"job": job})
    return render(request, "jobs/detail.html", {"job": job})
