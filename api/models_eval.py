"""Models in the loop, API: list and register model endpoints, start an evaluation run (202 and its job), a run's
progress and summary, its results file. Coordinators only; thin views over evaluation.runs (the same services
the /models/ pages call).

An endpoint's base URL must be http(s) with a host, without credentials, query or fragment, on a host the worker
may reach (one of MODEL_ENDPOINT_HOSTS, or with none set a public one). Its API key is written, never read back, or
is one of the operator's key variables bound to that host (MODEL_KEY_BINDINGS)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.response import Response

from annotator.jobs.services import clean_idempotency_key
from annotator.llm.endpoints import endpoint_create, endpoint_profile_update
from annotator.llm.profiles import DEFAULT_PRESET, EFFORTS, EXTRA_FIELDS, PRESET_CHOICES
from annotator.models import ModelEndpoint, Release
from api.errors import error_responses
from api.fields import INT32_MAX, ObjectIdField, free_text, whole_number
from api.jobs import IDEMPOTENCY_KEY
from api.pagination import page_response, paginated
from evaluation.models import ModelEvaluation
from evaluation.runs.description import accuracy_table
from evaluation.runs.naming import run_name
from evaluation.runs.results_files import results_file
from evaluation.runs.services import evaluation_start, run_label_set
from evaluation.runs.strategies import CHOICES as STRATEGY_CHOICES
from evaluation.runs.strategies import PROMPT_MAX
from evaluation.runs.summaries import evaluation_summary
from subtlebench.roles import COORDINATOR, HasRole
from subtlebench.text import NAME_MAX

EFFORT_CHOICES = [(effort, effort) for effort in EFFORTS]


class ProfileSerializer(serializers.Serializer):
    """An endpoint's request profile (docs/guides/models.md#request-profiles): a preset, then any field given in
    its place (left out or null: the preset's)."""

    request_preset = serializers.ChoiceField(
        PRESET_CHOICES, default=DEFAULT_PRESET, help_text="Fills every field below; a field given replaces it."
    )
    token_field = serializers.ChoiceField(
        [("max_tokens", "max_tokens"), ("max_completion_tokens", "max_completion_tokens"), ("", "none")],
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="The body field of the token limit; empty: none is sent.",
    )
    sends_temperature = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="False: only its default temperature (none sent)."
    )
    takes_effort = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="Takes a reasoning effort (a reasoning model)."
    )
    extra_body = serializers.DictField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Extra body fields, each from: " + ", ".join(EXTRA_FIELDS) + ".",
    )
    image_detail = serializers.ChoiceField(
        [("", "not sent"), ("low", "low"), ("high", "high"), ("auto", "auto")],
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
    )
    price_prompt = serializers.FloatField(
        min_value=0,
        max_value=1e6,
        required=False,
        allow_null=True,
        default=None,
        help_text="Per million prompt tokens: a run's cost.",
    )
    price_completion = serializers.FloatField(
        min_value=0,
        max_value=1e6,
        required=False,
        allow_null=True,
        default=None,
        help_text="Per million completion tokens (reasoning included).",
    )


class EndpointSerializer(ProfileSerializer):
    id = serializers.IntegerField(read_only=True)
    name = free_text(NAME_MAX, lines="single")
    base_url = free_text(500, lines="single", help_text="OpenAI-compatible base URL, e.g. http://gpu-host:8000/v1")
    model_id = free_text(NAME_MAX, lines="single")
    api_key = serializers.CharField(
        max_length=1000,
        required=False,
        default="",
        allow_blank=True,
        write_only=True,
        trim_whitespace=True,
        help_text="The API key: stored encrypted, never returned. Or name its variable in api_key_env.",
    )
    api_key_env = free_text(
        100,
        lines="single",
        required=False,
        default="",
        allow_blank=True,
        help_text="One of the operator's key variables (MODEL_KEY_BINDINGS), bound to the base URL's host; any other "
        "name is refused (400 on api_key_env).",
    )
    has_stored_key = serializers.SerializerMethodField()
    concurrency = whole_number(low=1, high=256, default=8)
    timeout_s = whole_number(low=1, high=3600, default=120)
    test_connection = serializers.BooleanField(
        default=True,
        write_only=True,
        help_text="Register only if the endpoint answers, serves model_id (per /models) and answers one tiny "
        "request (false: register an endpoint that is not up yet).",
    )
    created = serializers.DateTimeField(read_only=True)

    def get_has_stored_key(self, endpoint) -> bool:
        return bool(endpoint.api_key_encrypted)

    def to_representation(self, endpoint):
        shown = super().to_representation(endpoint)
        shown["token_field"] = endpoint.token_field  # "" is "none": no limit is sent
        shown["image_detail"] = endpoint.image_detail
        return shown


