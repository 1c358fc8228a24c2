"""API of models that draft: ask a drafting model for a draft of the pair editor's frames A and B, and ask the models
that answer in the background the question being written; on a video and on a candidate pair of a collection alike
(the editor's sources). The editor's script calls these; the model is asked by the server, never by the browser (API
keys stay server-side)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.collections.authoring import CandidateSource
from annotator.drafting import services as drafting
from annotator.models import Category, ModelDraft, PairCandidate, Video
from annotator.picking.services import VideoSource
from api.errors import error_responses
from api.fields import free_text, whole_number
from subtlebench.roles import ANNOTATOR, HasRole
from subtlebench.text import OPTIONS_MAX, QUESTION_MAX, SHORT_TEXT_MAX


class ModelDraftInputSerializer(serializers.Serializer):
    category = serializers.ChoiceField(choices=Category.choices)
    index_a = whole_number(help_text="Frame A's index (a candidate pair's image: 0 or 1): sent as the first image.")
    index_b = whole_number(help_text="Frame B's index: sent as the second image.")
    endpoint = whole_number(
        low=1, required=False, allow_null=True, default=None, help_text="A drafting model; none: the team's default."
    )


class ModelDraftSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelDraft
        fields = [
            "id",
            "endpoint_name",
            "model_id",
            "category",
            "index_a",
            "index_b",
            "question",
            "answer",
            "distractors",
            "answer_frame",
            "latency_ms",
        ]


def _draft(request, source):
    data = ModelDraftInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    draft = drafting.model_draft_request(user=request.user, source=source, endpoint_id=fields.pop("endpoint"), **fields)
    return Response(ModelDraftSerializer(draft).data, status=status.HTTP_201_CREATED)


DRAFT_SCHEMA = extend_schema(
    request=ModelDraftInputSerializer,
    responses={201: ModelDraftSerializer, **error_responses(400, 403, 404, 409, 503)},
)


@DRAFT_SCHEMA
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def model_draft(request, video_id: int):
    """Ask a drafting model for the question, answer and distractors of frames A and B in a category (201). 409 when
    you do not hold the video or no model may draft; 503 when the model did not answer in time or its reply is
    unusable (the message says why)."""
    return _draft(request, VideoSource(get_object_or_404(Video, pk=video_id)))


@DRAFT_SCHEMA
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_model_draft(request, candidate_id: int):
    """Ask a drafting model for the question, answer and distractors of a candidate pair's images A and B (0 and 1)
    in a category (201). 409 when you do not hold the candidate pair or no model may draft; 503 when the model did not
    answer in time or its reply is unusable (the message says why)."""
    return _draft(request, CandidateSource(get_object_or_404(PairCandidate, pk=candidate_id)))


class DraftAnswersInputSerializer(serializers.Serializer):
    category = serializers.ChoiceField(choices=Category.choices)
    index_a = whole_number()
    index_b = whole_number()
    question = free_text(QUESTION_MAX, allow_blank=True)
    answer = free_text(SHORT_TEXT_MAX, allow_blank=True, required=False, default="")
    distractors = serializers.ListField(
        child=free_text(SHORT_TEXT_MAX, allow_blank=True), required=False, default=list, max_length=OPTIONS_MAX
    )
    answer_frame = serializers.ChoiceField(choices=["a", "b", ""], required=False, default="")


class ModelAnswerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    verdict = serializers.ChoiceField(choices=["right", "wrong", "failed"])
    chose = serializers.CharField(help_text="The option text it chose; empty when it failed.")
    message = serializers.CharField(help_text="Why it failed; empty otherwise.")


class DraftAnswersSerializer(serializers.Serializer):
    asked = serializers.IntegerField(help_text="n: the models asked.")
    answered = serializers.IntegerField()
    wrong = serializers.IntegerField(help_text="k: the models whose answer was wrong.")
    failed = serializers.IntegerField(help_text="Requests that failed: no answer, neither right nor wrong.")
    models = ModelAnswerSerializer(many=True)


def _answers(request, source):
    data = DraftAnswersInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    answers = drafting.draft_answers(user=request.user, source=source, **data.validated_data)
    return Response(DraftAnswersSerializer(answers).data)


ANSWERS_SCHEMA = extend_schema(
    request=DraftAnswersInputSerializer,
    responses={200: DraftAnswersSerializer, **error_responses(400, 403, 404, 409)},
)


@ANSWERS_SCHEMA
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def draft_answers(request, video_id: int):
    """The models that answer drafts in the background answer the question as it stands: "k of n models wrong"."""
    return _answers(request, VideoSource(get_object_or_404(Video, pk=video_id)))


@ANSWERS_SCHEMA
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def candidate_draft_answers(request, candidate_id: int):
    """The background answers on a candidate pair's images A and B: "k of n models wrong"."""
    return _answers(request, CandidateSource(get_object_or_404(PairCandidate, pk=candidate_id)))
