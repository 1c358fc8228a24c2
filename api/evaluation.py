"""API of human-baseline studies: coordinator endpoints (studies, invites, progress, results) and the blinded
participant endpoints (the current item, answering it), all over the services the pages use."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, authentication_classes, permission_classes, throttle_classes
from rest_framework.response import Response

from annotator.models import Category, Domain
from api.errors import BodyTooLarge, error_responses
from api.fields import INT32_MAX, free_text, number, whole_number
from evaluation.models import Participant, Study
from evaluation.results.study_summary import study_summary
from evaluation.studies import participation, reports, served_images
from evaluation.studies import services as studies
from evaluation.studies.participant_views import image_url
from subtlebench.errors import Conflict
from subtlebench.roles import COORDINATOR, HasRole
from subtlebench.text import NAME_MAX
from subtlebench.throttles import ParticipantThrottle

Coordinator = HasRole.of(COORDINATOR)


class StudyOutputSerializer(serializers.ModelSerializer):
    release = serializers.SerializerMethodField(
        help_text="The release's number (1 for v1, or for exp-1: see release_name); null before releases."
    )
    release_name = serializers.SerializerMethodField(help_text="The release's name (v1, exp-1); null before releases.")
    baseline = serializers.CharField(source="baseline_label", read_only=True, help_text="What its results are.")
    scored_items = serializers.SerializerMethodField()
    open_url = serializers.SerializerMethodField()
    screen_out_url = serializers.CharField(
        read_only=True, help_text="The completion redirect with the screen-out code (empty without a cc= to replace)."
    )
    return_url = serializers.CharField(read_only=True, help_text="The completion redirect with the return code.")

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "fraction",
            "seed",
            "raters_per_item",
            "categories",
            "domains",
            "release",
            "release_name",
            "split",
            "baseline",
            "open_book",
            "practice_count",
            "items_per_participant",
            "pool_size",
            "open_cap",
            "open_url",
            "completion_code",
            "redirect_url",
            "session_minutes",
            "no_items_code",
            "no_items_url",
            "screen_out_code",
            "screen_out_url",
            "return_code",
            "return_url",
            "screen_out_after_wrong_checks",
            "turned_away",
            "created",
            "scored_items",
        ]

    def get_release(self, study) -> int | None:
        return study.release.number if study.release_id else None

    def get_release_name(self, study) -> str | None:
        return study.release.name if study.release_id else None

    def get_scored_items(self, study) -> int:
        return study.items.scored().count()

    def get_open_url(self, study) -> str:
        return studies.open_url(study) if study.open_cap else ""


class StudyCreateInputSerializer(serializers.Serializer):
    name = free_text(NAME_MAX, lines="single")
    fraction = number(default=0.1, min_value=0.001, max_value=1)
    seed = whole_number(low=-INT32_MAX, default=0)
    raters_per_item = whole_number(default=1, low=1, high=20)
    categories = serializers.ListField(child=serializers.ChoiceField(Category.choices), default=list, max_length=20)
    domains = serializers.ListField(child=serializers.ChoiceField(Domain.choices), default=list, max_length=20)
    release = whole_number(
        low=1, required=False, help_text="The release to draw from, by number (1 for v1); the latest when left out."
    )
    split = serializers.ChoiceField([("test", "test"), ("val", "val")], default="test")
    practice_count = whole_number(default=3, high=20)
    items_per_participant = whole_number(default=0, high=100000)
    invites = whole_number(default=0, high=studies.INVITES_MAX, help_text="Invite links to make with it.")
    open_cap = whole_number(default=0, high=100000)
    redirect_url = serializers.URLField(default="", allow_blank=True, max_length=200)  # the column's
    session_minutes = whole_number(default=60, low=1, high=10080)
    no_items_url = serializers.URLField(default="", allow_blank=True, max_length=200)  # the column's
    screen_out_after_wrong_checks = whole_number(
        default=0, high=100, help_text="Attention checks answered wrong that end a session screened out; 0: never."
    )
    open_book = serializers.BooleanField(
        default=False,
        help_text="Run the study even if items drawn are already public (a published release holds them), labelled "
        "open book; without it such a sample is refused (400, field open_book).",
    )
    show_guidelines = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Participants see each item's category guideline (its text, not its examples) under the question.",
    )


class InviteOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    stage = serializers.CharField()
    prolific_pid = serializers.CharField()


def _invite(participant) -> dict:
    return {
        "id": participant.pk,
        "url": studies.invite_url(participant),
        "stage": participant.stage,
        "prolific_pid": participant.prolific_pid,
    }


@extend_schema(responses={200: StudyOutputSerializer(many=True), **error_responses(403)})
@api_view(["GET"])
@permission_classes([Coordinator])
def study_list(request):
    """Every study (a plain list, not paged)."""
    studies = Study.objects.select_related("release")
    return Response(StudyOutputSerializer(studies, many=True).data)


@extend_schema(request=StudyCreateInputSerializer, responses={201: StudyOutputSerializer, **error_responses(400, 403)})
@api_view(["POST"])
@permission_classes([Coordinator])
def study_create(request):
    """Draw a study from a release's split (the latest release and its test split unless told otherwise)."""
    data = StudyCreateInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    values = dict(data.validated_data)
    release = studies.release_for_study(number=values.pop("release", None))
    study = studies.study_create(**values, release=release, created_by=request.user)
    return Response(StudyOutputSerializer(study).data, status=status.HTTP_201_CREATED)


