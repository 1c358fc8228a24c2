"""Model runs: one run of an endpoint on a release's split, or one imported results file, and one result per item.

One store of model answers: a run in the app and an imported official results file are both a ModelEvaluation with
one ModelItemResult per item. On a release each result names its ReleaseItem, so the human baseline and every model
score stand on the same frozen items. Each item's result is stored as it arrives, so a restarted worker continues
where it stopped, and "models correct k of n" is read from these rows. The tables keep the names they had when these
models lived in the annotator app (no row was copied when they moved).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotator.llm.client import Failure
from annotator.models import Category, Domain, Job, ModelEndpoint, Pair, Release, ReleaseItem
from subtlebench.text import NAME_MAX, NOTE_MAX, single_line


class ModelEvaluation(models.Model):
    """One run of one endpoint on a set of items, or one imported results file; its progress is its Job's."""

    class Source(models.TextChoices):
        RELEASE = "release", "a release's split"
        IMPORT = "import", "an imported results file"

    # What a run from before releases was asked on, by `parameters["retired_source"]`: such a run is an import now
    # (evaluation migration 0015), its answers kept and read, never asked again.
    RETIRED_SOURCES = {
        "export": "an export's split",
        "study": "a study's sample",
        "filter": "accepted pairs matching a filter",
    }

    class Ended(models.TextChoices):
        COMPLETE = "complete"
        INCOMPLETE = "incomplete"
        FAILED = "failed"

    endpoint = models.ForeignKey(
        ModelEndpoint, models.PROTECT, null=True, blank=True, related_name="evaluations", help_text="None: imported."
    )
    name = models.CharField(
        max_length=NAME_MAX, blank=True, validators=[single_line], help_text="The model's name, for imported files."
    )
    label = models.CharField(
        max_length=NAME_MAX,
        blank=True,
        validators=[single_line],
        help_text="A coordinator's name for the run; it leads the run's name (evaluation.runs.naming).",
    )
    job = models.OneToOneField(Job, models.CASCADE, related_name="model_evaluation")
    source = models.CharField(max_length=10, choices=Source.choices)
    # What was evaluated: the release and its split. An import from before releases has no release: it keeps the
    # study (evaluation.Study's id: new runs meet the studies through their release), or the export job and split,
    # or the pair filter its items were read from.
    release = models.ForeignKey(
        Release,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="model_evaluations",
        help_text="None: before releases.",
    )
    export_job = models.ForeignKey(Job, models.SET_NULL, null=True, blank=True, related_name="+")
    split = models.CharField(max_length=10, blank=True)
    study_id = models.PositiveIntegerField(
        null=True, blank=True, db_index=True, help_text="Before releases only: the study whose sample it answered."
    )
    file_name = models.CharField(max_length=300, blank=True, help_text="The imported results file's name.")
    pair_filter = models.JSONField(default=dict, blank=True)
    # The protocol as run: the seed of the option shuffling, the prompt texts, the request parameters.
    seed = models.IntegerField(default=0)
    prompt = models.JSONField(default=dict, blank=True, help_text="System prompt and template used, as run.")
    parameters = models.JSONField(default=dict, blank=True, help_text="temperature, max_tokens, ...")
    # Issue 28: the prompting strategy (evaluation.runs.strategies) and the endpoint that reads a letter out of
    # the replies the official parser cannot read (None: no extraction pass).
    strategy = models.CharField(max_length=20, default="standard", help_text="The prompting strategy, as run.")
    extraction_endpoint = models.ForeignKey(
        ModelEndpoint,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="extractions",
        help_text="Reads a letter out of the unparsable replies: the second figure, accuracy with LLM extraction.",
    )
    # Running totals, kept with each stored result.
    items = models.PositiveIntegerField(default=0)
    answered = models.PositiveIntegerField(default=0)
    correct = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    unparsable = models.PositiveIntegerField(default=0, help_text="Answered items whose reply names no option.")
    extracted_correct = models.PositiveIntegerField(
        default=0, help_text="Unparsable items whose extracted letter is the correct one."
    )
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    reasoning_tokens = models.PositiveBigIntegerField(default=0, help_text="Of the completion tokens, reasoning.")
    # While its endpoint is down the run is paused, not failed: its unit is queued again for `paused_until`, and
    # `paused_since` (the first pause since the last answer) bounds the wait (MODEL_EVAL_PAUSE_MAX_SECONDS).
    paused_since = models.DateTimeField(null=True, blank=True)
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True, max_length=NOTE_MAX)
    ended = models.CharField(
        max_length=12,
        choices=Ended.choices,
        blank=True,
        help_text="How the last job of the run ended: every item answered, some not, or most requests failed.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    # --- The description task and its judge, circular evaluation (issue 28; evaluation.runs.description).
    task = models.CharField(
        max_length=20,
        choices=[("multiple_choice", "multiple choice"), ("description", "description")],
        default="multiple_choice",
        help_text="multiple_choice: the questions; description: the model describes the difference and a judge "
        "decides whether it matches the human caption.",
    )
    judge = models.ForeignKey(
        ModelEndpoint,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="judged_runs",
        help_text="The description task's judge: the endpoint that compares each description with the caption.",
    )
    judge_prompt = models.JSONField(default=dict, blank=True, help_text="The judge's system prompt and template.")
    circular = models.BooleanField(
        default=False, help_text="Each item asked once per rotation of its options; right only if right every time."
    )

    class Meta:
        db_table = "annotator_modelevaluation"
        ordering = ["-created", "-pk"]

    def __str__(self):
        return f"{self.model_name} on {self.on} ({self.created:%Y-%m-%d})"

    @property
    def model_name(self) -> str:
        """The model's name: its endpoint's, or the name given to an imported file."""
        return self.endpoint.name if self.endpoint_id else (self.name or "imported model")

    @property
    def not_asked(self) -> int:
        """Items without a stored result (answered or failed) yet."""
        return max(0, self.items - self.answered - self.failed)

    @property
    def accuracy(self) -> float | None:
        """Over the answered items only: a failed request is no answer, right or wrong."""
        return self.correct / self.answered if self.answered else None

    @property
    def accuracy_with_extraction(self) -> float | None:
        """The second figure: the unparsable replies read by the extraction endpoint; None without that pass."""
        if not self.extraction_endpoint_id or not self.answered:
            return None
        return (self.correct + self.extracted_correct) / self.answered

    @property
    def state(self) -> str:
        """The run's status in one word: the job's, or "paused" (endpoint down, waiting to resume) while it runs,
        or "incomplete" when it ended with items that have no answer."""
        job = self.job
        if job.is_active and self.paused_until is not None:
            return "paused"
        if job.status == Job.Status.FAILED and self.ended == self.Ended.INCOMPLETE:
            return "incomplete"
        return job.status

    @property
    def is_description(self) -> bool:
        return self.task == "description"

    @property
    def before_releases(self) -> bool:
        return self.release_id is None

    @property
    def on(self) -> str:
        """What it answered, in words: "release v2 (test)", or "before releases: study 4"."""
        if self.release_id:
            return f"release {self.release.name}" + (f" ({self.split})" if self.split else "")
        if self.study_id:
            return f"before releases: study {self.study_id}"
        return f"before releases: {self.source_label}"

    @property
    def source_label(self) -> str:
        """Where its items came from, in words: for a run from before releases, the source it was run on."""
        retired = self.RETIRED_SOURCES.get((self.parameters or {}).get("retired_source"))
        return retired or self.get_source_display()


class ModelItemResult(models.Model):
    """A model's answer to one item, stored as it arrives (at most one per run and item)."""

    class Parse(models.TextChoices):
        PARSED = "parsed", "parsed"
        UNPARSABLE = "unparsable", "unparsable"

    class Extraction(models.TextChoices):
        LETTER = "letter", "a letter"
        NONE = "none", "no option"
        FAILED = "failed", "request failed"

    Failure = Failure

    evaluation = models.ForeignKey(ModelEvaluation, models.CASCADE, related_name="results")
    release_item = models.ForeignKey(
        ReleaseItem,
        models.PROTECT,
        null=True,
        blank=True,
        related_name="model_results",
        help_text="None: before releases.",
    )
    pair = models.ForeignKey(Pair, models.SET_NULL, null=True, blank=True, related_name="model_results")
    question_id = models.CharField(max_length=300, help_text="The item id, as in the export's records.")
    category = models.CharField(max_length=20, choices=Category.choices)
    domain = models.CharField(max_length=20, choices=Domain.choices)
    options = models.JSONField(default=list, help_text="The options in the order sent (A, B, ...).")
    correct_letter = models.CharField(max_length=1)
    predicted_letter = models.CharField(max_length=1, blank=True)
    is_correct = models.BooleanField(null=True, help_text="Null when the request failed.")
    response_text = models.TextField(blank=True, max_length=20000)
    # Issue 28. Parsed: the official parser read a letter naming a shown option; unparsable: it did not (scored
    # wrong, as the official evaluator scores it). Blank: the request failed (no reply), or imported.
    parse_outcome = models.CharField(max_length=12, choices=Parse.choices, blank=True)
    first_response = models.TextField(blank=True, max_length=20000, help_text="A two-stage run's description.")
    extraction = models.CharField(max_length=8, choices=Extraction.choices, blank=True)
    extracted_letter = models.CharField(max_length=1, blank=True)
    extraction_text = models.TextField(blank=True, max_length=2000, help_text="The extraction endpoint's reply.")
    failure = models.CharField(max_length=20, choices=Failure.choices, blank=True)
    failure_message = models.TextField(blank=True, max_length=NOTE_MAX)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # A reasoning model's reasoning, kept apart from the answer: stored and counted, never parsed.
    reasoning_tokens = models.PositiveIntegerField(default=0, help_text="Of the completion tokens, reasoning.")
    reasoning_text = models.TextField(blank=True, max_length=20000, help_text="The reasoning content it returned.")
    latency_ms = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=1, help_text="HTTP attempts of the last ask (backoff).")
    asks = models.PositiveSmallIntegerField(
        default=1, help_text="Times the item was asked by the current job (MODEL_EVAL_ITEM_TRIES at most)."
    )
    created = models.DateTimeField(default=timezone.now)
    # --- Issue 28: the judge's reply (description task; response_text holds the description) and, for a circular
    # run, the letter answered in each rotation of the options (rotation 0 first).
    judge_text = models.TextField(blank=True, max_length=20000)
    rotations = models.JSONField(default=list, blank=True)

    class Meta:
        db_table = "annotator_modelitemresult"
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "question_id"], name="modelitemresult_once_per_item")
        ]
        indexes = [models.Index(fields=["pair", "is_correct"], name="modelitemresult_pair_correct")]

    def __str__(self):
        return f"{self.evaluation_id}: {self.question_id}"
