"""The /models/ pages, all of them: the endpoints and runs, register an endpoint, start a run (on a release's
split), a run's progress and its results file, import an
official results file onto a release, and the runs compared on a release's items."""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotator.jobs.services import clean_idempotency_key
from annotator.llm.endpoints import endpoint_create, endpoint_profile_update
from annotator.llm.keys import bound_hosts, bound_variables, key_problem
from annotator.llm.profiles import DEFAULT_PRESET, EFFORTS, EXTRA_FIELDS, PRESET_CHOICES
from annotator.models import ModelEndpoint, Release
from benchmark.description import JUDGE_SYSTEM, JUDGE_USER
from evaluation.models import ModelEvaluation, ModelItemResult
from evaluation.runs.description import accuracy_rows, accuracy_table
from evaluation.runs.naming import run_name, run_names
from evaluation.runs.results_files import model_results_import, results_file_text
from evaluation.runs.services import evaluation_start, run_label_set
from evaluation.runs.strategies import CHOICES as STRATEGY_CHOICES
from evaluation.runs.strategies import DEFAULT_STRATEGY, PROMPT_MAX, STRATEGIES
from evaluation.runs.summaries import evaluation_summary
from subtlebench.errors import Conflict, Invalid
from subtlebench.keybindings import describe_bindings
from subtlebench.pages import post_only, redirect_refused_form, refused_form
from subtlebench.roles import COORDINATOR, role_required
from subtlebench.text import NAME_MAX, single_line

RUNS_SHOWN = 50
FAILURES_SHOWN = 50
ITEMS_SHOWN = 50
ITEM_FILTERS = ("unparsable", "all")
PROMPT_FIELDS = ("system", "user", "describe_system", "describe")
PROMPT_ORDER = ("describe_system", "describe", "system", "user")  # as a two-stage run sends them


def key_variable_choices() -> list[tuple[str, str]]:
    """The operator's bound key variables, each with the hosts its key may go to (read when the form is built, so
    the operator's settings of this process, never a name typed in)."""
    return [("", "none")] + [(name, f"{name} ({describe_bindings(bound_hosts(name))})") for name in bound_variables()]


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, validators=[single_line])
    base_url = forms.CharField(
        max_length=500, label="Base URL", help_text="OpenAI-compatible, e.g. http://gpu-host:8000/v1"
    )
    model_id = forms.CharField(max_length=NAME_MAX, validators=[single_line], label="Model id")
    api_key = forms.CharField(
        max_length=1000,
        required=False,
        strip=True,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted, never shown again.",
    )
    api_key_env = forms.ChoiceField(
        choices=key_variable_choices,
        required=False,
        label="API key variable",
        help_text="Or: one of the operator's keys, bound to the hosts shown (MODEL_KEY_BINDINGS); it must be bound "
        "to the base URL's host.",
        error_messages={
            "invalid_choice": "Refused: the operator has not bound %(value)s to any host: choose a variable of the "
            "list (the operator binds them in MODEL_KEY_BINDINGS, each starting with MODEL_API_KEY_ENV_PREFIX), or "
            "store a key."
        },
    )
    concurrency = forms.IntegerField(min_value=1, max_value=256, initial=8)
    timeout_s = forms.IntegerField(min_value=1, max_value=3600, initial=120, label="Timeout (s)")
    test_connection = forms.BooleanField(
        required=False,
        initial=True,
        label="Test the connection first",
        help_text="Register only if it answers, serves the model id (per /models) and answers one tiny request.",
    )


EFFORT_CHOICES = [("", "not sent"), *((effort, effort) for effort in EFFORTS)]


