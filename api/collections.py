"""API of image collections and the pair-authoring queue: import a collection (coordinators), lease a candidate pair,
keep its lease, skip it, save its draft and author it (annotators). The candidate workbench calls these."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.authoring.drafts import work_draft_of, work_draft_save
from annotator.collections import authoring
from annotator.collections.services import collection_import
from annotator.jobs.services import clean_idempotency_key
from annotator.models import CandidateSkip, Category, Collection, Domain, PairCandidate
from api.errors import error_responses
from api.fields import ID_MAX, free_text, whole_number
from api.jobs import IDEMPOTENCY_KEY
from api.picking import (
    FrameRegionSerializer,
    PairDraftSerializer,
    PairDraftStateSerializer,
    PairSubmitOutputSerializer,
    regions_field,
)
from api.server_paths import CoordinatorOnlyPaths
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole
from subtlebench.text import NOTE_MAX, OPTIONS_MAX, QUESTION_MAX, SHORT_TEXT_MAX


class CollectionOutputSerializer(CoordinatorOnlyPaths, serializers.ModelSerializer):
    coordinator_paths = ("location",)

    class Meta:
        model = Collection
        fields = ["id", "name", "domain", "layout", "location", "created"]


@extend_schema(responses={200: CollectionOutputSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)])
def collection_list(request):
    """Every image collection, by name (a plain list: there are few)."""
    collections = Collection.objects.order_by("name", "pk")
    return Response(CollectionOutputSerializer(collections, many=True, context={"request": request}).data)


class CollectionImportInputSerializer(serializers.Serializer):
    source = free_text(
        1000, lines="single", help_text="A folder or CSV/JSONL manifest inside IMPORT_ROOTS, or s3://bucket/prefix."
    )
    name = serializers.SlugField(max_length=50, help_text="The collection's source name, e.g. mvtec.")
    domain = serializers.ChoiceField(choices=Domain.choices)
    layout = serializers.ChoiceField(choices=["auto", *Collection.Layout.values], default="auto")


class CollectionImportOutputSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    job_url = serializers.CharField()


@extend_schema(
    request=CollectionImportInputSerializer,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: CollectionImportOutputSerializer, **error_responses(400, 403)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def collection_import_api(request):
    """Start the import of a collection; a worker runs it. Follow it at /api/jobs/<job_id>/: its `errors` list each
    bad file or row, by file and line. An `Idempotency-Key` header makes a retry answer the first request's job."""
    data = CollectionImportInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    key = clean_idempotency_key(request.headers.get("Idempotency-Key"))
    job = collection_import(**data.validated_data, created_by=request.user, idempotency_key=key)
    output = {"job_id": job.pk, "job_url": request.build_absolute_uri(f"/api/jobs/{job.pk}/")}
    return Response(CollectionImportOutputSerializer(output).data, status=status.HTTP_202_ACCEPTED)


class CandidateLeaseSerializer(serializers.ModelSerializer):
    workbench_url = serializers.SerializerMethodField()

    def get_workbench_url(self, candidate) -> str:
        return f"/work/candidates/{candidate.pk}/"

    class Meta:
        model = PairCandidate
        fields = ["id", "domain", "source", "source_id", "category", "regions", "lease_expires", "workbench_url"]


class CandidateLeaseNextSerializer(serializers.Serializer):
    candidate = CandidateLeaseSerializer(allow_null=True)


