"""Caption API: batches, the caption queue (lease, draft, submit, skip), review and the exported caption.

Thin views over annotator.captions.services, the same services the pages call.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.captions import services as captions
from annotator.models import Caption, CaptionBatch, CaptionReview, CaptionSkip, CaptionTask
from api.errors import error_responses
from api.fields import ID_MAX, SMALL_MAX, free_text, number, whole_number, yes_no
from subtlebench.roles import ANNOTATOR, COORDINATOR, REVIEWER, HasRole
from subtlebench.text import CAPTION_TEXT_MAX, NAME_MAX, NOTE_MAX


class CaptionOutputSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username")

    class Meta:
        model = Caption
        fields = ["id", "pair", "task", "author", "text", "status", "chosen", "flags", "flag_detail", "submitted_at"]


# --- Batches -----------------------------------------------------------------------------------------------


class CaptionBatchInputSerializer(serializers.Serializer):
    title = free_text(NAME_MAX, lines="single", required=False, allow_blank=True, default="")
    selection = serializers.ChoiceField(choices=CaptionBatch.Selection.choices)
    pair_ids = serializers.ListField(
        child=whole_number(low=1, high=ID_MAX), required=False, default=list, max_length=100000
    )
    fraction = number(required=False, allow_null=True, default=None)
    seed = whole_number(required=False, allow_null=True, default=None, high=ID_MAX)
    captions_per_item = whole_number(required=False, default=1, low=1, high=SMALL_MAX)
    show_question = yes_no(required=False, default=False)
    allow_own_pairs = yes_no(required=False, default=False)


class CaptionBatchOutputSerializer(serializers.ModelSerializer):
    tasks_total = serializers.IntegerField()
    tasks_done = serializers.IntegerField()
    pairs_total = serializers.IntegerField()
    captions_accepted = serializers.IntegerField()
    pair_ids = serializers.SerializerMethodField()

    class Meta:
        model = CaptionBatch
        fields = [
            "id",
            "title",
            "selection",
            "fraction",
            "seed",
            "captions_per_item",
            "show_question",
            "allow_own_pairs",
            "created",
            "tasks_total",
            "tasks_done",
            "pairs_total",
            "captions_accepted",
            "pair_ids",
        ]

    def get_pair_ids(self, batch) -> list[int]:
        return sorted({task.pair_id for task in batch.tasks.all()})


@extend_schema(responses={200: CaptionBatchOutputSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def caption_batch_list(request):
    """The 100 newest caption batches with their progress (a plain list, not paged)."""
    batches = CaptionBatch.objects.with_progress().prefetch_related("tasks")[:100]
    return Response(CaptionBatchOutputSerializer(batches, many=True).data)


@extend_schema(
    request=CaptionBatchInputSerializer, responses={201: CaptionBatchOutputSerializer, **error_responses(400, 403)}
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def caption_batch_create(request):
    """Create a caption batch: all accepted pairs, a list of pair ids, or a stratified sample with a seed."""
    data = CaptionBatchInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    batch = captions.caption_batch_create(created_by=request.user, **data.validated_data)
    batch = CaptionBatch.objects.with_progress().prefetch_related("tasks").get(pk=batch.pk)
    return Response(CaptionBatchOutputSerializer(batch).data, status=status.HTTP_201_CREATED)


# --- The queue ---------------------------------------------------------------------------------------------


class CaptionTaskSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    pair = serializers.IntegerField(source="pair_id")
    batch = serializers.IntegerField(source="batch_id")
    slot = serializers.IntegerField()
    leased_until = serializers.DateTimeField(source="lease_expires")
    image_1 = serializers.SerializerMethodField()
    image_2 = serializers.SerializerMethodField()
    question = serializers.SerializerMethodField()
    answer = serializers.SerializerMethodField()
    draft = serializers.SerializerMethodField()

    def get_image_1(self, task) -> str:
        return self.context["request"].build_absolute_uri(task.pair.image_1.file.url)

    def get_image_2(self, task) -> str:
        return self.context["request"].build_absolute_uri(task.pair.image_2.file.url)

    def get_question(self, task) -> str | None:
        return task.pair.question if task.batch.show_question else None

    def get_answer(self, task) -> str | None:
        return task.pair.answer if task.batch.show_question else None

    def get_draft(self, task) -> str:
        draft = captions.caption_draft_of(task, self.context["request"].user)
        return draft.text if draft else ""


@extend_schema(
    request=None,
    responses={
        200: CaptionTaskSerializer,
        204: OpenApiResponse(description="Nothing to caption for you now."),
        **error_responses(403, 409),
    },
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_task_lease(request):
    """Lease the next caption task (or renew the one you hold). 204 when there is nothing to caption."""
    task = captions.caption_task_lease(user=request.user)
    if task is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    task = CaptionTask.objects.select_related("batch", "pair__image_1", "pair__image_2").get(pk=task.pk)
    return Response(CaptionTaskSerializer(task, context={"request": request}).data)


class CaptionDraftInputSerializer(serializers.Serializer):
    text = free_text(CAPTION_TEXT_MAX, allow_blank=True, trim_whitespace=False)
    version = whole_number(
        high=ID_MAX,
        required=False,
        allow_null=True,
        default=None,
        help_text="The draft version this text was based on (0: none yet); a newer saved draft answers 409.",
    )


class CaptionDraftOutputSerializer(serializers.Serializer):
    text = serializers.CharField()
    version = serializers.IntegerField(source="draft_version", help_text="The draft version now saved.")
    saved = serializers.DateTimeField(source="updated")
    leased_until = serializers.DateTimeField(source="task.lease_expires")


@extend_schema(
    request=CaptionDraftInputSerializer,
    responses={200: CaptionDraftOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["PUT"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_draft_save(request, task_id: int):
    """Save the draft of a leased task; also renews the lease (heartbeat)."""
    get_object_or_404(CaptionTask, pk=task_id)
    data = CaptionDraftInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    caption = captions.caption_draft_save(task_id=task_id, user=request.user, **data.validated_data)
    return Response(CaptionDraftOutputSerializer(caption).data)


class CaptionSubmitInputSerializer(serializers.Serializer):
    text = free_text(CAPTION_TEXT_MAX, allow_blank=True)
    client_key = free_text(64, lines="single", required=False, allow_blank=True, default="")


@extend_schema(
    request=CaptionSubmitInputSerializer,
    responses={201: CaptionOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_submit(request, task_id: int):
    """Submit the caption of a leased task. Sending the same client_key again returns the same caption."""
    get_object_or_404(CaptionTask, pk=task_id)
    data = CaptionSubmitInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    caption = captions.caption_submit(
        task_id=task_id,
        user=request.user,
        text=data.validated_data["text"],
        client_key=data.validated_data["client_key"] or None,
    )
    return Response(CaptionOutputSerializer(caption).data, status=status.HTTP_201_CREATED)


class CaptionSkipInputSerializer(serializers.Serializer):
    reason = free_text(NOTE_MAX, allow_blank=True)


@extend_schema(
    request=CaptionSkipInputSerializer,
    responses={204: OpenApiResponse(description="Skipped."), **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_skip(request, task_id: int):
    """Skip a leased task with a reason; it is not offered to you again."""
    get_object_or_404(CaptionTask, pk=task_id)
    data = CaptionSkipInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    captions.caption_task_skip(task_id=task_id, user=request.user, reason=data.validated_data["reason"])
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(
    request=None, responses={204: OpenApiResponse(description="Released."), **error_responses(403, 404, 409)}
)
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_release(request, task_id: int):
    """Stop for now: give back a task you hold (your draft is kept); 409 for a task you do not hold."""
    get_object_or_404(CaptionTask, pk=task_id)
    captions.caption_task_release(task_id=task_id, user=request.user)
    return Response(status=status.HTTP_204_NO_CONTENT)


class CaptionSkipSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.IntegerField(source="task_id")
    pair = serializers.IntegerField(source="task.pair_id")
    reason = serializers.CharField()
    created = serializers.DateTimeField()


@extend_schema(responses={200: CaptionSkipSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_skip_list(request):
    """Your 100 newest caption skips, each undone with `POST /api/captions/skips/<id>/undo/` (a plain list)."""
    skips = CaptionSkip.objects.filter(user=request.user).select_related("task").order_by("-created", "-pk")[:100]
    return Response(CaptionSkipSerializer(skips, many=True).data)


class CaptionSkipUndoOutputSerializer(serializers.Serializer):
    task = serializers.IntegerField(source="pk")
    status = serializers.CharField()


@extend_schema(request=None, responses={200: CaptionSkipUndoOutputSerializer, **error_responses(403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(ANNOTATOR)])
def caption_skip_undo(request, skip_id: int):
    """Undo one of your caption skips: the task is offered to you again while it is open."""
    task = captions.caption_skip_undo(skip_id=skip_id, user=request.user)
    return Response(CaptionSkipUndoOutputSerializer(task).data)


# --- Review ------------------------------------------------------------------------------------------------


@extend_schema(responses={200: CaptionOutputSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([HasRole.of(REVIEWER)])
def caption_review_queue(request):
    """The 100 oldest submitted captions you may review, never your own (a plain list, not paged)."""
    queue = Caption.objects.reviewable_by(request.user).select_related("author").order_by("submitted_at", "pk")[:100]
    return Response(CaptionOutputSerializer(queue, many=True).data)


DECISIONS = [(v, label) for v, label in CaptionReview.Decision.choices if v != CaptionReview.Decision.REOPEN]


class CaptionReviewInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=DECISIONS)
    reason = free_text(NOTE_MAX, required=False, allow_blank=True, default="")
    text = free_text(CAPTION_TEXT_MAX, required=False, allow_null=True, default=None)


@extend_schema(
    request=CaptionReviewInputSerializer,
    responses={200: CaptionOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER)])
def caption_review(request, caption_id: int):
    """Accept, reject (reason required) or edit and accept a submitted caption that is not your own."""
    get_object_or_404(Caption, pk=caption_id)
    data = CaptionReviewInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    caption = captions.caption_review(caption_id=caption_id, reviewer=request.user, **data.validated_data)
    return Response(CaptionOutputSerializer(caption).data)


@extend_schema(request=None, responses={200: CaptionOutputSerializer, **error_responses(400, 403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER)])
def caption_choose(request, caption_id: int):
    """Make this accepted caption the one the export uses for its pair."""
    get_object_or_404(Caption, pk=caption_id)
    caption = captions.caption_choose(caption_id=caption_id, reviewer=request.user)
    return Response(CaptionOutputSerializer(caption).data)


class CaptionReopenInputSerializer(serializers.Serializer):
    reason = free_text(NOTE_MAX, help_text="Why the decision is taken back (kept in the caption's history).")


@extend_schema(
    request=CaptionReopenInputSerializer,
    responses={200: CaptionOutputSerializer, **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(REVIEWER, COORDINATOR)])
def caption_reopen(request, caption_id: int):
    """Reopen the decision on an accepted or rejected caption (its reviewer or a coordinator, with a reason): it
    waits for review again."""
    get_object_or_404(Caption, pk=caption_id)
    data = CaptionReopenInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    caption = captions.caption_reopen(caption_id=caption_id, by=request.user, reason=data.validated_data["reason"])
    return Response(CaptionOutputSerializer(caption).data)