class JudgePromptSerializer(serializers.Serializer):
    system = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    user = serializers.CharField(
        required=False, allow_blank=True, max_length=20000, help_text="Holds {caption} and {description}."
    )


class RunCreateSerializer(serializers.Serializer):
    endpoint = ObjectIdField(queryset=ModelEndpoint.objects.all())
    source = serializers.ChoiceField(
        [(ModelEvaluation.Source.RELEASE, "release")],
        default=ModelEvaluation.Source.RELEASE,
        help_text="A run is on a release's split (an official results file is imported, not run).",
    )
    release = ObjectIdField(
        queryset=Release.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The release whose split the model answers.",
    )
    split = serializers.ChoiceField([("test", "test"), ("val", "val")], default="test")
    seed = whole_number(low=-INT32_MAX, default=0)
    # Issue 28: the run's settings; left out, the defaults (docs/guides/models.md#strategies).
    strategy = serializers.ChoiceField(STRATEGY_CHOICES, default="standard", help_text="The prompting strategy.")
    prompt = serializers.DictField(
        child=serializers.CharField(max_length=PROMPT_MAX, allow_blank=True),
        required=False,
        default=dict,
        help_text="Texts replacing the strategy's defaults: system and user ({question}, {options}); for two_stage "
        "also describe_system, describe ({question}) and a user text with {description}.",
    )
    temperature = serializers.FloatField(
        min_value=0, max_value=2, required=False, allow_null=True, default=None, help_text="Default: 0.5."
    )
    max_tokens = whole_number(
        low=0,
        high=65536,
        required=False,
        allow_null=True,
        default=None,
        help_text="The token limit, sent in the field the endpoint's profile names (0: not sent).",
    )
    effort = serializers.ChoiceField(
        EFFORT_CHOICES, required=False, allow_null=True, default=None, help_text="A reasoning model's effort."
    )
    extraction_max_tokens = whole_number(low=0, high=65536, required=False, allow_null=True, default=None)
    extraction_effort = serializers.ChoiceField(EFFORT_CHOICES, required=False, allow_null=True, default=None)
    judge_max_tokens = whole_number(low=0, high=65536, required=False, allow_null=True, default=None)
    judge_effort = serializers.ChoiceField(EFFORT_CHOICES, required=False, allow_null=True, default=None)
    extraction_endpoint = ObjectIdField(
        queryset=ModelEndpoint.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="A registered endpoint that reads a letter out of the unparsable replies (the second figure).",
    )
    extraction_prompt = serializers.DictField(
        child=serializers.CharField(max_length=PROMPT_MAX, allow_blank=True),
        required=False,
        default=dict,
        help_text="Texts replacing the extraction's defaults: system, user ({question}, {options}, {response}).",
    )
    # Issue 28: the description task and its judge, circular evaluation.
    task = serializers.ChoiceField(
        [("multiple_choice", "multiple_choice"), ("description", "description")], default="multiple_choice"
    )
    judge = ObjectIdField(
        queryset=ModelEndpoint.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The description task's judge: the endpoint that compares each description with the caption.",
    )
    judge_prompt = JudgePromptSerializer(required=False, default=None, allow_null=True)
    circular = serializers.BooleanField(
        default=False, help_text="Ask each item once per rotation of its options; right only if right every time."
    )


class RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.SerializerMethodField(
        help_text="What the run is: its label, the model, strategy, task, prompt hash and the settings off their "
        "defaults (evaluation.runs.naming); runs listed together that share one get their number."
    )
    label = serializers.CharField(help_text="The coordinator's label; blank: none.")
    endpoint = serializers.CharField(source="model_name")
    model_id = serializers.CharField(source="endpoint.model_id", default=None, allow_null=True)
    source = serializers.CharField()
    release = serializers.CharField(source="release.name", default=None, allow_null=True)
    split = serializers.CharField()
    study_id = serializers.IntegerField(allow_null=True, help_text="Before releases only.")
    pair_filter = serializers.DictField()
    seed = serializers.IntegerField()
    strategy = serializers.CharField()
    temperature = serializers.FloatField(source="parameters.request.temperature", default=None, allow_null=True)
    max_tokens = serializers.IntegerField(source="parameters.request.max_tokens", default=None, allow_null=True)
    effort = serializers.CharField(source="parameters.request.reasoning_effort", default=None, allow_null=True)
    request_settings = serializers.SerializerMethodField(
        help_text="The stored request settings of the model, the judge and the extractor (temperature, max_tokens, "
        "reasoning_effort), and the model's request profile as the run was created."
    )
    prompt = serializers.DictField(child=serializers.CharField(), help_text="The texts the run sends, as run.")
    extraction_endpoint = serializers.CharField(source="extraction_endpoint.name", default=None, allow_null=True)
    job_id = serializers.IntegerField()
    status = serializers.CharField(source="job.status")
    state = serializers.ChoiceField(
        choices=["queued", "running", "paused", "succeeded", "incomplete", "failed", "cancelled"],
        help_text="The job's status, or paused (endpoint down: see pause_reason, paused_until) while it runs, or "
        "incomplete when it ended with items left without an answer.",
    )
    answered = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Items whose request failed: no answer, not counted in accuracy.")
    not_asked = serializers.IntegerField()
    accuracy = serializers.FloatField(
        allow_null=True,
        help_text="Over the answered items only; an unparsable reply counts as wrong, as the official evaluator "
        "scores it.",
    )
    unparsable = serializers.IntegerField(help_text="Answered items whose reply names no option.")
    accuracy_with_extraction = serializers.FloatField(
        allow_null=True, help_text="With the extraction pass's letters for the unparsable replies; null without it."
    )
    paused_until = serializers.DateTimeField(allow_null=True)
    pause_reason = serializers.CharField()
    percent = serializers.IntegerField(source="job.percent")
    errors = serializers.ListField(child=serializers.CharField(), source="job.errors")
    summary = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()
    task = serializers.CharField()
    judge = serializers.CharField(source="judge.name", default=None, allow_null=True)
    circular = serializers.BooleanField()
    intervals = serializers.SerializerMethodField(
        help_text="Accuracy over the answered items with its 95% cluster-robust interval: overall, per category, "
        "per domain ({correct, n, accuracy, low, high, clusters})."
    )

    def get_name(self, evaluation) -> str:
        return run_name(evaluation)

    def get_summary(self, evaluation) -> dict:
        return evaluation_summary(evaluation)

    def get_request_settings(self, evaluation) -> dict:
        stored = evaluation.parameters or {}
        keys = ("request", "judge_request", "extraction_request", "profile")
        return {key: stored[key] for key in keys if key in stored}

    def get_intervals(self, evaluation) -> dict:
        return accuracy_table(evaluation)

    def get_results_url(self, evaluation) -> str | None:
        return None if evaluation.job.is_active else f"/api/models/runs/{evaluation.pk}/results/"


class RunLabelSerializer(serializers.Serializer):
    label = free_text(NAME_MAX, lines="single", allow_blank=True, help_text="Leads the run's name; blank: none.")