class ProfileForm(forms.Form):
    """An endpoint's request profile: a preset, and any field in its place (blank: the preset's)."""

    request_preset = forms.ChoiceField(
        choices=PRESET_CHOICES, initial=DEFAULT_PRESET, required=False, label="Request profile"
    )
    token_field = forms.ChoiceField(
        choices=[
            ("", "the preset's"),
            ("max_tokens", "max_tokens"),
            ("max_completion_tokens", "max_completion_tokens"),
            ("none", "none"),
        ],
        required=False,
        label="Token limit field",
    )
    temperature = forms.ChoiceField(
        choices=[("", "the preset's"), ("yes", "takes a temperature"), ("no", "only its default (none sent)")],
        required=False,
        label="Temperature",
    )
    effort = forms.ChoiceField(
        choices=[("", "the preset's"), ("yes", "takes a reasoning effort"), ("no", "no reasoning effort")],
        required=False,
        label="Reasoning effort",
    )
    extra_body = forms.JSONField(
        required=False,
        label="Extra body fields",
        help_text="A JSON object of fields from: " + ", ".join(EXTRA_FIELDS) + ".",
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    image_detail = forms.ChoiceField(
        choices=[("", "the preset's"), ("none", "not sent"), ("low", "low"), ("high", "high"), ("auto", "auto")],
        required=False,
        label="Image detail",
    )
    price_prompt = forms.DecimalField(
        required=False, min_value=0, max_digits=12, decimal_places=6, label="Price per million prompt tokens"
    )
    price_completion = forms.DecimalField(
        required=False, min_value=0, max_digits=12, decimal_places=6, label="Price per million completion tokens"
    )

    def profile(self) -> dict:
        """The profile's fields for endpoint_create / endpoint_profile_update (None: the preset's)."""
        data = self.cleaned_data
        yes_no = {"": None, "yes": True, "no": False}
        blank_none = {"": None, "none": ""}
        return {
            "request_preset": data["request_preset"] or None,
            "token_field": blank_none.get(data["token_field"], data["token_field"]),
            "sends_temperature": yes_no[data["temperature"] or ""],
            "takes_effort": yes_no[data["effort"] or ""],
            "extra_body": data["extra_body"] if data["extra_body"] not in (None, "") else None,
            "image_detail": blank_none.get(data["image_detail"], data["image_detail"]),
            "price_prompt": data["price_prompt"],
            "price_completion": data["price_completion"],
        }


class NewEndpointForm(EndpointForm, ProfileForm):
    """Registering: the endpoint and its request profile."""


def profile_summary(endpoint: ModelEndpoint) -> str:
    """The endpoint's request profile in a line: "openai_reasoning · max_completion_tokens · no temperature · ..."."""
    parts = [endpoint.request_preset, endpoint.token_field or "no token limit"]
    parts.append("temperature" if endpoint.sends_temperature else "no temperature")
    if endpoint.takes_effort:
        parts.append("reasoning effort")
    parts += [f"{name}={value}" for name, value in sorted((endpoint.extra_body or {}).items())]
    if endpoint.image_detail:
        parts.append(f"detail {endpoint.image_detail}")
    return " · ".join(parts)


def runs():
    return ModelEvaluation.objects.select_related("endpoint", "job", "release", "created_by", "judge").order_by(
        "-created", "-pk"
    )


@role_required(COORDINATOR)
@require_GET
def model_list(request):
    endpoints = list(ModelEndpoint.objects.annotate(runs=Count("evaluations")).order_by("name"))
    for endpoint in endpoints:
        endpoint.key_refused = key_problem(endpoint)
        endpoint.profile_summary = profile_summary(endpoint)
    default_drafter = any(endpoint.default_drafter for endpoint in endpoints)  # drafting/_settings.html
    shown = list(runs()[:RUNS_SHOWN])
    names = run_names(shown)
    for run in shown:
        run.run_name = names[run.pk]
    context = {
        "endpoints": endpoints,
        "runs": shown,
        "default_drafter": default_drafter,
        "profile_form": ProfileForm(auto_id=False),
    }
    return render(request, "modeleval/list.html", context)


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def model_endpoint_new(request):
    """Post/Redirect/Get: a refused form comes back on this page with what was sent and why."""
    if request.method == "GET":
        context = {"form": refused_form(request, NewEndpointForm), "key_variables": bound_variables()}
        return render(request, "modeleval/endpoint_new.html", context)
    form = NewEndpointForm(request.POST)
    secret = ("api_key",)  # a refused form comes back without the key: it never goes into the session
    if not form.is_valid():
        return redirect_refused_form(request, reverse("model-endpoint-new"), form, secret_fields=secret)
    try:
        fields = {name: form.cleaned_data[name] for name in EndpointForm.base_fields}
        endpoint = endpoint_create(user=request.user, **fields, **form.profile())
    except (Invalid, Conflict) as error:
        return redirect_refused_form(request, reverse("model-endpoint-new"), form, error, secret_fields=secret)
    messages.success(request, f"Model {endpoint.name} registered.")
    return redirect("model-list")


@role_required(COORDINATOR)
@post_only("model-list")
def model_endpoint_profile(request, endpoint_id: int):
    """Edit an endpoint's request profile (the Models page's form per endpoint)."""
    endpoint = get_object_or_404(ModelEndpoint, pk=endpoint_id)
    form = ProfileForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(texts)}" for name, texts in form.errors.items())
        messages.error(request, f"Profile of {endpoint.name} not changed: {errors}")
        return redirect("model-list")
    try:
        endpoint_profile_update(user=request.user, endpoint=endpoint, **form.profile())
    except Invalid as error:
        errors = "; ".join(f"{name}: {' '.join(texts)}" for name, texts in error.errors.items())
        messages.error(request, f"Profile of {endpoint.name} not changed: {errors}")
        return redirect("model-list")
    messages.success(request, f"Request profile of {endpoint.name} saved.")
    return redirect("model-list")


