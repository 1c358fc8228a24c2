"""API of pair picking and review: the video queue (lease, heartbeat, release, assign), drafts, submit, review.

The workbench and review pages use these same endpoints; scripted clients send `Authorization: Token <key>`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.authoring.drafts import work_draft_of, work_draft_save
from annotator.models import Category, Pair, Review, Video, VideoSkip
from annotator.picking import services as picking
from api.errors import error_responses
from api.fields import ID_MAX, free_text, whole_number, yes_no
from api.schema_enums import FRAME
from benchmark.regions import LABEL_MAX, MAX_REGIONS
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole
from subtlebench.text import NOTE_MAX, OPTIONS_MAX, QUESTION_MAX, SHORT_TEXT_MAX


class RegionSerializer(serializers.Serializer):
    """A difference region on image 1 or 2 of a pair, in pixels of that image (benchmark/regions.py)."""

    image = whole_number(low=1, high=2, help_text="1 or 2: the image the box is on.")
    x = whole_number(help_text="Left edge, pixels from the image's left.")
    y = whole_number(help_text="Top edge, pixels from the image's top.")
    w = whole_number(low=1, help_text="Width in pixels.")
    h = whole_number(low=1, help_text="Height in pixels.")
    label = free_text(LABEL_MAX, lines="single", required=False, allow_blank=True)


class FrameRegionSerializer(RegionSerializer):
    """A difference region on the annotator's frame A or B (the workbench's terms): the server stores it on image
    1 or 2, wherever the app puts that frame."""

    image = None
    frame = serializers.ChoiceField(choices=FRAME, help_text="a or b: the frame the box is on.")


class RegionListField(serializers.ListField):
    """A list of regions whose errors name the region, counted from 1 as the contract's messages do."""

    def __init__(self, child, **kwargs):
        super().__init__(child=child, max_length=MAX_REGIONS, **kwargs)

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as error:
            detail = error.detail
            if isinstance(detail, dict):
                detail = {f"region {int(index) + 1}": messages for index, messages in detail.items()}
            raise serializers.ValidationError(detail) from error


def regions_field(child=RegionSerializer, **kwargs) -> RegionListField:
    return RegionListField(child=child(), **kwargs)


class VideoLeaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    yt8m_id = serializers.CharField()
    frame_count = serializers.IntegerField()
    lease_expires = serializers.DateTimeField()
    workbench_url = serializers.SerializerMethodField()

    def get_workbench_url(self, video) -> str:
        return f"/work/videos/{video.pk}/"


class VideoLeaseNextSerializer(serializers.Serializer):
    video = VideoLeaseSerializer(allow_null=True)