def evaluations():
    return ModelEvaluation.objects.select_related("endpoint", "job", "release", "extraction_endpoint", "judge")


@extend_schema(responses={200: EndpointSerializer(many=True), **error_responses(400, 403)})
@paginated
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def endpoint_list(request):
    """The registered model endpoints, by name."""
    endpoints = ModelEndpoint.objects.order_by("name")
    return page_response(request, endpoints, lambda page: EndpointSerializer(page, many=True).data)


@extend_schema(request=EndpointSerializer, responses={201: EndpointSerializer, **error_responses(400, 403, 409)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def endpoint_create_api(request):
    """Register a model endpoint (409 when the name is taken)."""
    data = EndpointSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    endpoint = endpoint_create(user=request.user, **data.validated_data)
    return Response(EndpointSerializer(endpoint).data, status=status.HTTP_201_CREATED)


@extend_schema(request=ProfileSerializer, responses={200: EndpointSerializer, **error_responses(400, 403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def endpoint_profile_api(request, endpoint_id: int):
    """Set an endpoint's request profile: a preset, then any field given in its place. Runs created later are
    checked against it; a paused run uses it when it resumes."""
    endpoint = get_object_or_404(ModelEndpoint, pk=endpoint_id)
    data = ProfileSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    endpoint = endpoint_profile_update(user=request.user, endpoint=endpoint, **data.validated_data)
    return Response(EndpointSerializer(endpoint).data)


@extend_schema(
    request=RunCreateSerializer,
    parameters=[IDEMPOTENCY_KEY],
    responses={202: RunSerializer, **error_responses(400, 403, 409)},
)
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def run_create(request):
    """Queue an evaluation run on a release's split; poll the run (or /api/jobs/<job_id>/) for progress."""
    data = RunCreateSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fields = dict(data.validated_data)
    endpoint = fields.pop("endpoint")
    options = {"seed": fields["seed"], "idempotency_key": clean_idempotency_key(request.headers.get("Idempotency-Key"))}
    for name in (
        "strategy",
        "prompt",
        "temperature",
        "max_tokens",
        "effort",
        "extraction_endpoint",
        "extraction_prompt",
        "extraction_max_tokens",
        "extraction_effort",
        "judge_max_tokens",
        "judge_effort",
    ):
        options[name] = fields[name]
    options.update(
        task=fields["task"],
        judge=fields["judge"],
        judge_prompt=dict(fields["judge_prompt"] or {}),
        circular=fields["circular"],
    )
    options.update(release=fields["release"], split=fields["split"])
    evaluation = evaluation_start(endpoint=endpoint, user=request.user, **options)
    return Response(RunSerializer(evaluation).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses={200: RunSerializer, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def run_detail(request, run_id: int):
    """One run: status, progress, accuracy per category, failures by kind, tokens and elapsed seconds."""
    return Response(RunSerializer(get_object_or_404(evaluations(), pk=run_id)).data)


@extend_schema(responses={200: OpenApiTypes.OBJECT, **error_responses(403, 404)})
@api_view(["GET"])
@permission_classes([HasRole.of(COORDINATOR)])
def run_results(request, run_id: int):
    """The run's results in the official results file's format (mc_evaluation_results.json)."""
    return Response(results_file(get_object_or_404(evaluations(), pk=run_id)))


@extend_schema(request=RunLabelSerializer, responses={200: RunSerializer, **error_responses(400, 403, 404)})
@api_view(["POST"])
@permission_classes([HasRole.of(COORDINATOR)])
def run_label(request, run_id: int):
    """Give the run a label (blank: take it away): it leads the run's name in every table, legend and download."""
    evaluation = get_object_or_404(evaluations(), pk=run_id)
    data = RunLabelSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    run_label_set(user=request.user, evaluation=evaluation, label=data.validated_data["label"])
    return Response(RunSerializer(evaluation).data)