def _detail_context(evaluation: ModelEvaluation, shown: str = "unparsable", *, intervals: bool = True) -> dict:
    """The run page's context; `intervals` False (a poll of an active run) leaves out the intervals, which read
    every result and change with each answer: they are shown once the run ends."""
    job = evaluation.job
    # A finished run's stored summary, when it is of the current shape (accuracy over answered items, "not_asked").
    summary = job.result if not job.is_active and "not_asked" in job.result else None
    summary = summary or evaluation_summary(evaluation)
    failures = evaluation.results.exclude(failure="").order_by("-pk")[:FAILURES_SHOWN]
    labels = dict(ModelItemResult.Failure.choices)
    return {
        "evaluation": evaluation,
        "run_name": run_name(evaluation),
        "job": job,
        "summary": summary,
        "categories": sorted(summary["per_category"].items()),  # JSON columns do not keep the order of keys
        "failure_counts": [
            (labels.get(kind, kind).lower(), count) for kind, count in sorted(summary["failures"].items())
        ],
        "failures": failures,
        "prompt_texts": sorted(
            (evaluation.prompt or {}).items(),
            key=lambda text: (PROMPT_ORDER.index(text[0]) if text[0] in PROMPT_ORDER else len(PROMPT_ORDER), text[0]),
        ),
        # Issue 28: the replies the official parser could not read, raw, with what the extraction pass read.
        "items_shown": shown,
        "item_rows": _item_rows(evaluation, shown),
        "intervals": accuracy_rows(accuracy_table(evaluation)) if intervals else None,
        "request_settings": request_settings(evaluation),
    }


def request_settings(evaluation: ModelEvaluation) -> list[tuple[str, str]]:
    """The run's stored request settings, per asker: the model, the judge, the extractor."""
    stored = evaluation.parameters or {}
    rows = []
    for who, key in (("model", "request"), ("judge", "judge_request"), ("extraction", "extraction_request")):
        if key in stored:
            shown = ", ".join(f"{name} {value}" for name, value in sorted(stored[key].items()))
            rows.append((who, shown or "the endpoint's defaults"))
    return rows


@role_required(COORDINATOR)
@require_GET
def model_run_detail(request, run_id: int):
    evaluation = get_object_or_404(
        ModelEvaluation.objects.select_related("endpoint", "job", "release", "extraction_endpoint", "judge"), pk=run_id
    )
    template = "modeleval/run_detail.html"
    polled = bool(request.headers.get("HX-Request"))
    if polled:
        template += "#run-status"
    shown = request.GET.get("items")
    shown = shown if shown in ITEM_FILTERS else ITEM_FILTERS[0]
    # The poll of an active run renders its status only; the poll that sees it end renders the intervals once.
    context = _detail_context(evaluation, shown, intervals=not (polled and evaluation.job.is_active))
    if template.endswith(".html"):
        context["label_form"] = refused_form(request, RunLabelForm, initial={"label": evaluation.label})
    return render(request, template, context)


class RunLabelForm(forms.Form):
    label = forms.CharField(
        max_length=NAME_MAX,
        required=False,
        validators=[single_line],
        help_text="Leads the run's name in every table, legend and download; blank: none.",
    )


@role_required(COORDINATOR)
@post_only("model-run-detail")
def model_run_label(request, run_id: int):
    """Give the run a label (or take it away): it leads the run's name, the descriptive parts still shown."""
    evaluation = get_object_or_404(ModelEvaluation, pk=run_id)
    form = RunLabelForm(request.POST)
    where = reverse("model-run-detail", args=[evaluation.pk])
    if not form.is_valid():
        return redirect_refused_form(request, where, form)
    try:
        run_label_set(user=request.user, evaluation=evaluation, label=form.cleaned_data["label"])
    except Invalid as error:
        return redirect_refused_form(request, where, form, error)
    messages.success(request, "Label saved." if evaluation.label else "Label removed.")
    return redirect(where)


