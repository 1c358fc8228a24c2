"""API of pair picking and review: the video queue (lease, heartbeat, release, assign), drafts, submit, review.

The workbench and review pages use these same endpoints; scripted clients send `Authorization: Token <key>`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.models import Category, Pair, Review, Video, VideoSkip
from annotator.picking import services as picking
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole


def refusal(error: Exception) -> Response:
    """One shape for every refusal: `detail` to show, `errors` by field for forms."""
    if isinstance(error, ValidationError):
        errors = error.message_dict if hasattr(error, "error_dict") else {"detail": error.messages}
        detail = " ".join(message for messages in errors.values() for message in messages)
        return Response({"detail": detail, "errors": errors}, status=status.HTTP_400_BAD_REQUEST)
    code = status.HTTP_409_CONFLICT if isinstance(error, picking.Conflict) else status.HTTP_400_BAD_REQUEST
    return Response({"detail": str(error)}, status=code)


class LeaseOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    yt8m_id = serializers.CharField()
    frame_count = serializers.IntegerField()
    lease_expires = serializers.DateTimeField()
    workbench_url = serializers.SerializerMethodField()

    def get_workbench_url(self, video) -> str:
        return f"/work/videos/{video.pk}/"


class LeaseEnvelopeSerializer(serializers.Serializer):
    video = LeaseOutputSerializer(allow_null=True)


@extend_schema(request=None, responses=LeaseEnvelopeSerializer)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def lease_next(request):
    """Lease the next video (or the one you hold). `video` is null when no video is left for you."""
    try:
        video = picking.video_lease_next(user=request.user)
    except picking.Conflict as error:
        return refusal(error)
    return Response({"video": LeaseOutputSerializer(video).data if video else None})


@extend_schema(request=None, responses=LeaseOutputSerializer)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def lease_heartbeat(request, video_id: int):
    """Keep your lease alive (the workbench sends one a minute), or take the video if it is free.

    409 when someone else holds the video now, or when you hold another video (one at a time: release it first).
    """
    video = get_object_or_404(Video, pk=video_id)
    try:
        video = picking.video_heartbeat(video=video, user=request.user)
    except picking.PickingError as error:
        return refusal(error)
    return Response(LeaseOutputSerializer(video).data)


class ReleaseInputSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=VideoSkip.Reason.choices, default=VideoSkip.Reason.DONE)
    note = serializers.CharField(required=False, allow_blank=True, default="")


class ReleaseOutputSerializer(serializers.Serializer):
    video = serializers.IntegerField(source="video_id")
    reason = serializers.CharField()


@extend_schema(request=ReleaseInputSerializer, responses=ReleaseOutputSerializer)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def lease_release(request, video_id: int):
    """Give the video back: done with it, or skipped (no usable pair, bad video, inappropriate content)."""
    video = get_object_or_404(Video, pk=video_id)
    data = ReleaseInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    skip = picking.video_release(video=video, user=request.user, **data.validated_data)
    return Response(ReleaseOutputSerializer(skip).data)


class AssignInputSerializer(serializers.Serializer):
    username = serializers.CharField(allow_blank=True, help_text="Empty to clear the assignment.")


@extend_schema(request=AssignInputSerializer, responses=LeaseOutputSerializer)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def video_assign(request, video_id: int):
    """Coordinators: give a video to one annotator (it is offered to them first, and to nobody else)."""
    video = get_object_or_404(Video, pk=video_id)
    data = AssignInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    username = data.validated_data["username"]
    user = get_object_or_404(get_user_model(), username=username) if username else None
    video = picking.video_assign(video=video, user=user, by=request.user)
    return Response({"video": video.pk, "assigned_to": username or None})


class DraftSerializer(serializers.Serializer):
    state = serializers.JSONField()
    updated = serializers.DateTimeField(read_only=True, required=False)


@extend_schema(request=DraftSerializer, responses=DraftSerializer)
@api_view(["GET", "PUT"])
@permission_classes([HasRole.of(ANNOTATOR)])
def draft(request, video_id: int):
    """GET your autosaved workbench state for a video; PUT replaces it (the workbench does, as you type)."""
    video = get_object_or_404(Video, pk=video_id)
    if request.method == "GET":
        return Response({"state": picking.pair_draft_state(video=video, user=request.user)})
    data = DraftSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        saved = picking.pair_draft_save(video=video, user=request.user, state=data.validated_data["state"])
    except ValidationError as error:
        return refusal(error)
    return Response(DraftSerializer(saved).data)


class SubmitInputSerializer(serializers.Serializer):
    video = serializers.IntegerField()
    index_a = serializers.IntegerField(help_text="Frame A's index in the video.")
    index_b = serializers.IntegerField()
    category = serializers.ChoiceField(choices=Category.choices)
    question = serializers.CharField(allow_blank=True)
    answer = serializers.CharField(allow_blank=True, required=False, default="")
    distractors = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False, default=list)
    answer_frame = serializers.ChoiceField(
        choices=["a", "b", ""], required=False, default="", help_text="Binary categories: which frame is the answer."
    )
    client_key = serializers.CharField(
        max_length=64, help_text="Random per pair; a retry with it makes no second pair."
    )
    pair = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="Resubmit this pair.")
    version = serializers.IntegerField(required=False, allow_null=True, default=None)


class PairOutputSerializer(serializers.ModelSerializer):
    index_1 = serializers.IntegerField(source="image_1.frame.index", default=None)
    index_2 = serializers.IntegerField(source="image_2.frame.index", default=None)

    class Meta:
        model = Pair
        fields = [
            "id",
            "status",
            "version",
            "category",
            "domain",
            "source",
            "source_id",
            "question",
            "answer",
            "distractors",
            "image_1",
            "image_2",
            "index_1",
            "index_2",
            "swapped",
            "similarity",
            "client_key",
        ]


@extend_schema(request=SubmitInputSerializer, responses={201: PairOutputSerializer, 200: PairOutputSerializer})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def pair_submit(request):
    """Submit a pair for review (201), or the same client key again (200, the same pair)."""
    data = SubmitInputSerializer(data=request.data)
    if not data.is_valid():
        return Response({"detail": "Check the fields.", "errors": data.errors}, status=status.HTTP_400_BAD_REQUEST)
    fields = dict(data.validated_data)
    video = get_object_or_404(Video, pk=fields.pop("video"))
    try:
        pair, created = picking.pair_submit(user=request.user, video=video, pair_id=fields.pop("pair"), **fields)
    except (ValidationError, picking.PickingError) as error:
        return refusal(error)
    return Response(PairOutputSerializer(pair).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ReviewInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Review.Decision.choices)
    version = serializers.IntegerField(help_text="The version of the pair you reviewed.")
    reason = serializers.CharField(required=False, allow_blank=True, default="")
    corrections = serializers.DictField(required=False, default=dict, help_text="question, answer, distractors")


class ReviewOutputSerializer(serializers.Serializer):
    pair = PairOutputSerializer()
    decision = serializers.CharField()
    reason = serializers.CharField()
    changes = serializers.JSONField()
    next_url = serializers.CharField()


@extend_schema(request=ReviewInputSerializer, responses=ReviewOutputSerializer)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER)])
def pair_review(request, pair_id: int):
    """Accept, reject (reason required) or correct and accept a submitted pair. 409 when it changed meanwhile."""
    pair = get_object_or_404(Pair, pk=pair_id)
    data = ReviewInputSerializer(data=request.data)
    if not data.is_valid():
        return Response({"detail": "Check the fields.", "errors": data.errors}, status=status.HTTP_400_BAD_REQUEST)
    try:
        review = picking.pair_review(pair=pair, reviewer=request.user, **data.validated_data)
    except (ValidationError, picking.PickingError) as error:
        return refusal(error)
    following = Pair.objects.reviewable_by(request.user).order_by("submitted_at", "id").first()
    return Response(
        {
            "pair": PairOutputSerializer(review.pair).data,
            "decision": review.decision,
            "reason": review.reason,
            "changes": review.changes,
            "next_url": f"/review/pairs/{following.pk}/" if following else "/review/",
        }
    )
