"""API of the blind second review (the double-review sample, annotator/stats): the next item, and a decision.

Neither answer carries the pair's status, its reviews or the first decision: the second review is blind.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.models import DoubleReview
from annotator.stats import services as stats
from api.errors import error_responses
from api.fields import free_text
from subtlebench.roles import REVIEWER, HasRole
from subtlebench.text import NOTE_MAX


class BlindPairSerializer(serializers.Serializer):
    """What the second reviewer judges: the images, the question and its options. No status, no decision."""

    id = serializers.IntegerField()
    category = serializers.CharField()
    domain = serializers.CharField()
    question = serializers.CharField()
    answer = serializers.CharField()
    distractors = serializers.ListField(child=serializers.CharField())
    image_1 = serializers.IntegerField(source="image_1_id")
    image_2 = serializers.IntegerField(source="image_2_id")


class SecondReviewItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    pair = BlindPairSerializer()


class SecondReviewNextSerializer(serializers.Serializer):
    item = SecondReviewItemSerializer(allow_null=True)
    waiting = serializers.IntegerField(help_text="Second reviews waiting for you.")


@extend_schema(responses={200: SecondReviewNextSerializer, **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(REVIEWER)])
def second_review_next(request):
    """The next pair waiting for your blind second review (item null when none)."""
    item = stats.second_review_next(user=request.user)
    waiting = DoubleReview.objects.waiting_for(request.user).count()
    return Response({"item": SecondReviewItemSerializer(item).data if item else None, "waiting": waiting})


class SecondReviewInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=DoubleReview.Decision.choices)
    reason = free_text(NOTE_MAX, required=False, allow_blank=True, default="", help_text="Required to reject.")


class SecondReviewOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    pair = serializers.IntegerField(source="pair_id")
    decision = serializers.CharField(source="second_decision")
    reason = serializers.CharField(source="second_reason")
    next_url = serializers.CharField()


@extend_schema(
    request=SecondReviewInputSerializer,
    responses={200: SecondReviewOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER)])
def second_review_submit(request, double_review_id: int):
    """Give the blind second review of a pair in the double-review sample. It never changes the pair."""
    item = get_object_or_404(DoubleReview, pk=double_review_id)
    data = SecondReviewInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    done = stats.second_review_submit(double_review=item, reviewer=request.user, **data.validated_data)
    following = stats.second_review_next(user=request.user)
    done.next_url = f"/review/second/{following.pk}/" if following else "/review/"
    return Response(SecondReviewOutputSerializer(done).data)
