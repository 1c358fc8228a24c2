"""API for long jobs (imports, similarity runs, exports): their progress, errors and results."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.jobs.services import job_cancel, job_retry
from annotator.models import Job
from api.errors import error_responses
from api.pagination import page_response, paginated
from subtlebench.errors import Invalid
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole, has_role
from subtlebench.security import job_without_server_paths

# The create endpoints of jobs (import, export) take this header: a retry with the same key answers the first job.
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description="Any unique text per intended job (e.g. a UUID): a retry with the same key creates no second job.",
)


class JobOutputSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)
    paused_until = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="While a unit waits out an outage: when it tries again."
    )
    pause_reason = serializers.CharField(
        read_only=True, help_text="Why it waits (the storage, the broker or the database did not answer); empty else."
    )
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True, read_only=True)

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "title",
            "status",
            "total",
            "done",
            "percent",
            "errors",
            "result",
            "created_by",
            "created",
            "started",
            "finished",
            "heartbeat",
            "paused_until",
            "pause_reason",
        ]


def job_output(request, job) -> dict:
    """A job as the API answers it: its errors and result name server paths, shortened for all but coordinators."""
    if not has_role(request.user, COORDINATOR):
        job_without_server_paths(job)
    return JobOutputSerializer(job).data


@extend_schema(
    parameters=[
        OpenApiParameter("kind", str, enum=Job.Kind.values, description="Only jobs of this kind."),
        OpenApiParameter("status", str, enum=Job.Status.values, description="Only jobs in this state."),
    ],
    responses={200: JobOutputSerializer(many=True), **error_responses(400, 403)},
)
@paginated
@api_view(["GET"])
@permission_classes([HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)])
def job_list(request):
    """Jobs of the kinds your role may see, newest first; filter with `?kind=...` and `?status=...`."""
    jobs = Job.objects.visible_to(request.user).select_related("created_by").with_pauses()
    for field, allowed in (("kind", Job.Kind.values), ("status", Job.Status.values)):
        if field in request.query_params:
            value = request.query_params[field]
            if value not in allowed:
                raise Invalid({field: [f"{value[:40]!r} is not one of {', '.join(allowed)}."]})
            jobs = jobs.filter(**{field: value})
    return page_response(request, jobs, lambda page: [job_output(request, job) for job in page])


@extend_schema(responses={200: JobOutputSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)])
def job_detail(request, job_id):
    # Another role's kind of job is not found, as if it did not exist: its id says nothing either.
    job = get_object_or_404(Job.objects.visible_to(request.user).select_related("created_by"), pk=job_id)
    return Response(job_output(request, job))


@extend_schema(request=None, responses={200: JobOutputSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def job_cancel_api(request, job_id):
    """Cancel a queued or running job: units not started never run, running ones stop at their next unit."""
    job = job_cancel(job=get_object_or_404(Job, pk=job_id), user=request.user)
    return Response(job_output(request, job))


@extend_schema(request=None, responses={201: JobOutputSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def job_retry_api(request, job_id):
    """Run a failed or cancelled job again, as a new job with the same units (work already done is skipped)."""
    again = job_retry(job=get_object_or_404(Job, pk=job_id), user=request.user)
    return Response(job_output(request, again), status=status.HTTP_201_CREATED)