@extend_schema(request=None, responses={200: VideoLeaseNextSerializer, **error_responses(403, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def lease_next(request):
    """Lease the next video (or the one you hold). `video` is null when no video is left for you."""
    video = picking.video_lease_next(user=request.user)
    return Response({"video": VideoLeaseSerializer(video).data if video else None})


@extend_schema(request=None, responses={200: VideoLeaseSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def lease_heartbeat(request, video_id: int):
    """Keep your lease alive (the workbench sends one a minute), or take the video if it is free.

    409 when someone else holds the video now, or when you hold another video (one at a time: release it first).
    """
    video = get_object_or_404(Video, pk=video_id)
    video = picking.video_heartbeat(video=video, user=request.user)
    return Response(VideoLeaseSerializer(video).data)


class VideoReleaseInputSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=VideoSkip.Reason.choices, default=VideoSkip.Reason.DONE)
    note = free_text(NOTE_MAX, required=False, allow_blank=True, default="")


class VideoReleaseOutputSerializer(serializers.Serializer):
    video = serializers.IntegerField(source="video_id")
    reason = serializers.CharField()
    skip = serializers.IntegerField(source="pk", help_text="The skip's id: `POST /api/skips/<id>/undo/` undoes it.")


@extend_schema(
    request=VideoReleaseInputSerializer, responses={200: VideoReleaseOutputSerializer, **error_responses(400, 403, 404)}
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR, COORDINATOR)])
def lease_release(request, video_id: int):
    """Give the video back: done with it, or skipped (no usable pair, bad video, inappropriate content).

    Only the annotator who holds the video's lease, or a coordinator (whoever holds it), may: else 403.
    """
    video = get_object_or_404(Video, pk=video_id)
    data = VideoReleaseInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    skip = picking.video_release(video=video, user=request.user, **data.validated_data)
    return Response(VideoReleaseOutputSerializer(skip).data)


class VideoSkipSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    video = serializers.IntegerField(source="video_id")
    yt8m_id = serializers.CharField(source="video.yt8m_id")
    reason = serializers.CharField()
    note = serializers.CharField()
    created = serializers.DateTimeField()


@extend_schema(responses={200: VideoSkipSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(ANNOTATOR)])
def video_skip_list(request):
    """Your 100 newest skips (and "done"s), each undone with `POST /api/skips/<id>/undo/` (a plain list)."""
    skips = VideoSkip.objects.filter(user=request.user).select_related("video").order_by("-created", "-pk")[:100]
    return Response(VideoSkipSerializer(skips, many=True).data)


class VideoSkipUndoOutputSerializer(serializers.Serializer):
    video = serializers.IntegerField(source="pk")
    yt8m_id = serializers.CharField()


@extend_schema(request=None, responses={200: VideoSkipUndoOutputSerializer, **error_responses(403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR, COORDINATOR)])
def video_skip_undo(request, skip_id: int):
    """Undo a skip (or a "done"): the video is offered to its skipper again. Yours, or any as a coordinator."""
    video = picking.video_skip_undo(skip_id=skip_id, user=request.user)
    return Response(VideoSkipUndoOutputSerializer(video).data)


class VideoAssignInputSerializer(serializers.Serializer):
    username = free_text(150, lines="single", allow_blank=True, help_text="Empty to clear the assignment.")
    confirm = yes_no(
        required=False,
        default=False,
        help_text="Needed when another annotator holds the video: their lease ends and their draft goes along.",
    )


class VideoAssignOutputSerializer(serializers.Serializer):
    video = serializers.IntegerField()
    assigned_to = serializers.CharField(allow_null=True, help_text="The annotator's username; null: nobody.")


@extend_schema(
    request=VideoAssignInputSerializer,
    responses={200: VideoAssignOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def video_assign(request, video_id: int):
    """Coordinators: give a video to one annotator (it is offered to them first, and to nobody else). 409 naming
    the holder and the age of their draft when another annotator holds it and `confirm` is not set."""
    video = get_object_or_404(Video, pk=video_id)
    data = VideoAssignInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    username = data.validated_data["username"]
    user = get_object_or_404(get_user_model(), username=username) if username else None
    video = picking.video_assign(video=video, user=user, by=request.user, confirmed=data.validated_data["confirm"])
    return Response(VideoAssignOutputSerializer({"video": video.pk, "assigned_to": username or None}).data)


class PairDraftSerializer(serializers.Serializer):
    # An object, as the schema says: null, a list or a number is a 400 "Expected a dictionary of items".
    state = serializers.DictField(help_text="The workbench state, a JSON object (not null).")
    version = whole_number(
        high=ID_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="PUT: the draft version this state was based on (0: none yet); a newer saved draft answers 409. "
        "The answer: the version now saved.",
    )
    updated = serializers.DateTimeField(read_only=True, required=False, allow_null=True)


class PairDraftStateSerializer(serializers.Serializer):
    state = serializers.DictField(help_text="The autosaved state; {} when there is none.")
    version = serializers.IntegerField(read_only=True, help_text="Its version (0: none yet): send it with the PUT.")
    updated = serializers.DateTimeField(read_only=True, allow_null=True, help_text="When it was saved; null: never.")


@extend_schema(methods=["GET"], responses={200: PairDraftStateSerializer, **error_responses(403, 404)})
@extend_schema(
    methods=["PUT"],
    request=PairDraftSerializer,
    responses={200: PairDraftSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["GET", "PUT"])
@permission_classes([HasRole.of(ANNOTATOR)])
def draft(request, video_id: int):
    """GET your autosaved workbench state for a video; PUT replaces it (the workbench does, as you type), 409 if
    another tab saved a newer draft since the version you send."""
    video = get_object_or_404(Video, pk=video_id)
    if request.method == "GET":
        return Response(PairDraftStateSerializer(work_draft_of(picking.VIDEOS, item=video, user=request.user)).data)
    data = PairDraftSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    picking.video_draft_check(video=video, user=request.user)
    saved = work_draft_save(picking.VIDEOS, item=video, user=request.user, **data.validated_data)
    return Response(PairDraftSerializer(saved).data)


class PairSubmitInputSerializer(serializers.Serializer):
    video = whole_number(low=1)
    index_a = whole_number(help_text="Frame A's index in the video.")
    index_b = whole_number()
    category = serializers.ChoiceField(choices=Category.choices)
    question = free_text(QUESTION_MAX, allow_blank=True)
    answer = free_text(SHORT_TEXT_MAX, allow_blank=True, required=False, default="")
    distractors = serializers.ListField(
        child=free_text(SHORT_TEXT_MAX, allow_blank=True),
        required=False,
        default=list,
        max_length=OPTIONS_MAX,
    )
    answer_frame = serializers.ChoiceField(
        choices=["a", "b", ""], required=False, default="", help_text="Binary categories: which frame is the answer."
    )
    client_key = free_text(64, lines="single", help_text="Random per pair; a retry with it makes no second pair.")
    pair = whole_number(low=1, required=False, allow_null=True, default=None, help_text="Resubmit this pair.")
    version = whole_number(required=False, allow_null=True, default=None)
    draft_version = whole_number(
        high=ID_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="The draft version this pair came from: that draft is deleted, a newer one (another tab's) kept.",
    )
    active_ms = whole_number(
        required=False,
        allow_null=True,
        default=None,
        help_text="Active workbench time spent on this version (visible tab, recent input), milliseconds.",
    )
    regions = regions_field(
        FrameRegionSerializer,
        required=False,
        default=list,
        help_text="Where A and B differ: boxes on frame A or B, in pixels of the frame (at most 20).",
    )
    model_draft = whole_number(
        low=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="The model's draft (POST /api/videos/{id}/model-draft/) the texts started from, if any.",
    )


class PairOutputSerializer(serializers.ModelSerializer):
    index_1 = serializers.IntegerField(source="image_1.frame.index", default=None)
    index_2 = serializers.IntegerField(source="image_2.frame.index", default=None)
    model_correct = serializers.SerializerMethodField(
        help_text="Models correct k of n: k, the models whose latest answer to this pair was right."
    )
    model_answered = serializers.SerializerMethodField(
        help_text="n: the models that answered this pair (failed requests are not counted)."
    )

    def get_model_correct(self, pair) -> int:
        return pair.model_score()[0]

    def get_model_answered(self, pair) -> int:
        return pair.model_score()[1]

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
            "regions",
            "similarity",
            "client_key",
            "model_correct",
            "model_answered",
            "drafted_by",
            "draft_changes",
        ]


class PairSubmitOutputSerializer(PairOutputSerializer):
    draft_version = serializers.IntegerField(
        read_only=True, help_text="Your draft on this video: its version now (0: none)."
    )

    class Meta(PairOutputSerializer.Meta):
        fields = [*PairOutputSerializer.Meta.fields, "draft_version"]


@extend_schema(
    request=PairSubmitInputSerializer,
    responses={
        201: OpenApiResponse(PairSubmitOutputSerializer, description="A new pair, or a new version of your pair."),
        200: OpenApiResponse(PairSubmitOutputSerializer, description="This client key was sent before: the same pair."),
        **error_responses(400, 403, 404, 409),
    },
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def pair_submit(request):
    """Submit a pair for review (201), or the same client key again (200, the same pair)."""
    data = PairSubmitInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    video = get_object_or_404(Video, pk=fields.pop("video"))
    pair, created = picking.pair_submit(user=request.user, video=video, pair_id=fields.pop("pair"), **fields)
    pair.draft_version = work_draft_of(picking.VIDEOS, item=video, user=request.user).version
    return Response(
        PairSubmitOutputSerializer(pair).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
    )


class PairCorrectionsSerializer(serializers.Serializer):
    """Only the fields the reviewer changed."""

    category = serializers.ChoiceField(choices=Category.choices, required=False)
    question = free_text(QUESTION_MAX, required=False, allow_blank=True)
    answer = free_text(SHORT_TEXT_MAX, required=False, allow_blank=True)
    distractors = serializers.ListField(
        child=free_text(SHORT_TEXT_MAX, allow_blank=True), required=False, max_length=OPTIONS_MAX
    )
    regions = regions_field(
        required=False, help_text="The corrected difference regions, all of them, on images 1 and 2 ([] for none)."
    )


DECISIONS = [(value, label) for value, label in Review.Decision.choices if value != Review.Decision.REOPEN]


class PairReviewInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=DECISIONS)
    version = whole_number(help_text="The version of the pair you reviewed.")
    reason = free_text(NOTE_MAX, required=False, allow_blank=True, default="")
    corrections = PairCorrectionsSerializer(
        required=False, default=dict, help_text="category, question, answer, distractors, regions"
    )
    guideline_version = whole_number(
        low=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="A rejection's cited guideline: the id of a version of the pair's category's guideline.",
    )


class PairReviewOutputSerializer(serializers.Serializer):
    pair = PairOutputSerializer()
    decision = serializers.CharField()
    reason = serializers.CharField()
    changes = serializers.JSONField()
    next_url = serializers.CharField()


@extend_schema(
    request=PairReviewInputSerializer,
    responses={200: PairReviewOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER)])
def pair_review(request, pair_id: int):
    """Accept, reject (reason required) or correct and accept a submitted pair. 409 when it changed meanwhile."""
    pair = get_object_or_404(Pair, pk=pair_id)
    data = PairReviewInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    review = picking.pair_review(pair=pair, reviewer=request.user, **data.validated_data)
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


@extend_schema(request=None, responses={200: PairOutputSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def pair_withdraw(request, pair_id: int):
    """Withdraw your submitted pair before anyone decides on it: it is kept as withdrawn (never reviewed or
    exported) and its frames are free for another pair."""
    pair = get_object_or_404(Pair, pk=pair_id)
    return Response(PairOutputSerializer(picking.pair_withdraw(pair=pair, user=request.user)).data)


class PairReopenInputSerializer(serializers.Serializer):
    reason = free_text(NOTE_MAX, help_text="Why the decision is taken back (kept in the pair's history).")


class PairReopenOutputSerializer(serializers.Serializer):
    pair = PairOutputSerializer()
    reason = serializers.CharField()


@extend_schema(
    request=PairReopenInputSerializer,
    responses={200: PairReopenOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER, COORDINATOR)])
def pair_reopen(request, pair_id: int):
    """Reopen the decision on an accepted or rejected pair (the reviewer who made it, or a coordinator, with a
    reason): the pair goes back to the review queue."""
    pair = get_object_or_404(Pair, pk=pair_id)
    data = PairReopenInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    review = picking.pair_reopen(pair=pair, by=request.user, reason=data.validated_data["reason"])
    return Response({"pair": PairOutputSerializer(review.pair).data, "reason": review.reason})
