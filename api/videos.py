"""API for videos and their frames: read by every role, imported by coordinators."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.jobs.services import clean_idempotency_key
from annotator.models import Domain, Frame, Video
from annotator.videos.services import ImportSourceError, videos_import
from api.errors import error_responses
from api.fields import free_text, number, whole_number
from api.jobs import IDEMPOTENCY_KEY
from api.pagination import page_response, paginated
from api.server_paths import CoordinatorOnlyPaths
from subtlebench.errors import Invalid
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole

READERS = HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)


class VideoOutputSerializer(CoordinatorOnlyPaths, serializers.ModelSerializer):
    # Both name files on the server: their folders are for coordinators only.
    coordinator_paths = ("source", "error")

    class Meta:
        model = Video
        fields = [
            "id",
            "yt8m_id",
            "title",
            "labels",
            "domain",
            "source",
            "status",
            "error",
            "duration",
            "fps",
            "width",
            "height",
            "size_bytes",
            "sample_every",
            "sample_count",
            "frame_count",
            "created",
            "updated",
        ]


class FrameOutputSerializer(serializers.ModelSerializer):
    image_id = serializers.IntegerField()
    image_url = serializers.SerializerMethodField()
    thumbnail_url = serializers.SerializerMethodField()
    width = serializers.IntegerField(source="image.width")
    height = serializers.IntegerField(source="image.height")

    class Meta:
        model = Frame
        fields = ["id", "index", "timestamp", "pts", "image_id", "image_url", "thumbnail_url", "width", "height"]

    def get_image_url(self, frame) -> str:
        return self.context["request"].build_absolute_uri(frame.image.file.url)

    def get_thumbnail_url(self, frame) -> str:
        return self.context["request"].build_absolute_uri(frame.image.thumbnail.url)


STATUS_PARAMETER = OpenApiParameter("status", str, enum=Video.Status.values, description="Only videos in this state.")


@extend_schema(
    parameters=[STATUS_PARAMETER], responses={200: VideoOutputSerializer(many=True), **error_responses(400, 403)}
)
@paginated
@api_view(["GET"])
@permission_classes([READERS])
def video_list(request):
    """Videos, newest first; filter with `?status=pending|sampling|sampled|failed`."""
    videos = Video.objects.order_by("-created", "-pk")
    wanted = request.query_params.get("status")
    if wanted:
        if wanted not in Video.Status.values:
            raise Invalid({"status": [f"Unknown status {wanted!r}; one of {', '.join(Video.Status.values)}."]})
        videos = videos.filter(status=wanted)
    return page_response(
        request, videos, lambda page: VideoOutputSerializer(page, many=True, context={"request": request}).data
    )


@extend_schema(responses={200: VideoOutputSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([READERS])
def video_detail(request, video_id):
    video = get_object_or_404(Video, pk=video_id)
    return Response(VideoOutputSerializer(video, context={"request": request}).data)


@extend_schema(responses={200: FrameOutputSerializer(many=True), **error_responses(400, 403, 404)})
@paginated
@api_view(["GET"])
@permission_classes([READERS])
def video_frames(request, video_id):
    """The video's sampled frames in order: index, timestamp (s, from the stream's pts), image and thumbnail."""
    video = get_object_or_404(Video, pk=video_id)
    frames = video.frames.select_related("image").order_by("index")
    return page_response(
        request, frames, lambda page: FrameOutputSerializer(page, many=True, context={"request": request}).data
    )


class VideoImportInputSerializer(serializers.Serializer):
    path = free_text(
        1000,
        lines="single",
        help_text="A folder of videos or a CSV manifest (yt8m_id,path,labels), inside IMPORT_ROOTS.",
    )
    every = number(required=False, min_value=0.01, max_value=3600, help_text="Seconds between frames (default 1).")
    frames = whole_number(required=False, low=1, high=100000, help_text="Or: this many frames per video.")
    domain = serializers.ChoiceField(choices=Domain.choices, default=Domain.NATURAL)

    def validate(self, data):
        if "every" in data and "frames" in data:
            raise serializers.ValidationError("Give either every or frames, not both.")
        return data


class VideoImportOutputSerializer(serializers.Serializer):
    job_id = serializers.IntegerField()
    total = serializers.IntegerField(help_text="Videos (files or manifest rows) in the job.")
    job_url = serializers.CharField()


@extend_schema(
    request=VideoImportInputSerializer,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: VideoImportOutputSerializer, **error_responses(400, 403)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def video_import(request):
    """Start an import job; each video is sampled by a worker. Follow it at /api/jobs/<job_id>/.

    Send an `Idempotency-Key` header to retry safely: the same key answers the job the first request made."""
    data = VideoImportInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        job = videos_import(
            source=data.validated_data["path"],
            every=data.validated_data.get("every"),
            count=data.validated_data.get("frames"),
            domain=data.validated_data["domain"],
            created_by=request.user,
            idempotency_key=clean_idempotency_key(request.headers.get("Idempotency-Key")),
        )
    except ImportSourceError as error:  # the service's source is this endpoint's `path`
        raise Invalid({"path": error.messages}) from error
    output = {"job_id": job.pk, "total": job.total, "job_url": request.build_absolute_uri(f"/api/jobs/{job.pk}/")}
    return Response(VideoImportOutputSerializer(output).data, status=status.HTTP_202_ACCEPTED)