@extend_schema(request=None, responses={200: CandidateLeaseNextSerializer, **error_responses(403, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_lease_next(request):
    """Lease the next candidate pair to author (or the one you hold); `candidate` is null when none is left."""
    candidate = authoring.candidate_lease_next(user=request.user)
    return Response({"candidate": CandidateLeaseSerializer(candidate).data if candidate else None})


@extend_schema(request=None, responses={200: CandidateLeaseSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_heartbeat(request, candidate_id: int):
    """Keep your lease on the candidate alive, or take it if it is free; 409 when someone else holds it, it was
    authored, or you hold another one."""
    candidate = get_object_or_404(PairCandidate, pk=candidate_id)
    return Response(
        CandidateLeaseSerializer(authoring.candidate_heartbeat(candidate=candidate, user=request.user)).data
    )


class CandidateReleaseInputSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(
        choices=CandidateSkip.Reason.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="Skip it with this reason; null: just end your lease (it stays in your queue).",
    )
    note = free_text(NOTE_MAX, required=False, allow_blank=True, default="")


class CandidateReleaseOutputSerializer(serializers.Serializer):
    candidate = serializers.IntegerField()
    skip = serializers.IntegerField(allow_null=True, help_text="The skip's id, null when there is none.")


@extend_schema(
    request=CandidateReleaseInputSerializer,
    responses={200: CandidateReleaseOutputSerializer, **error_responses(400, 403, 404)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR, COORDINATOR)])
def candidate_release(request, candidate_id: int):
    """End your lease on the candidate, or skip it with a reason (bad images: for everyone). Only its lease holder
    or a coordinator may skip it."""
    candidate = get_object_or_404(PairCandidate, pk=candidate_id)
    data = CandidateReleaseInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    skip = authoring.candidate_release(candidate=candidate, user=request.user, **data.validated_data)
    output = {"candidate": candidate.pk, "skip": skip.pk if skip else None}
    return Response(CandidateReleaseOutputSerializer(output).data)


class CandidateSkipUndoOutputSerializer(serializers.Serializer):
    candidate = serializers.IntegerField(source="pk")


@extend_schema(request=None, responses={200: CandidateSkipUndoOutputSerializer, **error_responses(403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR, COORDINATOR)])
def candidate_skip_undo(request, skip_id: int):
    """Undo a skip of a candidate pair: it is offered again. Yours, or any as a coordinator."""
    candidate = authoring.candidate_skip_undo(skip_id=skip_id, user=request.user)
    return Response(CandidateSkipUndoOutputSerializer(candidate).data)


@extend_schema(methods=["GET"], responses={200: PairDraftStateSerializer, **error_responses(403, 404)})
@extend_schema(
    methods=["PUT"],
    request=PairDraftSerializer,
    responses={200: PairDraftSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["GET", "PUT"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_draft(request, candidate_id: int):
    """GET your autosaved workbench state for a candidate pair; PUT replaces it (409: another tab saved since)."""
    candidate = get_object_or_404(PairCandidate, pk=candidate_id)
    if request.method == "GET":
        return Response(
            PairDraftStateSerializer(work_draft_of(authoring.CANDIDATES, item=candidate, user=request.user)).data
        )
    data = PairDraftSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    saved = work_draft_save(authoring.CANDIDATES, item=candidate, user=request.user, **data.validated_data)
    return Response(PairDraftSerializer(saved).data)


class CandidateSubmitInputSerializer(serializers.Serializer):
    index_a = whole_number(high=1, required=False, default=0, help_text="Image A: 0 (image 1) or 1 (image 2).")
    index_b = whole_number(high=1, required=False, default=1)
    category = serializers.ChoiceField(choices=Category.choices)
    question = free_text(QUESTION_MAX, allow_blank=True)
    answer = free_text(SHORT_TEXT_MAX, allow_blank=True, required=False, default="")
    distractors = serializers.ListField(
        child=free_text(SHORT_TEXT_MAX, allow_blank=True), required=False, default=list, max_length=OPTIONS_MAX
    )
    answer_frame = serializers.ChoiceField(choices=["a", "b", ""], required=False, default="")
    client_key = free_text(64, lines="single", help_text="Random per pair; a retry with it makes no second pair.")
    pair = whole_number(low=1, required=False, allow_null=True, default=None, help_text="Resubmit this pair.")
    version = whole_number(required=False, allow_null=True, default=None)
    draft_version = whole_number(high=ID_MAX, required=False, allow_null=True, default=None)
    active_ms = whole_number(required=False, allow_null=True, default=None)
    regions = regions_field(
        FrameRegionSerializer,
        required=False,
        allow_null=True,
        default=None,
        help_text="Where A and B differ: boxes on image A or B, in pixels of the image (at most 20). Left out (or "
        "null): the candidate's own regions. A category the team requires regions for is refused without one.",
    )
    model_draft = whole_number(
        low=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="The model's draft (POST /api/candidates/{id}/model-draft/) the texts started from, if any.",
    )


@extend_schema(
    request=CandidateSubmitInputSerializer,
    responses={
        201: OpenApiResponse(PairSubmitOutputSerializer, description="The pair authored from the candidate."),
        200: OpenApiResponse(PairSubmitOutputSerializer, description="This client key was sent before: the same pair."),
        **error_responses(400, 403, 404, 409),
    },
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_submit(request, candidate_id: int):
    """Author the candidate pair: a submitted pair with its domain, source and regions goes to review (201). 400
    names the field: a question the rules refuse, a region outside its image, or no region in a category that requires
    one."""
    candidate = get_object_or_404(PairCandidate.objects.select_related("image_1", "image_2"), pk=candidate_id)
    data = CandidateSubmitInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    pair, created = authoring.candidate_submit(
        user=request.user, candidate=candidate, pair_id=fields.pop("pair"), **fields
    )
    pair.draft_version = work_draft_of(authoring.CANDIDATES, item=candidate, user=request.user).version
    return Response(
        PairSubmitOutputSerializer(pair).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
    )
