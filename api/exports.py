"""Export API: start an export job, list past exports, one export's detail (thin views over the export services)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.export.services import ExportOptions, export_folder_for_web, export_start
from annotator.jobs.services import clean_idempotency_key
from annotator.models import Category, Domain, Job, ReleasePublication
from annotator.releases.services import release_get, release_publication_record
from api.errors import error_responses
from api.fields import INT32_MAX, free_text, number, whole_number, yes_no
from api.jobs import IDEMPOTENCY_KEY
from api.pagination import page_response, paginated
from subtlebench.roles import COORDINATOR, HasRole
from subtlebench.text import NAME_MAX, NOTE_MAX, SHORT_TEXT_MAX


class ExportStartInputSerializer(serializers.Serializer):
    target = free_text(
        SHORT_TEXT_MAX,
        lines="single",
        help_text="A plain name (a folder under EXPORT_ROOT; with media in S3, a prefix under EXPORT_S3_PREFIX of "
        "the media bucket), or s3://bucket/prefix.",
    )
    val_fraction = number(default=0.1, min_value=0, max_value=0.9)
    seed = whole_number(low=-INT32_MAX, default=0)
    min_similarity = number(required=False, allow_null=True, default=None, min_value=0, max_value=1)
    categories = serializers.ListField(child=serializers.ChoiceField(Category.choices), default=list, max_length=20)
    domains = serializers.ListField(child=serializers.ChoiceField(Domain.choices), default=list, max_length=20)
    reproducible = yes_no(default=False)
    max_model_accuracy = number(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1,
        help_text="Keep only pairs that at most this share of the chosen models got right; unanswered pairs kept.",
    )
    models = serializers.ListField(
        child=free_text(NAME_MAX, lines="single"),
        default=list,
        max_length=100,
        help_text="Model endpoint names the filter counts (empty: every endpoint with results).",
    )
    replace = yes_no(default=False, help_text="Replace an earlier export at the target.")
    release = yes_no(default=False, help_text="Publish the export as the next release (vN).")
    release_title = free_text(NAME_MAX, lines="single", required=False, default="", allow_blank=True)
    release_notes = free_text(NOTE_MAX, required=False, default="", allow_blank=True)


class ExportOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    percent = serializers.IntegerField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField())
    created = serializers.DateTimeField()
    finished = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    options = serializers.DictField(source="result.options", default=dict)
    result = serializers.DictField()
    job_url = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField()

    def get_job_url(self, job) -> str:
        return f"/jobs/{job.pk}/"

    def get_download_url(self, job) -> str | None:
        if job.status != Job.Status.SUCCEEDED or "replaced_at" in (job.result or {}):
            return None
        return f"/exports/{job.pk}/download/"


def export_jobs():
    return Job.objects.filter(kind=Job.Kind.EXPORT).select_related("created_by").order_by("-created", "-pk")


@extend_schema(
    request=ExportStartInputSerializer,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: ExportOutputSerializer, **error_responses(400, 403, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def export_start_api(request):
    """Queue an export job; poll its detail (or /jobs/<id>/) for progress and counts. A target that already
    holds an export answers 409 unless `replace` is true. With an `Idempotency-Key` header a retried request
    answers the job the first one made."""
    data = ExportStartInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    target = fields.pop("target").strip()
    options = ExportOptions(**fields, out=target if target.startswith("s3://") else export_folder_for_web(target))
    key = clean_idempotency_key(request.headers.get("Idempotency-Key"))
    job = export_start(options=options, user=request.user, idempotency_key=key)
    return Response(ExportOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses={200: ExportOutputSerializer(many=True), **error_responses(400, 403)})
@paginated
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def export_list_api(request):
    """Past and running exports, newest first, with their counts."""
    return page_response(request, export_jobs(), lambda page: ExportOutputSerializer(page, many=True).data)


@extend_schema(responses={200: ExportOutputSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def export_detail_api(request, job_id: int):
    """One export: status, progress, options, counts per category x domain and split, skipped items."""
    return Response(ExportOutputSerializer(get_object_or_404(export_jobs(), pk=job_id)).data)


# --- When a release became public ----------------------------------------------------------------------------


class PublicationOutputSerializer(serializers.ModelSerializer):
    release = serializers.CharField(source="release.name", help_text="v1, v2, ...")
    who = serializers.CharField(source="who.username", default=None, allow_null=True)

    class Meta:
        model = ReleasePublication
        fields = ["id", "release", "how", "who", "when", "where", "note", "recorded"]


class PublicationInputSerializer(serializers.Serializer):
    when = serializers.DateTimeField(help_text="When the files were published elsewhere (not in the future).")
    where = free_text(SHORT_TEXT_MAX, lines="single", default="", allow_blank=True, help_text="A URL or a place.")
    note = free_text(NOTE_MAX, default="", allow_blank=True)


@extend_schema(responses={200: PublicationOutputSerializer(many=True), **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def release_publication_list_api(request, release_name: str):
    """Every time the release's files left the server, first first: from the first, its items count as public."""
    release = release_get(release_name)
    rows = release.publications.select_related("release", "who")
    return Response(PublicationOutputSerializer(rows, many=True).data)


@extend_schema(
    request=PublicationInputSerializer,
    responses={201: PublicationOutputSerializer, **error_responses(400, 403, 404)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def release_publication_create_api(request, release_name: str):
    """Mark the release public by hand ("published elsewhere on <date>"): a study drawn from it afterwards is open
    book, and answers given after `when` count as given on public items."""
    release = release_get(release_name)
    data = PublicationInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    publication = release_publication_record(
        release=release, how=ReleasePublication.How.BY_HAND, who=request.user, **data.validated_data
    )
    return Response(PublicationOutputSerializer(publication).data, status=status.HTTP_201_CREATED)
