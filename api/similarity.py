"""Similarity API: the similarity of any two images, a video's embedding status, subtle-pair suggestions."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.models import Image, Pair, Video
from annotator.similarity import services as similarity
from api.errors import error_responses
from api.fields import ObjectIdField, free_text
from api.server_paths import CoordinatorOnlyPaths
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole
from subtlebench.text import NOTE_MAX

ANY_ROLE = HasRole.of(ANNOTATOR, REVIEWER, COORDINATOR)


class ImagesSimilarityInputSerializer(serializers.Serializer):
    image_1 = ObjectIdField(queryset=Image.objects.all())
    image_2 = ObjectIdField(queryset=Image.objects.all())


class EmbeddingModelSerializer(CoordinatorOnlyPaths, serializers.Serializer):
    """The active embedding model (`manage.py check_dinov3 --activate`)."""

    coordinator_paths = ("folder",)

    fingerprint = serializers.CharField(help_text="Which weights, input size and dtype.")
    dim = serializers.IntegerField(help_text="Embedding width.")
    layers = serializers.IntegerField()
    dtype = serializers.CharField()
    image_size = serializers.IntegerField(help_text="Square input size in pixels.")
    demo = serializers.BooleanField(help_text="An untrained demo model: its similarities mean nothing.")
    folder = serializers.CharField(
        help_text="The folder it was activated from (its last part only, for anyone but a coordinator)."
    )
    activated_at = serializers.DateTimeField(allow_null=True)
    activated_by = serializers.CharField()


class ImagesSimilarityOutputSerializer(serializers.Serializer):
    similarity = serializers.FloatField(allow_null=True)
    status = serializers.ChoiceField(choices=["pass", "fail", "pending"])
    threshold = serializers.FloatField()
    model = serializers.CharField(
        allow_null=True, help_text="Fingerprint of the active model (weights, input size, dtype); null: none."
    )
    embedding_model = EmbeddingModelSerializer(allow_null=True, help_text="The active model; null while none is.")


@extend_schema(
    parameters=[ImagesSimilarityInputSerializer],
    responses={200: ImagesSimilarityOutputSerializer, **error_responses(400, 403)},
)
@api_view(["GET"])
@permission_classes([ANY_ROLE])
def images_similarity(request):
    """The DINOv3 cosine similarity of two images from their stored embeddings (pending until both have one)."""
    data = ImagesSimilarityInputSerializer(data=request.query_params)
    data.is_valid(raise_exception=True)
    value = similarity.images_similarity(**data.validated_data)
    model = similarity.embedding_model_active()
    output = {
        "similarity": value,
        "status": similarity.similarity_verdict(value),
        "threshold": settings.SIMILARITY_THRESHOLD,
        "model": model.fingerprint if model is not None else None,
        "embedding_model": similarity.embedding_model_summary(model),
    }
    return Response(ImagesSimilarityOutputSerializer(output, context={"request": request}).data)


class VideoEmbeddingsOutputSerializer(serializers.Serializer):
    frames = serializers.IntegerField()
    embedded = serializers.IntegerField()
    pending = serializers.IntegerField()
    failed = serializers.IntegerField()
    model = serializers.CharField(allow_null=True, help_text="Fingerprint of the active model; null: none is.")
    model_problem = serializers.CharField(allow_null=True, help_text="Why nothing is being embedded, if so.")
    embedding_model = EmbeddingModelSerializer(allow_null=True, help_text="The active model; null while none is.")


@extend_schema(responses={200: VideoEmbeddingsOutputSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([ANY_ROLE])
def video_embeddings(request, video_id: int):
    """How many of the video's frames are embedded, pending or failed under the current model."""
    video = get_object_or_404(Video, pk=video_id)
    counts = similarity.video_embedding_counts(video=video)
    return Response(VideoEmbeddingsOutputSerializer(counts, context={"request": request}).data)


class SuggestionsInputSerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=20)


class SuggestionsOutputSerializer(serializers.Serializer):
    class SuggestionSerializer(serializers.Serializer):
        frame_1 = serializers.IntegerField()
        frame_2 = serializers.IntegerField()
        image_1 = serializers.IntegerField()
        image_2 = serializers.IntegerField()
        index_1 = serializers.IntegerField()
        index_2 = serializers.IntegerField()
        similarity = serializers.FloatField()
        gap = serializers.FloatField(help_text="Seconds between the two frames.")
        reason = serializers.CharField(help_text="Why it is (or is not) suggested: its similarity against the rule.")

    class CountsSerializer(serializers.Serializer):
        subtle = serializers.IntegerField(help_text="Frame pairs in the gap window that pass the rule.")
        under_threshold = serializers.IntegerField(help_text="Frame pairs in the window below the threshold.")
        near_duplicate = serializers.IntegerField(help_text="Frame pairs at or above the near-duplicate ceiling.")

    status = serializers.ChoiceField(choices=["ready", "pending"], help_text="pending: frames still being embedded.")
    results = SuggestionSerializer(many=True, help_text="Subtle pairs, most similar first.")
    below_threshold = SuggestionSerializer(
        many=True, help_text="The most similar pairs in the window that fail the rule (not suggested), with why."
    )
    counts = CountsSerializer()
    demo = serializers.BooleanField(help_text="The similarities come from the untrained demo model.")


@extend_schema(
    parameters=[SuggestionsInputSerializer],
    responses={200: SuggestionsOutputSerializer, **error_responses(400, 403, 404)},
)
@api_view(["GET"])
@permission_classes([ANY_ROLE])
def video_suggestions(request, video_id: int):
    """Frame pairs ranked for subtlety: at least the threshold, below the near-duplicate ceiling, close in time;
    beside them the closest pairs that fail the rule, each with its reason."""
    video = get_object_or_404(Video, pk=video_id)
    data = SuggestionsInputSerializer(data=request.query_params)
    data.is_valid(raise_exception=True)
    result = similarity.video_suggestions(video=video, limit=data.validated_data["limit"])
    return Response(SuggestionsOutputSerializer(result).data)


class PairOverrideInputSerializer(serializers.Serializer):
    reason = free_text(NOTE_MAX, allow_blank=True)


class PairOverrideOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    similarity = serializers.FloatField(allow_null=True)
    similarity_status = serializers.CharField()
    similarity_override_reason = serializers.CharField()


@extend_schema(
    request=PairOverrideInputSerializer, responses={200: PairOverrideOutputSerializer, **error_responses(400, 403, 404)}
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def pair_similarity_override(request, pair_id: int):
    """Let a pair below the similarity threshold be accepted and exported, with a recorded written reason."""
    data = PairOverrideInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    pair = get_object_or_404(Pair, pk=pair_id)
    similarity.pair_override_similarity(pair=pair, user=request.user, reason=data.validated_data["reason"])
    return Response(PairOverrideOutputSerializer(pair).data)