@extend_schema(responses={200: InviteOutputSerializer(many=True), **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([Coordinator])
def invite_list(request, pk):
    """Every participant link of the study (a plain list, not paged)."""
    study = get_object_or_404(Study, pk=pk)
    return Response([_invite(p) for p in study.participants.all()])


class InviteCreateInputSerializer(serializers.Serializer):
    count = whole_number(low=1, high=studies.INVITES_MAX, help_text="At most this many per request.")


@extend_schema(
    request=InviteCreateInputSerializer,
    responses={201: InviteOutputSerializer(many=True), **error_responses(400, 403, 404, 409)},
)
@api_view(["POST"])
@permission_classes([Coordinator])
def invite_create(request, pk):
    """New invite links (at most INVITES_MAX per request); 409 when every item of the study has its raters."""
    study = get_object_or_404(Study, pk=pk)
    data = InviteCreateInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    participants = studies.study_invite(study=study, count=data.validated_data["count"])
    return Response([_invite(p) for p in participants], status=status.HTTP_201_CREATED)


class StudyProgressSerializer(serializers.Serializer):
    progress = serializers.DictField(help_text="participants, started, finished, responses, responses_needed, ...")
    sample = serializers.DictField(help_text="scored_items, practice_items, attention_checks, strata.")


@extend_schema(responses={200: StudyProgressSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([Coordinator])
def study_progress(request, pk):
    study = get_object_or_404(Study, pk=pk)
    results = reports.study_results(study)
    return Response({"progress": results["progress"], "sample": results["sample"]})


class StudyResultsSerializer(serializers.Serializer):
    study = serializers.DictField(help_text="id, name, seed, fraction, raters_per_item, filters, pool_size, ...")
    sample = serializers.DictField()
    progress = serializers.DictField()
    accuracy = serializers.DictField(
        help_text="Human accuracy by the one rule (each item the share of its raters who were right): micro, macro, "
        "by category and domain, with cluster-robust 95% intervals, and the rule in words."
    )
    attention_checks = serializers.DictField()
    public_items = serializers.DictField(
        help_text="scored (how many scored items a published release holds), of, since (the first publication), "
        "open_book, answers_before and answers_after (each answer against its item's publication), label (what the "
        "baseline is called: 'open book' or 'N items public since <date>, M answers after'; '' when none is public), "
        "warning: answers findable by pixel search."
    )
    agreement = serializers.DictField()
    participants = serializers.ListField(child=serializers.DictField())
    models = serializers.ListField(child=serializers.DictField())
    paper_table = serializers.DictField()


@extend_schema(responses={200: StudyResultsSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([Coordinator])
def study_results(request, pk):
    """The JSON summary: sample, seed, counts, accuracies with cluster-robust intervals, agreement, models."""
    study = get_object_or_404(Study, pk=pk)
    return Response(study_summary(study))


# --- Participants: the token in the URL is the credential; answers are blinded like the pages. ---------------


class ParticipantItemSerializer(serializers.Serializer):
    done = serializers.BooleanField()
    wait = serializers.BooleanField(
        required=False,
        help_text="Every free item is taken for now, or the next one's images cannot be read now: ask again later.",
    )
    item = serializers.CharField(required=False)
    sequence = serializers.IntegerField(required=False)
    planned = serializers.IntegerField(required=False)
    question = serializers.CharField(required=False)
    options = serializers.ListField(child=serializers.CharField(), required=False)
    images = serializers.ListField(child=serializers.CharField(), required=False)
    completion_code = serializers.CharField(
        required=False, help_text="The study's code (what Prolific checks): only once the session has finished."
    )
    participant_code = serializers.CharField(
        required=False, help_text="This session's own completion code: drawn when it finishes, shown only then."
    )
    no_items = serializers.BooleanField(required=False, help_text="No scored item could be served: not finished.")
    no_items_code = serializers.CharField(required=False, help_text="The study's code for arrivals with no item.")
    screened_out = serializers.BooleanField(required=False, help_text="The session ended screened out.")
    screen_out_code = serializers.CharField(required=False, help_text="The study's screen-out code: only then.")
    returned = serializers.BooleanField(required=False, help_text="The participant returned the study.")
    return_code = serializers.CharField(required=False, help_text="The study's return code: only then.")
    redirect = serializers.CharField(required=False, help_text="Where to send the participant with that code.")


class ParticipantAnswerInputSerializer(serializers.Serializer):
    option = whole_number(low=1, high=100, help_text="The displayed position, 1-based.")
    active_ms = whole_number(required=False, allow_null=True)
    client_key = free_text(64, lines="single", required=False, allow_blank=True)


def _refuse_a_large_body(request) -> None:
    """Anyone with a link may call the participant API: a body over PARTICIPANT_API_MAX_BODY_BYTES is refused by
    its declared length, before it is read or parsed."""
    limit = settings.PARTICIPANT_API_MAX_BODY_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = limit + 1
    if length > limit:
        raise BodyTooLarge(f"The request body is {length} bytes; this endpoint takes at most {limit}.")


def _ended(participant: Participant) -> dict:
    """A session that ended unfinished: its code (screen-out or return) and Prolific's redirect with it."""
    study = participant.study
    if participant.stage == "screened out":
        return {
            "done": True,
            "screened_out": True,
            "screen_out_code": study.screen_out_code,
            "redirect": study.screen_out_url,
        }
    return {"done": True, "returned": True, "return_code": study.return_code, "redirect": study.return_url}


def _participant(token: str) -> Participant:
    return get_object_or_404(Participant.objects.select_related("study"), token=token)


@extend_schema(responses={200: ParticipantItemSerializer, **error_responses(404, 409, 413, 429)})
@api_view(["GET"])
@authentication_classes([])
@permission_classes([])
@throttle_classes([ParticipantThrottle])
def participant_item(request, token):
    """The participant's current item (the same one again until it is answered)."""
    _refuse_a_large_body(request)
    participant = _participant(token)
    if participant.stage in ("invited", "practice"):
        raise Conflict("Agree to the study and finish the practice on its pages first.")
    if participant.stage == "turned away":
        return Response({"done": True, "no_items": True, "no_items_code": participant.study.no_items_code})
    if participant.stage in ("screened out", "returned"):
        return Response(_ended(participant))
    assignment = participation.participant_next_item(participant=participant)
    if assignment is None:
        participant.refresh_from_db(fields=["finished_at", "turned_away_at", "ended_at", "ending"])
        if participant.stage in ("screened out", "returned"):
            return Response(_ended(participant))
        if participant.stage == "turned away":
            return Response({"done": True, "no_items": True, "no_items_code": participant.study.no_items_code})
        if participant.finished_at is None:
            return Response({"done": False, "wait": True})
        return Response(
            {
                "done": True,
                "completion_code": participant.study.completion_code,
                "participant_code": participant.completion_code,
            }
        )
    if not served_images.participant_images_ready(assignment):
        return Response({"done": False, "wait": True})  # its images cannot be read now: the item comes later
    return Response(
        {
            "done": False,
            "item": assignment.token,
            "sequence": assignment.sequence,
            "planned": studies.planned_items(participant.study),
            "question": assignment.item.presented().question,
            "options": participation.shown_options(assignment),
            "images": [request.build_absolute_uri(image_url(assignment, slot)) for slot in (1, 2)],
        }
    )


@extend_schema(
    request=ParticipantAnswerInputSerializer,
    responses={
        200: inline_serializer(
            "ParticipantAnswerOutput",
            {"recorded": serializers.BooleanField(help_text="false: a repeat, not counted again.")},
        ),
        **error_responses(400, 404, 409, 413, 429),
    },
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([])
@throttle_classes([ParticipantThrottle])
def participant_answer(request, token, item_token):
    """Answer the item; a repeat (same item, or same client_key) is not counted twice."""
    _refuse_a_large_body(request)
    participant = _participant(token)
    data = ParticipantAnswerInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    outcome = participation.assignment_answer(
        participant=participant,
        token=item_token,
        position=data.validated_data["option"],
        active_ms=data.validated_data.get("active_ms"),
        client_key=data.validated_data.get("client_key") or None,
    )
    return Response({"recorded": outcome.recorded})
