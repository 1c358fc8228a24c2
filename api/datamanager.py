"""API of the data manager's bulk actions: the same service (annotator.datamanager.bulk.bulk_start) as the pages.

`POST /api/pairs/bulk/` and `POST /api/videos/bulk/` take `ids` (a list) or `filter` (the table's filter keys, as
in the page's query string) with an `action`; they answer 202 with the job, whose progress `/api/jobs/<id>/` shows.
`.../bulk/preview/` answers what the same body would change, and `POST /api/bulk/<job id>/undo/` takes it back.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response
from rest_framework.utils import html

from annotator.datamanager.bulk import ACTIONS, BULK_MAX_ITEMS, bulk_start
from annotator.datamanager.preview import bulk_preview
from annotator.datamanager.undo import bulk_undo
from annotator.jobs.services import clean_idempotency_key
from annotator.models import Job
from api.errors import error_responses
from api.fields import ID_MAX, free_text, whole_number
from api.jobs import IDEMPOTENCY_KEY, JobOutputSerializer, job_output
from benchmark import jsonlimits
from subtlebench.roles import COORDINATOR, HasRole
from subtlebench.text import NOTE_MAX


class FilterField(serializers.DictField):
    """The table's filters by name (e.g. {"status": "submitted", "similarity_min": "0.8", "q": "cup"}).

    In a form body the filter is its JSON text (`filter={"status": "submitted"}`) or keys (`filter.status=...`).
    DRF alone reads `filter=<text>` as an empty filter, which matches every row: a bulk action on all of them."""

    def __init__(self, **kwargs):
        super().__init__(child=free_text(200, lines="single", allow_blank=True), **kwargs)

    def get_value(self, dictionary):
        if html.is_html_input(dictionary) and self.field_name in dictionary:
            text = dictionary[self.field_name]
            try:
                return jsonlimits.loads(text) if isinstance(text, str) else text
            except ValueError:
                return text  # not JSON: refused as "not a dictionary", naming the field
        return super().get_value(dictionary)


def bulk_input(table: str):
    class BulkInputSerializer(serializers.Serializer):
        ids = serializers.ListField(
            child=whole_number(low=1, high=ID_MAX),
            max_length=10_000,
            required=False,
            help_text="The rows to act on; or send filter.",
        )
        filter = FilterField(required=False, help_text="Every row this filter matches now; or send ids.")
        action = serializers.ChoiceField(choices=list(ACTIONS[table]))
        reason = free_text(NOTE_MAX, required=False, allow_blank=True, default="", help_text="Needed to reject.")
        target = free_text(
            150,
            lines="single",
            required=False,
            allow_blank=True,
            default="",
            help_text="pairs, caption_batch: the batch id; videos, assign: the annotator's username (empty: nobody).",
        )

        expect_count = serializers.IntegerField(
            required=False,
            min_value=0,
            max_value=BULK_MAX_ITEMS,
            help_text="The preview's count: the action is refused (409) when the selection covers another number.",
        )
        expect_digest = serializers.CharField(
            required=False,
            max_length=16,
            help_text="The preview's digest: refused (409) when the selection covers other rows.",
        )

    BulkInputSerializer.__name__ = f"{table.capitalize()}BulkInputSerializer"
    return BulkInputSerializer


class PreviewRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    now = serializers.CharField(help_text="Its value now (empty when it stays as it is).")
    after = serializers.CharField(help_text="Its value after the action.")
    stays = serializers.CharField(help_text="Why it stays as it is (the action refuses it), or empty.")


class PreviewOutputSerializer(serializers.Serializer):
    table = serializers.CharField()
    action = serializers.CharField()
    count = serializers.IntegerField(help_text="Rows the selection covers now.")
    will_change = serializers.IntegerField()
    stays = serializers.IntegerField()
    digest = serializers.CharField(help_text="Send it back as expect_digest, with count as expect_count.")
    sample = PreviewRowSerializer(many=True, help_text="The first rows of the selection, by id.")


class UndoKeptSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    why = serializers.CharField()


class UndoOutputSerializer(serializers.Serializer):
    restored = serializers.IntegerField(help_text="Items given back their state from before the action.")
    kept_count = serializers.IntegerField(help_text="Items kept as they are, because they changed since.")
    kept = UndoKeptSerializer(many=True, help_text="The first 200 of them, with what changed.")


PairsBulkInput = bulk_input("pairs")
VideosBulkInput = bulk_input("videos")


def start(request, table: str, serializer_class):
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    expect = None
    if "expect_count" in values:
        expect = {"count": values["expect_count"], "digest": values.get("expect_digest", "")}
    job = bulk_start(
        expect=expect,
        table=table,
        action=values["action"],
        by=request.user,
        ids=values.get("ids"),
        filter=values.get("filter"),
        reason=values["reason"],
        target=values["target"],
        key=clean_idempotency_key(request.headers.get("Idempotency-Key")),
    )
    return Response(job_output(request, job), status=status.HTTP_202_ACCEPTED)


@extend_schema(
    request=PairsBulkInput,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: JobOutputSerializer, **error_responses(400, 403)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def pairs_bulk(request):
    """Coordinators: accept, reject (with a reason), reopen, add to a caption batch, exclude from or return to study
    pools, or re-score many pairs as one job. Each pair follows the one-by-one rules; the job lists the refusals."""
    return start(request, "pairs", PairsBulkInput)


@extend_schema(
    request=VideosBulkInput,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: JobOutputSerializer, **error_responses(400, 403)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def videos_bulk(request):
    """Coordinators: assign many videos to one annotator (by username), or release their leases, as one job."""
    return start(request, "videos", VideosBulkInput)


def preview(request, table: str, serializer_class):
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    shown = bulk_preview(
        table=table,
        action=values["action"],
        by=request.user,
        ids=values.get("ids"),
        filter=values.get("filter"),
        reason=values["reason"],
        target=values["target"],
    )
    return Response(PreviewOutputSerializer(shown).data)


@extend_schema(request=PairsBulkInput, responses={200: PreviewOutputSerializer, **error_responses(400, 403)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def pairs_bulk_preview(request):
    """Coordinators: what a bulk action on pairs would change now (counts and a sample), without running it. Send
    its count and digest with the action (expect_count, expect_digest) to run it only on the same selection."""
    return preview(request, "pairs", PairsBulkInput)


@extend_schema(request=VideosBulkInput, responses={200: PreviewOutputSerializer, **error_responses(400, 403)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def videos_bulk_preview(request):
    """Coordinators: what a bulk action on videos would change now (counts and a sample), without running it."""
    return preview(request, "videos", VideosBulkInput)


@extend_schema(request=None, responses={200: UndoOutputSerializer, **error_responses(403, 404, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def bulk_undo_view(request, job_id: int):
    """Coordinators: undo a bulk action (its job) within BULK_UNDO_HOURS: each item still as the action left it gets
    its previous state back; an item changed since is kept as it is and listed. 409 once undone, or too late."""
    job = get_object_or_404(Job, pk=job_id, kind=Job.Kind.BULK)
    return Response(UndoOutputSerializer(bulk_undo(job=job, by=request.user)).data)