def _item_rows(evaluation: ModelEvaluation, shown: str):
    """The latest items of the run with their raw replies: the unparsable ones (the default), or all."""
    rows = evaluation.results.all()
    if shown == "unparsable":
        rows = rows.filter(parse_outcome=ModelItemResult.Parse.UNPARSABLE)
    return rows.order_by("-pk")[:ITEMS_SHOWN]


@role_required(COORDINATOR)
@require_GET
def model_run_results(request, run_id: int):
    """The run's results in the official results file's format (mc_evaluation_results.json)."""
    evaluation = get_object_or_404(
        ModelEvaluation.objects.select_related("endpoint", "job", "release", "extraction_endpoint"), pk=run_id
    )
    # Streamed, one entry at a time: the file of a large run is never held whole in the web process.
    response = StreamingHttpResponse(results_file_text(evaluation), content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="mc_evaluation_results_{evaluation.pk}.json"'
    return response


# --- Starting a run ---------------------------------------------------------------------------------------------

SPLITS = [("test", "test"), ("val", "val")]


class RunForm(forms.Form):
    endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.filter(archived_at__isnull=True), label="Model", empty_label=None
    )
    release = forms.ModelChoiceField(queryset=Release.objects.all(), required=False)
    split = forms.ChoiceField(choices=SPLITS, initial="test")
    seed = forms.IntegerField(initial=0, min_value=-(2**31) + 1, max_value=2**31 - 1)
    # Issue 28: the run's settings (evaluation.runs.runsettings); a blank text keeps the strategy's default.
    # Left out of a POST: the defaults (the strategy standard, MODEL_EVAL_TEMPERATURE, MODEL_EVAL_MAX_TOKENS).
    strategy = forms.ChoiceField(choices=STRATEGY_CHOICES, initial=DEFAULT_STRATEGY, required=False)
    # Blank: the deployment's MODEL_EVAL_TEMPERATURE where the endpoint takes a temperature, none sent where its
    # profile sends only the model's default (a reasoning model): the form suits either kind of endpoint as it stands.
    temperature = forms.FloatField(
        min_value=0,
        max_value=2,
        required=False,
        help_text="Blank: the deployment's default where the model takes a temperature, none where it does not.",
    )
    max_tokens = forms.IntegerField(
        min_value=0,
        max_value=65536,
        initial=lambda: settings.MODEL_EVAL_MAX_TOKENS,
        required=False,
        help_text="0: not sent.",
    )
    system = forms.CharField(required=False, max_length=PROMPT_MAX, widget=forms.Textarea(attrs={"rows": 4}))
    user = forms.CharField(
        required=False, max_length=PROMPT_MAX, widget=forms.Textarea(attrs={"rows": 4}), label="User template"
    )
    describe_system = forms.CharField(
        required=False, max_length=PROMPT_MAX, widget=forms.Textarea(attrs={"rows": 3}), label="Describe: system"
    )
    describe = forms.CharField(
        required=False, max_length=PROMPT_MAX, widget=forms.Textarea(attrs={"rows": 3}), label="Describe: user"
    )
    effort = forms.ChoiceField(
        choices=EFFORT_CHOICES, required=False, label="Reasoning effort", help_text="For a reasoning model's profile."
    )
    extraction_max_tokens = forms.IntegerField(
        min_value=0,
        max_value=65536,
        required=False,
        label="Extraction max tokens",
        help_text="Blank: 16 (none for a reasoning model).",
    )
    extraction_effort = forms.ChoiceField(choices=EFFORT_CHOICES, required=False, label="Extraction effort")
    judge_max_tokens = forms.IntegerField(
        min_value=0,
        max_value=65536,
        required=False,
        label="Judge max tokens",
        help_text="Blank: 256 (none for a reasoning model).",
    )
    judge_effort = forms.ChoiceField(choices=EFFORT_CHOICES, required=False, label="Judge effort")
    extraction_endpoint = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.filter(archived_at__isnull=True),
        required=False,
        label="LLM extraction",
        empty_label="none",
        help_text="A model that reads a letter out of the replies the official parser cannot read: a second figure.",
    )
    idempotency_key = forms.CharField(required=False, widget=forms.HiddenInput, initial=lambda: uuid.uuid4().hex)
    # Issue 28: the description task and its judge, circular evaluation.
    task = forms.ChoiceField(
        choices=[("multiple_choice", "multiple choice"), ("description", "description (judged against captions)")],
        initial="multiple_choice",
        required=False,  # a form from before the task: multiple choice
        widget=forms.RadioSelect,
    )
    judge = forms.ModelChoiceField(
        queryset=ModelEndpoint.objects.filter(archived_at__isnull=True), required=False, label="Judge"
    )
    judge_system = forms.CharField(
        required=False, max_length=20000, widget=forms.Textarea(attrs={"rows": 6}), label="Judge instructions"
    )
    judge_user = forms.CharField(
        required=False, max_length=20000, widget=forms.Textarea(attrs={"rows": 5}), label="Judge template"
    )
    circular = forms.BooleanField(required=False, label="Circular evaluation")

    def run_settings(self) -> dict:
        data = self.cleaned_data
        texts = {name: data[name] for name in PROMPT_FIELDS if data.get(name, "").strip()}
        strategy = data["strategy"] or DEFAULT_STRATEGY
        if not STRATEGIES[strategy].two_stage:
            texts.pop("describe_system", None), texts.pop("describe", None)
        return {
            "strategy": strategy,
            "prompt": texts,
            "temperature": data["temperature"],
            "max_tokens": data["max_tokens"],
            "effort": data.get("effort") or None,
            "extraction_endpoint": data["extraction_endpoint"],
            "extraction_max_tokens": data.get("extraction_max_tokens") if data["extraction_endpoint"] else None,
            "extraction_effort": (data.get("extraction_effort") or None) if data["extraction_endpoint"] else None,
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["release"].label_from_instance = lambda release: f"{release.name} · {release.item_count} items"


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def model_run_new(request):
    """Post/Redirect/Get: a refused form comes back on this page with what was sent and why."""
    if request.method == "GET":
        form = refused_form(request, RunForm)
        form.fields["judge_system"].initial = JUDGE_SYSTEM
        form.fields["judge_user"].initial = JUDGE_USER
        return render(
            request, "modeleval/run_new.html", {"form": form, "has_endpoints": ModelEndpoint.objects.exists()}
        )
    form = RunForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        fields = {"seed": data["seed"], "idempotency_key": clean_idempotency_key(data["idempotency_key"])}
        fields.update(form.run_settings())
        fields.update(task=data["task"] or "multiple_choice", judge=data["judge"], circular=data["circular"])
        if data["task"] == "description":
            fields["judge_prompt"] = {"system": data["judge_system"], "user": data["judge_user"]}
            fields.update(judge_max_tokens=data["judge_max_tokens"], judge_effort=data["judge_effort"] or None)
        fields.update(release=data["release"], split=data["split"])
        if data["release"] is None:
            form.add_error("release", "Pick the release to evaluate.")
        if form.is_valid():
            try:
                evaluation = evaluation_start(endpoint=data["endpoint"], user=request.user, **fields)
            except (Invalid, Conflict) as error:
                return redirect_refused_form(request, reverse("model-run-new"), form, error)
            return redirect("model-run-detail", run_id=evaluation.pk)
    return redirect_refused_form(request, reverse("model-run-new"), form)


# --- Importing an official results file onto a release ---------------------------------------------------------


class ImportForm(forms.Form):
    release = forms.ModelChoiceField(queryset=Release.objects.all(), empty_label=None)
    name = forms.CharField(max_length=NAME_MAX, validators=[single_line], label="Model name")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["release"].label_from_instance = lambda release: f"{release.name} · {release.item_count} items"


@role_required(COORDINATOR)
@require_http_methods(["GET", "POST"])
def model_import(request):
    """An official mc_evaluation_results.json onto a release: matched by the release's item ids, exactly; the
    entries of unknown ids are counted and named, and stored nowhere."""
    if request.method == "GET":
        context = {"form": refused_form(request, ImportForm), "has_releases": Release.objects.exists()}
        return render(request, "modeleval/import.html", context)
    form = ImportForm(request.POST)
    upload = request.FILES.get("file")
    if form.is_valid() and upload is None:
        form.add_error(None, "Choose the mc_evaluation_results.json file.")
    if not form.is_valid():
        return redirect_refused_form(request, reverse("model-import"), form)
    try:
        evaluation = model_results_import(
            user=request.user,
            release=form.cleaned_data["release"],
            name=form.cleaned_data["name"],
            content=upload.read(),
            file_name=upload.name,
        )
    except (Invalid, Conflict) as error:
        return redirect_refused_form(request, reverse("model-import"), form, error)
    unknown = evaluation.parameters["unknown"]
    note = f"{evaluation.items} entries matched items of release {evaluation.release.name}"
    if unknown:
        shown = ", ".join(evaluation.parameters["unknown_ids"][:3])
        note += f"; {unknown} name no item of it and were not stored (first: {shown})"
        messages.warning(request, note + ".")
    else:
        messages.success(request, note + ".")
    return redirect("model-run-detail", run_id=evaluation.pk)
