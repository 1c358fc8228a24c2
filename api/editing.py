"""API of edit jobs: start one (coordinators), list its edits, accept or refuse an edit (reviewers, coordinators).
Thin views over annotator.editing.services, which the pages call too."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.editing.services import JOB_MAX_IMAGES, edit_accept, edit_job_start, edit_refuse
from annotator.jobs.services import clean_idempotency_key
from annotator.models import EditKind, ImageEdit, Job
from api.errors import error_responses
from api.fields import ID_MAX, free_text, whole_number
from api.jobs import IDEMPOTENCY_KEY
from subtlebench.roles import COORDINATOR, REVIEWER, HasRole
from subtlebench.text import NOTE_MAX


class EditJobInputSerializer(serializers.Serializer):
    collection = whole_number(low=1, high=ID_MAX, help_text="The collection's id.")
    kind = serializers.ChoiceField(choices=EditKind.choices, help_text="The kind of change (its template).")
    endpoint = whole_number(low=1, high=ID_MAX, help_text="The image-editing model's endpoint id.")
    images = serializers.ListField(
        child=whole_number(low=1, high=ID_MAX), min_length=1, max_length=JOB_MAX_IMAGES, help_text="Image ids."
    )
    object_name = free_text(100, lines="single", required=False, default="", allow_blank=True)
    value = free_text(100, lines="single", required=False, default="", allow_blank=True)
    namer = whole_number(
        low=1, high=ID_MAX, required=False, allow_null=True, default=None, help_text="A model that names the object."
    )


class EditJobOutputSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    job_url = serializers.CharField()


@extend_schema(
    request=EditJobInputSerializer,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: EditJobOutputSerializer, **error_responses(400, 403)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def edit_job_start_api(request):
    """Start an edit job over images of a collection; a worker asks the model. Its edits: /api/edit-jobs/<id>/edits/.
    An `Idempotency-Key` header makes a retry answer the first request's job."""
    data = EditJobInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = data.validated_data
    job = edit_job_start(
        user=request.user,
        collection_id=fields["collection"],
        kind=fields["kind"],
        endpoint_id=fields["endpoint"],
        image_ids=fields["images"],
        object_name=fields["object_name"],
        value=fields["value"],
        namer_id=fields["namer"],
        key=clean_idempotency_key(request.headers.get("Idempotency-Key")),
    )
    output = {"job_id": job.pk, "job_url": request.build_absolute_uri(f"/api/jobs/{job.pk}/")}
    return Response(EditJobOutputSerializer(output).data, status=status.HTTP_202_ACCEPTED)


class ImageEditSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImageEdit
        fields = [
            "id",
            "job",
            "image",
            "kind",
            "object_name",
            "value",
            "instruction",
            "question",
            "answer",
            "status",
            "error",
            "edited_image",
            "candidate",
            "checked_by",
            "checked",
            "refuse_reason",
            "refuse_note",
        ]
        read_only_fields = fields


@extend_schema(responses={200: ImageEditSerializer(many=True), **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(REVIEWER, COORDINATOR)])
def edit_job_edits(request, job_id: int):
    """The job's edits, one per image, in order: each one's instruction and outcome (a plain list: at most
    JOB_MAX_IMAGES)."""
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.EDIT)
    edits = ImageEdit.objects.filter(job=job).order_by("pk")
    return Response(ImageEditSerializer(edits, many=True).data)


@extend_schema(request=None, responses={200: ImageEditSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER, COORDINATOR)])
def edit_accept_api(request, edit_id: int):
    """The change is what was asked and the rest is intact: its candidate pair enters the authoring queue."""
    edit = edit_accept(user=request.user, edit=get_object_or_404(ImageEdit, pk=edit_id))
    return Response(ImageEditSerializer(edit).data)


class EditRefuseInputSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=ImageEdit.RefuseReason.choices)
    note = free_text(NOTE_MAX, required=False, default="", allow_blank=True, help_text="Needed for `other`.")


@extend_schema(
    request=EditRefuseInputSerializer, responses={200: ImageEditSerializer, **error_responses(400, 403, 404, 409)}
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER, COORDINATOR)])
def edit_refuse_api(request, edit_id: int):
    """Refuse the edit with the reason: it is kept with it, its candidate pair dismissed."""
    edit = get_object_or_404(ImageEdit, pk=edit_id)
    data = EditRefuseInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    edit = edit_refuse(user=request.user, edit=edit, **data.validated_data)
    return Response(ImageEditSerializer(edit).data)
